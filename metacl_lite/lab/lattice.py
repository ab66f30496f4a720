"""The half-decade lattice of the beta/gamma grids (…, 0.1, 0.3, 1, 3, 10, …; `tuning.PROTOCOL`): the grids searched,
the value chosen and whether it lies on an edge, the half-decades that extend a grid beyond that edge, and the windows
of a search centred on a value tuned at another K (`tune --around`). Numbers only; `tuning` runs the units."""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from ..errors import UsageError


#: The grids searched (the same decades for every regulariser; gamma also tries 0).
def half_decades(lo: float, hi: float) -> tuple[float, ...]:
    """1, 3, 10, 30, ... between lo and hi (both powers of ten): the half-decade grid (…, 0.1, 0.3, 1, 3, 10, …)."""
    out, e = [], round(math.log10(lo))
    while 10.0 ** e <= hi * 1.0001:
        out += [float(f"1e{e}"), float(f"3e{e}")]
        e += 1
    return tuple(v for v in out if v <= hi * 1.0001)


BETA_GRID = half_decades(1e-2, 1e4)
GAMMA_GRID = (0.0,) + BETA_GRID
#: How far `tune` extends a grid whose best value lies on an edge (half-decades beyond it, at most).
MAX_EXTENSION = 6
#: Half-decades searched on each side of the centre by a windowed search (`tune(around=K')`).
WINDOW = 2


def check_grid(name: str, values: Sequence[float]) -> list[float]:
    out = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise UsageError(f"{name}: {v!r} is not a finite number >= 0")
        if float(v) in out:
            raise UsageError(f"{name}: {v!r} is given twice")
        out.append(float(v))
    if not out:
        raise UsageError(f"{name} is empty")
    return sorted(out)


def half_decade_index(v: float) -> int:
    """The position of v on the half-decade lattice (..., 0.1 -> -2, 0.3 -> -1, 1 -> 0, 3 -> 1, 10 -> 2, ...)."""
    e = math.floor(math.log10(v) + 1e-9)
    mant = v / 10 ** e
    for r, m in ((0, 1.0), (1, 3.0)):
        if abs(mant - m) < 1e-6:
            return 2 * e + r
    raise UsageError(f"{v:g} is not on the half-decade grid (1, 3, 10, 30, ... times a power of ten)")


def half_decade(i: int) -> float:
    """The lattice value at position i (`half_decade_index`'s inverse), written as the grids write it (3e-2 = 0.03)."""
    e, r = divmod(i, 2)
    return float(f"{3 if r else 1}e{e}")


def window_grid(centre: float, param: str, half_decades: int = WINDOW) -> list[float]:
    """A windowed search's grid: the half-decade values within `half_decades` steps of `centre` on either side; a
    gamma grid also holds 0 (the pure projection), and a gamma centred on 0 searches 0 and the `half_decades` + 1
    smallest values of GAMMA_GRID."""
    if centre == 0:
        if param != "gamma":
            raise UsageError("a beta of 0 cannot centre a windowed search (it is not a penalty); search the full grid")
        return [0.0] + [v for v in GAMMA_GRID if v > 0][: half_decades + 1]
    i = half_decade_index(centre)
    values = [half_decade(j) for j in range(i - half_decades, i + half_decades + 1)]
    return ([0.0] if param == "gamma" else []) + values


def choose(g: dict) -> dict:
    """The value with the best mean validation ACC (ties: the smaller value, np.argmax takes the first), and whether
    it lies on an edge of the searched range: the largest value, or the smallest positive one, or gamma = 0 (the
    pure projection of Eq. 5) where a positive gamma was searched: the half-decades between 0 and the smallest
    positive value are unsearched either way (at K = 200, MAS-MetaCL-lambda-mem's best was 0 beside 0.01, and 0.003,
    below, scored 3 points more). tied: every value of a grid of two or more scored the same, so the search decided
    nothing (no edge, nothing to extend or write)."""
    best = int(np.argmax(g["mean_val_acc"]))
    v, values = g["values"][best], g["values"]
    lowest_positive = min((x for x in values if x > 0), default=None)
    tied = len(values) > 1 and len(set(g["mean_val_acc"])) == 1
    edge = v == lowest_positive or (v == 0 and lowest_positive is not None) or (v > 0 and best == len(values) - 1)
    return {"value": v, "at_edge": not tied and edge, "tied": tied}


def _step(v: float, up: bool) -> float:
    """The next half-decade value above (or below) v (1 -> 3 -> 10 -> 30 ...)."""
    e = math.floor(math.log10(v) + 1e-9)
    mant = v / 10 ** e
    if up:
        return float(f"3e{e}") if mant < 2 else float(f"1e{e + 1}")
    return float(f"1e{e}") if mant > 2 else float(f"3e{e - 1}")


def extension(g: dict, base: Sequence[float]) -> list[float]:
    """Two more half-decades beyond the edge where the best value lies (none when it is interior, or when the grid
    was already extended MAX_EXTENSION half-decades beyond the protocol's grid on that side)."""
    c = choose(g)
    if not c["at_edge"]:
        return []
    v = c["value"] or min(x for x in g["values"] if x > 0)  # gamma = 0: below the smallest positive value searched
    up = c["value"] > 0 and v == g["values"][-1]
    positive = [b for b in base if b > 0]
    limit = max(positive) if up else min(positive)
    steps, x = 0, limit
    while x != v and steps <= MAX_EXTENSION:
        x, steps = _step(x, up), steps + 1
    if steps >= MAX_EXTENSION:
        return []
    new = [_step(v, up)]
    return new + [_step(new[0], up)]
