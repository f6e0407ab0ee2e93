"""A small PromQL evaluator for the alert rules' tests: what a rule says over series a test
writes down (a counter's samples over time), without a Prometheus.

The rules' tests otherwise check only that an expression parses and selects series a worker
serves; whether it fires on what it should, and not on what it should not, needs its value
over time. Covered: instant and range selectors (with `offset`), `increase` (Prometheus's
extrapolation and counter resets), `sum by`, comparisons with a number (as filters), `and`,
`or`, `unless` (matching on all labels), parentheses. Anything else raises
NotImplementedError naming it, so a rule using more is not checked by halves.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import promql_parser

LOOKBACK = 300.0
"""Prometheus's default lookback for an instant selector, in seconds."""

Labels = frozenset[tuple[str, str]]
Vector = dict[Labels, float]


@dataclass(frozen=True)
class Series:
    """One series: its name, labels, and (time in seconds, value) samples in time order."""

    name: str
    labels: Mapping[str, str]
    samples: Sequence[tuple[float, float]]


def evaluate(expr: str, series: Sequence[Series], at: float) -> Vector:
    """The expression's instant vector at time `at` (seconds) over `series`."""
    return _eval(promql_parser.parse(expr), series, at)


def firing(
    expr: str, series: Sequence[Series], times: Sequence[float], for_seconds: float
) -> list[float]:
    """The evaluation times (of `times`, in order) at which the alert fires: its expression
    has held at every evaluation for `for_seconds` (Prometheus's `for:`), per label set."""
    since: dict[Labels, float] = {}
    fired = []
    for at in times:
        result = evaluate(expr, series, at)
        since = {k: since.get(k, at) for k in result}
        if any(at - start >= for_seconds for start in since.values()):
            fired.append(at)
    return fired


def _eval(node: Any, series: Sequence[Series], at: float) -> Vector:
    if isinstance(node, promql_parser.ParenExpr):
        return _eval(node.expr, series, at)
    if isinstance(node, promql_parser.VectorSelector):
        return _instant(node, series, at)
    if isinstance(node, promql_parser.Call):
        if node.func.name != "increase":
            raise NotImplementedError(f"function {node.func.name}")
        return _increase(node.args[0], series, at)
    if isinstance(node, promql_parser.AggregateExpr):
        return _sum_by(node, _eval(node.expr, series, at))
    if isinstance(node, promql_parser.BinaryExpr):
        return _binary(node, series, at)
    raise NotImplementedError(f"expression {type(node).__name__}: {node}")


def _matching(node: Any, series: Sequence[Series]) -> list[Series]:
    if node.at is not None:
        raise NotImplementedError("@ modifiers")
    found = []
    for s in series:
        if s.name != node.name:
            continue
        ok = True
        for m in node.matchers.matchers:
            value = s.labels.get(m.name, "")
            if m.op == promql_parser.MatchOp.Equal:
                ok = ok and value == m.value
            elif m.op == promql_parser.MatchOp.NotEqual:
                ok = ok and value != m.value
            else:
                raise NotImplementedError(f"matcher {m.op}")
        if ok:
            found.append(s)
    return found


def _offset(node: Any) -> float:
    return node.offset.total_seconds() if node.offset is not None else 0.0


def _key(s: Series) -> Labels:
    return frozenset(s.labels.items())


def _instant(node: Any, series: Sequence[Series], at: float) -> Vector:
    end = at - _offset(node)
    out: Vector = {}
    for s in _matching(node, series):
        seen = [v for t, v in s.samples if end - LOOKBACK < t <= end]
        if seen:
            out[_key(s)] = seen[-1]
    return out


def _increase(node: Any, series: Sequence[Series], at: float) -> Vector:
    """Prometheus's `extrapolatedRate` for a counter, as `increase` computes it."""
    if not isinstance(node, promql_parser.MatrixSelector):
        raise NotImplementedError(f"increase of {node}")
    selector = node.vector_selector
    end = at - _offset(selector)
    start = end - node.range.total_seconds()
    out: Vector = {}
    for s in _matching(selector, series):
        points = [(t, v) for t, v in s.samples if start < t <= end]
        if len(points) < 2:
            continue
        delta = points[-1][1] - points[0][1]
        for (_, before), (_, after) in zip(points, points[1:], strict=False):
            if after < before:  # a reset: the counter started again from 0
                delta += before
        sampled = points[-1][0] - points[0][0]
        average = sampled / (len(points) - 1)
        threshold = average * 1.1
        to_start = points[0][0] - start
        to_start = to_start if to_start < threshold else average / 2
        if delta > 0 and points[0][1] >= 0:  # a counter does not go below zero
            to_start = min(to_start, sampled * (points[0][1] / delta))
        to_end = end - points[-1][0]
        to_end = to_end if to_end < threshold else average / 2
        out[_key(s)] = delta * (sampled + to_start + to_end) / sampled
    return out


def _sum_by(node: Any, vector: Vector) -> Vector:
    if str(node.op) != "sum":
        raise NotImplementedError(f"aggregation {node.op}")
    modifier = node.modifier
    if modifier is None or modifier.type != promql_parser.AggModifierType.By:
        raise NotImplementedError("an aggregation other than `sum by (…)`")
    kept = set(modifier.labels)
    out: Vector = {}
    for labels, value in vector.items():
        key = frozenset((k, v) for k, v in labels if k in kept)
        out[key] = out.get(key, 0.0) + value
    return out


COMPARISONS = {
    ">": float.__gt__,
    ">=": float.__ge__,
    "<": float.__lt__,
    "<=": float.__le__,
    "==": float.__eq__,
    "!=": float.__ne__,
}


def _binary(node: Any, series: Sequence[Series], at: float) -> Vector:
    op = str(node.op)
    if node.modifier is not None and (
        node.modifier.matching is not None or node.modifier.return_bool
    ):
        raise NotImplementedError(f"a modifier on {op}")
    if op in COMPARISONS:
        if not isinstance(node.rhs, promql_parser.NumberLiteral):
            raise NotImplementedError(f"{op} with anything but a number on its right")
        bound = float(node.rhs.val)
        lhs = _eval(node.lhs, series, at)
        return {k: v for k, v in lhs.items() if COMPARISONS[op](float(v), bound)}
    lhs, rhs = _eval(node.lhs, series, at), _eval(node.rhs, series, at)
    if op == "and":
        return {k: v for k, v in lhs.items() if k in rhs}
    if op == "unless":
        return {k: v for k, v in lhs.items() if k not in rhs}
    if op == "or":
        return {**{k: v for k, v in rhs.items() if k not in lhs}, **lhs}
    raise NotImplementedError(f"operator {op}")
