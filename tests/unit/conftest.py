"""Hypothesis's settings for the unit tests that generate hostile input (test_generated_*).

CI runs every test on two shared cores, on every push: the `ci` profile (the default) is
deterministic, so a run that passed passes again and a failure is the same failure on every
machine (`derandomize`, no example database, no deadline that a loaded core would trip), and
its example counts keep the whole generated set to a few seconds. `HYPOTHESIS_PROFILE=deep`
searches far longer with fresh randomness, for a person hunting new defects locally; pin
what it finds with `@example(...)`.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=30,
    print_blob=False,
)
settings.register_profile(
    "deep",
    derandomize=False,
    database=None,
    deadline=None,
    max_examples=3_000,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
