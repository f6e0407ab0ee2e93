"""What a model's tokens cost, from a per-model price table the user can extend.

Extend it in the worker's environment (`AGENT_MODEL_PRICES`, see config.py) or in code with
`register_price`. Unknown models cost 0 and say so nowhere else: cost is an estimate.
"""

from __future__ import annotations

from reactive_temporal.config import ModelPrice

DEFAULT_PRICES: dict[str, ModelPrice] = {
    "gpt-4o-mini": ModelPrice(input_per_mtok=0.15, output_per_mtok=0.60),
    "gpt-4o": ModelPrice(input_per_mtok=2.50, output_per_mtok=10.00),
    "gpt-4.1": ModelPrice(input_per_mtok=2.00, output_per_mtok=8.00),
    "gpt-4.1-mini": ModelPrice(input_per_mtok=0.40, output_per_mtok=1.60),
    "gpt-4.1-nano": ModelPrice(input_per_mtok=0.10, output_per_mtok=0.40),
    "o4-mini": ModelPrice(input_per_mtok=1.10, output_per_mtok=4.40),
    # Reasoning models bill their reasoning tokens as output (they are in completion_tokens).
    "o3": ModelPrice(input_per_mtok=2.00, output_per_mtok=8.00),
    "o3-mini": ModelPrice(input_per_mtok=1.10, output_per_mtok=4.40),
    "o1": ModelPrice(input_per_mtok=15.00, output_per_mtok=60.00),
    "gpt-5": ModelPrice(input_per_mtok=1.25, output_per_mtok=10.00),
    "gpt-5-mini": ModelPrice(input_per_mtok=0.25, output_per_mtok=2.00),
    "gpt-5-nano": ModelPrice(input_per_mtok=0.05, output_per_mtok=0.40),
}

_extra: dict[str, ModelPrice] = {}


def register_price(model: str, *, input_per_mtok: float, output_per_mtok: float) -> None:
    """Add or override a model's price for this process."""
    _extra[model] = ModelPrice(input_per_mtok=input_per_mtok, output_per_mtok=output_per_mtok)


def price_for(model: str, overrides: dict[str, ModelPrice] | None = None) -> ModelPrice | None:
    """The price of `model`; a dated variant ("gpt-4o-mini-2024-07-18") uses its base's."""
    table = {**DEFAULT_PRICES, **_extra, **(overrides or {})}
    if model in table:
        return table[model]
    base = max((name for name in table if model.startswith(name + "-")), key=len, default=None)
    return table[base] if base else None


def cost_of(
    model: str,
    prompt_tokens: int,
    completion_tokens: int,
    overrides: dict[str, ModelPrice] | None = None,
) -> float:
    """US dollars for these tokens of `model`; 0.0 for a model with no known price."""
    price = price_for(model, overrides)
    if price is None:
        return 0.0
    return (prompt_tokens * price.input_per_mtok + completion_tokens * price.output_per_mtok) / 1e6
