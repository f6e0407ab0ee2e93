"""Numbers written as the released implementation (JavaScript) writes them (pure).

Its markdown and notes round with `Math.round` and `toFixed`, which take a half up; Python's
`round()` and format specs take it to the even neighbour: 5 of 8 calls was "62% success"
here and "63%" there, 1,250 ms "1.2s" and "1.3s", $0.03125 "$0.0312" and "$0.0313".

Total on any number, as JavaScript is: a debrief a signal carries (a run's news, or one sent
by hand) is read by pydantic, which takes `NaN`, `Infinity` and integers of 4,300 digits from
JSON. Writing one raised in the agent entity's chat handler (ValueError: not a failure type
of the workflow, so its task failed on every retry and the entity answered no chat again).
"""

from __future__ import annotations

import math
from decimal import ROUND_HALF_UP, Decimal


def js_round(value: float) -> int:
    """`Math.round(value)`: the nearest integer, a half up (62.5 → 63, -2.5 → -2). A finite
    `value` only (an int has no NaN): `js_round_text` writes any number."""
    return math.floor(value + 0.5)


def js_round_text(value: float) -> str:
    """`Math.round(value)` written, NaN and the infinities too (as `to_fixed` writes them)."""
    return str(js_round(value)) if math.isfinite(value) else str(value)


def js_number(value: float) -> float:
    """`value` as a JavaScript number (a double): an integer past a double's range is an
    infinity, where Python's `int / 1000` raised OverflowError."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


JS_FIXED_LIMIT = 1e21
"""From this magnitude `toFixed` writes the number as `String(value)` does (`1e+21`)."""


def to_fixed(value: float, digits: int) -> str:
    """`value.toFixed(digits)`: the exact binary value rounded a half away from zero, as
    JavaScript does (1.25 → "1.3", 0.03125 → "0.0313", 1.005 → "1.00": just below a half);
    magnitudes from 1e21 as `String(value)` writes them (Decimal's 28 digits could not hold
    1e27 to a tenth: InvalidOperation), NaN and the infinities as Python does (`inf`)."""
    if not math.isfinite(value):
        return str(value)
    if abs(value) >= JS_FIXED_LIMIT:
        return repr(float(value))  # `1e+21`, `1.5e+300`: JavaScript's shortest form too
    return str(Decimal(value).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP))
