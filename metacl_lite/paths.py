"""Where the package and the project folder are: the package's own folder, whether it runs from a source checkout,
and the project folder under which results/, runs/ and the reproduction files go by default."""
from __future__ import annotations

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent  # metacl_lite/
#: Run from a source checkout (pyproject.toml beside the package), or from an installed package (site-packages).
IN_CHECKOUT = (PACKAGE_DIR.parent / "pyproject.toml").exists()
#: The project folder under which results/, runs/ and the reproduction files go by default: the checkout's root in a
#: source checkout; for an installed package the folder it was started from, never inside site-packages.
REPO_ROOT = PACKAGE_DIR.parent if IN_CHECKOUT else Path.cwd().resolve()


def tracked(path) -> bool:
    """Whether `path` is a file git tracks in this checkout (where `git checkout -- path` restores it); False for an
    installed package, a file outside the checkout, an untracked or ignored one (runs/, a copy in /tmp), or no git."""
    import subprocess

    p = Path(path).resolve()
    if not IN_CHECKOUT or not p.is_relative_to(REPO_ROOT):
        return False
    try:
        return subprocess.run(["git", "ls-files", "--error-unmatch", "--", str(p.relative_to(REPO_ROOT))],
                              cwd=REPO_ROOT, capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False
