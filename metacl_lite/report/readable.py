"""Numbers and tables as a reader reads them (the book's chapters): `sci` writes 1.35e-14 as "1.4 × 10⁻¹⁴" and 0.0036
as "0.0036"; `styled` shows a DataFrame with chosen formats, "–" for a missing value and no index-name artefacts."""
from __future__ import annotations

import math
from typing import Any, Callable, Mapping, Optional, Union

import pandas as pd

MINUS = "\u2212"  # the typographic minus sign
DASH = "–"  # a missing value
_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def sci(x: Optional[float], digits: int = 2) -> str:
    """`x` with `digits` significant digits: in plain decimals when 0.001 <= |x| < 10 000 ("0.0036", "4.85",
    1234 stays "1234"), else as "m × 10ᵏ" with Unicode superscripts ("1.4 × 10⁻¹⁴"). 0 is "0"; None and NaN are
    "–"; a negative number starts with a minus sign (−), not a hyphen."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return DASH
    x = float(x)
    if x == 0:
        return "0"
    if math.isinf(x):
        return ("" if x > 0 else MINUS) + "∞"
    sign = MINUS if x < 0 else ""
    # the exponent after rounding to `digits` significant digits (9.96 at 2 digits is 10, exponent 1)
    mant, exp = f"{abs(x):.{digits - 1}e}".split("e")
    e = int(exp)
    if -3 <= e < 4:
        return sign + f"{abs(x):.{max(digits - 1 - e, 0)}f}"
    return f"{sign}{mant} × 10{str(e).translate(_SUPERSCRIPT)}"


def percent(x: Optional[float], decimals: int = 0) -> str:
    """A share (0..1) as a percentage, "60 %"; None and NaN are "–"."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return DASH
    return f"{100 * float(x):.{decimals}f} %"


Formatter = Union[str, Callable[[Any], str]]


def styled(df: pd.DataFrame, formats: Optional[Mapping[str, Formatter]] = None, index: bool = True,
           na: str = DASH):
    """A pandas Styler of `df` for a page: the given per-column formats (a format string such as "{:.1f}" or a
    function), `na` for every missing value, the index shown without its name (index=False hides it), and the
    class "dataframe" so the book styles it as any other table."""
    st = df.style.format(na_rep=na).format(dict(formats or {}), na_rep=na)
    st = st.set_table_attributes('class="dataframe"')
    if not index:
        st = st.hide(axis="index")
    else:
        st = st.hide(axis="index", names=True)
    return st.hide(axis="columns", names=True)
