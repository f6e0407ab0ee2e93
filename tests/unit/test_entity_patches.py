"""What an agent entity run asks in its first task, and what it decides (no Temporal).

`EntityPatches._ask_patches` runs in the run's first task, before any handler: every entity
decision released since the bundle is asked there, never lazily in a handler (handlers of a
busy entity need not reach a lazy ask in the same order on replay). `workflow.patched` is
faked here as Temporal answers it: True in a new run (and it records a marker), and on replay
True only where the history holds the patch's marker.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from temporalio import workflow

from reactive_temporal.contracts import names
from workflows.entity_patches import EntityPatches


class FakeTemporal:
    """Answers `workflow.patched` for a new run or for the replay of a recorded one."""

    def __init__(self, markers: set[str] | None) -> None:
        self.replaying = markers is not None
        self.markers = markers or set()
        self.asked: list[str] = []

    def patched(self, patch_id: str) -> bool:
        self.asked.append(patch_id)
        return patch_id in self.markers if self.replaying else True


@pytest.fixture
def temporal(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[FakeTemporal]:
    fake = FakeTemporal(request.param)
    monkeypatch.setattr(workflow, "patched", fake.patched)
    monkeypatch.setattr(workflow.unsafe, "is_replaying", lambda: fake.replaying)
    yield fake


def ask(bundle: str | None) -> EntityPatches:
    """A run's first task: its patch decisions, as `AgentWorkflow.__init__` makes them."""
    patches = EntityPatches()
    patches._ask_patches(bundle)
    return patches


NEW = None
"""A new run: no history to replay."""
BUNDLE = names.ENTITY_PATCHES_2026_12
ROUTING = names.ASCII_CHAT_ROUTING_PATCH
BOUNDS = names.ENTITY_INPUTS_BOUNDED_PATCH


NOT_YET = [
    pytest.param(NEW, None, [BUNDLE], False, id="new run, no bundle in its input"),
    pytest.param(NEW, BUNDLE, [], False, id="new run, bundle in its input"),
]
"""This release: a new run does not ask the routing patch (a worker from before it could not
replay a run that did), so it routes with Unicode words and records no marker."""
REPLAYS = [
    pytest.param({BUNDLE}, None, [BUNDLE, ROUTING, BOUNDS], False, id="replay: asked the bundle"),
    pytest.param({BUNDLE}, BUNDLE, [BUNDLE, ROUTING, BOUNDS], False, id="replay: a deploy behind"),
    pytest.param(set(), BUNDLE, [BUNDLE, ROUTING, BOUNDS], False, id="replay: bundle in its input"),
    pytest.param(
        {names.ENTITY_CONTINUES_AFTER_HANDLERS_PATCH},
        None,
        [BUNDLE, names.ENTITY_CONTINUES_AFTER_HANDLERS_PATCH, ROUTING, BOUNDS],
        False,
        id="replay: from before the bundle",
    ),
    pytest.param({BUNDLE, ROUTING}, None, [BUNDLE, ROUTING, BOUNDS], True, id="replay: asked both"),
    pytest.param({ROUTING}, BUNDLE, [BUNDLE, ROUTING, BOUNDS], True, id="replay: bundle, routing"),
]
"""Replays, in this release and the next: a run that recorded the routing patch's marker (begun
by a worker of the release that asks it) routes as the released code does, one that did not
keeps Unicode routing."""
ASKED = [
    pytest.param(NEW, None, [BUNDLE, ROUTING], True, id="new run, no bundle in its input"),
    pytest.param(NEW, BUNDLE, [ROUTING], True, id="new run, bundle in its input"),
]
"""The next release (names.ASCII_CHAT_ROUTING_ASKED): every new run asks it, after the
bundle's own ask (if any)."""


@pytest.mark.parametrize(
    ("temporal", "bundle", "asks", "ascii_routing"), NOT_YET + REPLAYS, indirect=["temporal"]
)
def test_this_release_takes_the_routing_patch_only_where_a_run_recorded_it(
    temporal: FakeTemporal, bundle: str | None, asks: list[str], ascii_routing: bool
):
    """The first of two releases: asked only on replay, in the first task, it decides
    routing for the whole run."""
    assert names.ASCII_CHAT_ROUTING_ASKED is False
    patches = ask(bundle)
    assert temporal.asked == asks
    assert patches._ascii_routing is ascii_routing


@pytest.mark.parametrize(
    ("temporal", "bundle", "asks", "ascii_routing"), ASKED + REPLAYS, indirect=["temporal"]
)
def test_the_next_release_asks_the_routing_patch_in_every_run_s_first_task(
    temporal: FakeTemporal,
    bundle: str | None,
    asks: list[str],
    ascii_routing: bool,
    monkeypatch: pytest.MonkeyPatch,
):
    """Whatever the run's bundle, the routing patch is asked once, after the bundle's own ask
    (if any): an entity run from before it (no marker) keeps Unicode routing until it
    continues as new."""
    monkeypatch.setattr(names, "ASCII_CHAT_ROUTING_ASKED", True)
    patches = ask(bundle)
    assert temporal.asked == asks
    assert patches._ascii_routing is ascii_routing


@pytest.mark.parametrize("temporal", [NEW, {BUNDLE}], indirect=True)
@pytest.mark.parametrize("bundle", [None, BUNDLE])
def test_the_bundle_still_stands_for_its_five_patches_and_no_more(
    temporal: FakeTemporal, bundle: str | None
):
    """`entity-patches-2026-12` has shipped: whether in the input or asked, it turns on what
    it did (and the routing patch is asked on its own, never taken from it)."""
    patches = ask(bundle)
    assert patches.decides_after_handlers is True
    assert (patches._saved_per_turn, patches._notes_as_data) == (True, True)
    assert patches._reads_runs == (True, True)
    assert (ROUTING in temporal.asked) is temporal.replaying  # this release: on replay only
    assert (BOUNDS in temporal.asked) is temporal.replaying


BOUNDS_NOT_YET = [
    pytest.param(NEW, None, [BUNDLE], False, id="new run, no bundle in its input"),
    pytest.param(NEW, BUNDLE, [], False, id="new run, bundle in its input"),
]
"""This release: a new run does not ask entity-inputs-bounded (a worker from before it could
not replay a run that did), so it keeps what it is told whole and records no marker."""
BOUNDS_REPLAYS = [
    pytest.param({BUNDLE}, None, [BUNDLE, ROUTING, BOUNDS], False, id="replay: no marker"),
    pytest.param(set(), BUNDLE, [BUNDLE, ROUTING, BOUNDS], False, id="replay: bundle in input"),
    pytest.param({BUNDLE, BOUNDS}, None, [BUNDLE, ROUTING, BOUNDS], True, id="replay: asked it"),
    pytest.param({BOUNDS}, BUNDLE, [BUNDLE, ROUTING, BOUNDS], True, id="replay: bundle, bounds"),
    pytest.param(
        {BUNDLE, ROUTING, BOUNDS}, None, [BUNDLE, ROUTING, BOUNDS], True, id="replay: all three"
    ),
    pytest.param(
        {names.ENTITY_CONTINUES_AFTER_HANDLERS_PATCH},
        None,
        [BUNDLE, names.ENTITY_CONTINUES_AFTER_HANDLERS_PATCH, ROUTING, BOUNDS],
        False,
        id="replay: from before the bundle",
    ),
]
"""Replays, in this release and the next: a run that recorded the marker (begun by a worker of
the release that asks it) bounds what it is told, one that did not keeps it whole."""
BOUNDS_ASKED = [
    pytest.param(NEW, None, [BUNDLE, BOUNDS], True, id="new run, no bundle in its input"),
    pytest.param(NEW, BUNDLE, [BOUNDS], True, id="new run, bundle in its input"),
]
"""The next release (names.ENTITY_INPUTS_BOUNDED_ASKED): every new run asks it, after the
bundle's own ask (if any) and the routing patch's (when that is asked)."""


@pytest.mark.parametrize(
    ("temporal", "bundle", "asks", "bounds"), BOUNDS_NOT_YET + BOUNDS_REPLAYS, indirect=["temporal"]
)
def test_this_release_bounds_inputs_only_where_a_run_recorded_the_patch(
    temporal: FakeTemporal, bundle: str | None, asks: list[str], bounds: bool
):
    """The first of two releases: asked only on replay, in the first task, it decides for
    the whole run whether what its signals carry is bounded."""
    assert names.ENTITY_INPUTS_BOUNDED_ASKED is False
    patches = ask(bundle)
    assert temporal.asked == asks
    assert patches._bounds_inputs is bounds


@pytest.mark.parametrize(
    ("temporal", "bundle", "asks", "bounds"), BOUNDS_ASKED + BOUNDS_REPLAYS, indirect=["temporal"]
)
def test_the_next_release_asks_entity_inputs_bounded_in_every_run_s_first_task(
    temporal: FakeTemporal,
    bundle: str | None,
    asks: list[str],
    bounds: bool,
    monkeypatch: pytest.MonkeyPatch,
):
    """Whatever the run's bundle, the patch is asked once, last: an entity run from before it
    (no marker) keeps what it is told whole until it continues as new."""
    monkeypatch.setattr(names, "ENTITY_INPUTS_BOUNDED_ASKED", True)
    patches = ask(bundle)
    assert temporal.asked == asks
    assert patches._bounds_inputs is bounds


@pytest.mark.parametrize("temporal", [NEW], indirect=True)
def test_the_next_release_asks_both_late_patches_in_the_order_released(
    temporal: FakeTemporal, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(names, "ASCII_CHAT_ROUTING_ASKED", True)
    monkeypatch.setattr(names, "ENTITY_INPUTS_BOUNDED_ASKED", True)
    patches = ask(BUNDLE)
    assert temporal.asked == [ROUTING, BOUNDS]
    assert (patches._ascii_routing, patches._bounds_inputs) == (True, True)
