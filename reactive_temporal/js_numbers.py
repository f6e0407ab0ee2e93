"""Numbers written as the released implementation (JavaScript) writes them (pure).

Its markdown and notes round with `Math.round` and `toFixed`, which take a half up; Python's
`round()` and format specs take it to the even neighbour: 5 of 8 calls was "62% success"
here and "63%" there, 1,250 ms "1.2s" and "1.3s", $0.03125 "$0.0312" and "$0.0313".
"""

from __future__ import annotations

import math
from decimal import ROUND_HALF_UP, Decimal


def js_round(value: float) -> int:
    """`Math.round(value)`: the nearest integer, a half up (62.5 → 63, -2.5 → -2)."""
    return math.floor(value + 0.5)


def to_fixed(value: float, digits: int) -> str:
    """`value.toFixed(digits)`: the exact binary value rounded a half away from zero, as
    JavaScript does (1.25 → "1.3", 0.03125 → "0.0313", 1.005 → "1.00": just below a half)."""
    if not math.isfinite(value):
        return str(value)
    return str(Decimal(value).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP))
