"""What a model's tokens cost, from a per-model price table the user can extend.

Extend it in the worker's environment (`AGENT_MODEL_PRICES`, see config.py) or in code with
`register_price`. A name matches its entry as written, or in lower case without a
`provider/` prefix, or without a snapshot's date ("gpt-4o-2024-08-06" is "gpt-4o"); nothing
else: "gpt-5-pro" is not "gpt-5" (it was priced as it, at a tenth of its price). Unknown
models cost 0: cost is an estimate, and `price_for` says whether there is one.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field

from reactive_temporal.capabilities import family_name


class ModelPrice(BaseModel):
    """US dollars per million tokens."""

    model_config = ConfigDict(allow_inf_nan=False)

    input_per_mtok: float = Field(ge=0)
    output_per_mtok: float = Field(ge=0)
    cached_input_per_mtok: float | None = Field(default=None, ge=0)
    """Prompt tokens the provider read from its cache; None: at the input price."""


def _price(input: float, output: float, cached: float) -> ModelPrice:
    return ModelPrice(input_per_mtok=input, output_per_mtok=output, cached_input_per_mtok=cached)


DEFAULT_PRICES: dict[str, ModelPrice] = {
    "gpt-4o-mini": _price(0.15, 0.60, 0.075),
    "gpt-4o": _price(2.50, 10.00, 1.25),
    "gpt-4.1": _price(2.00, 8.00, 0.50),
    "gpt-4.1-mini": _price(0.40, 1.60, 0.10),
    "gpt-4.1-nano": _price(0.10, 0.40, 0.025),
    "o4-mini": _price(1.10, 4.40, 0.275),
    # Reasoning models bill their reasoning tokens as output (they are in completion_tokens).
    "o3": _price(2.00, 8.00, 0.50),
    "o3-mini": _price(1.10, 4.40, 0.55),
    "o1": _price(15.00, 60.00, 7.50),
    "gpt-5": _price(1.25, 10.00, 0.125),
    "gpt-5-mini": _price(0.25, 2.00, 0.025),
    "gpt-5-nano": _price(0.05, 0.40, 0.005),
}
_SNAPSHOT = re.compile(r"-(\d{4}-\d{2}-\d{2}|\d{4})$")
"""A dated snapshot's suffix: "-2024-08-06", or "-0613" of the older names."""

_extra: dict[str, ModelPrice] = {}


def register_price(
    model: str,
    *,
    input_per_mtok: float,
    output_per_mtok: float,
    cached_input_per_mtok: float | None = None,
) -> None:
    """Add or override a model's price for this process."""
    _extra[model] = ModelPrice(
        input_per_mtok=input_per_mtok,
        output_per_mtok=output_per_mtok,
        cached_input_per_mtok=cached_input_per_mtok,
    )


def price_for(model: str, overrides: dict[str, ModelPrice] | None = None) -> ModelPrice | None:
    """The price of `model`, or None: its own entry, its family name's, its undated name's.

    "openai/GPT-4o" is "gpt-4o", "gpt-4o-mini-2024-07-18" is "gpt-4o-mini".
    """
    table = {**DEFAULT_PRICES, **_extra, **(overrides or {})}
    name = family_name(model)
    for candidate in (model, name, _SNAPSHOT.sub("", name)):
        if candidate in table:
            return table[candidate]
    return None


def cost_of(
    model: str,
    prompt_tokens: int,
    completion_tokens: int,
    overrides: dict[str, ModelPrice] | None = None,
    *,
    cached_tokens: int = 0,
) -> float:
    """US dollars for these tokens of `model`; 0.0 for a model with no known price.

    `cached_tokens` of the prompt's the provider read from its cache, at its cached price.
    """
    price = price_for(model, overrides)
    if price is None:
        return 0.0
    cached = min(max(cached_tokens, 0), prompt_tokens)
    cached_price = price.input_per_mtok if price.cached_input_per_mtok is None else (
        price.cached_input_per_mtok
    )  # fmt: skip
    return (
        (prompt_tokens - cached) * price.input_per_mtok
        + cached * cached_price
        + completion_tokens * price.output_per_mtok
    ) / 1e6
