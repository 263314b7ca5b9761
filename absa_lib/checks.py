"""The type rules every check of a value uses: a bool is not a number (``True == 1`` would pass as
seed 1, ``False`` as a count of 0), and a number is finite."""

from __future__ import annotations

import math


def is_kind(value, kind: type | tuple[type, ...]) -> bool:
    """``isinstance``, where a bool is not a number."""
    return isinstance(value, kind) if kind in (bool, (bool,)) else isinstance(value, kind) and not isinstance(value, bool)


def is_int(value) -> bool:
    """An integer, not a bool."""
    return is_kind(value, int)


def is_number(value) -> bool:
    """A finite int or float, not a bool."""
    return is_kind(value, (int, float)) and math.isfinite(value)
