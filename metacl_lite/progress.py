"""Progress bars (tqdm), with the switches that turn them off: a flag, the environment (METACL_LITE_PROGRESS) or CI.
They report on a run's outer loops (tasks, grid units, cached images) and never touch its arithmetic."""
from __future__ import annotations

import os
from typing import Iterable, Optional

#: The spellings of METACL_LITE_PROGRESS that turn progress bars off (any case, surrounding spaces ignored).
FALSE_SPELLINGS = ("0", "false", "no", "off", "")


def progress_enabled(flag: Optional[bool] = None) -> bool:
    """Progress bars: on by default in a terminal; off with flag=False, METACL_LITE_PROGRESS=0 (or false, no, off,
    empty; any case), or under CI."""
    if flag is not None:
        return flag
    if os.environ.get("METACL_LITE_PROGRESS") is not None:
        return os.environ["METACL_LITE_PROGRESS"].strip().lower() not in FALSE_SPELLINGS
    return not os.environ.get("CI")


def progress(it: Iterable, enabled: Optional[bool] = None, **kw):
    from tqdm.auto import tqdm

    return tqdm(it, disable=not progress_enabled(enabled), leave=False, **kw)
