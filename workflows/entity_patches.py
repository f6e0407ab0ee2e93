"""Which of its changes an agent entity run has: decided once, in its first task.

An entity run started with `entity-patches-2026-12` in its input (`patch_bundle`, kept as
it continues as new; the project's starters set it from the next release,
`names.ENTITY_BUNDLE_IN_STARTS`) has every change it stands for without asking. One started
without asks that one patch as it starts, before any handler runs. Asked one by one, where
each was first needed, a patch's marker went wherever the first handler to need it got to;
on a busy agent (updates arriving together, some refused by validators, which leaves no
trace in history) a replay's handlers need not get there in the same order, and one such
entity failed to replay: its chat stood still. Entity runs from before keep asking each
patch where they did, lazily, as their histories were made.

A patch released after the bundle (`chat-routing-ascii`, then `entity-inputs-bounded`) is not
in it, whose meaning is fixed (`names.ENTITY_PATCHES_2026_12_COVERS`): every entity run asks
it in its first task too, after the bundle, whatever its input, each in the order released.
An entity run from before it finds no marker on replay and decides as before (routes chat with
Unicode words, keeps what it is told whole) until it continues as new; its next run asks again.
Each goes out in two releases (`names.ASCII_CHAT_ROUTING_ASKED`,
`names.ENTITY_INPUTS_BOUNDED_ASKED`): the first asks it only on replay, where a run of the
second may have recorded it, for a worker that does not know a patch fails every task of a run
holding its marker.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from reactive_temporal.contracts import names


class EntityPatches:
    """The entity's patch decisions (a mixin of AgentWorkflow), each asked at most once."""

    decides_after_handlers = False
    """The entity notes `continue_due` where handlers end (entity-continues-after-handlers);
    else its conditions read the task's figures, as entities before it did."""
    _saved_per_turn: bool | None = None
    """Sessions are saved turn by turn (sessions-in-postgres), once asked; handlers that
    cannot ask (queries, validators) read it."""
    _notes_as_data: bool | None = None
    """What the agent knows of its runs reaches the model as quoted notes (chat-notes)."""
    _reads_runs: tuple[bool, bool] | None = None
    """Chat finds runs in progress in visibility, and reads the last run from Postgres with
    them (live-runs-from-visibility, last-run-from-store)."""
    _ascii_routing: bool = False
    """Chat routing matches as the released code's regexes do, ASCII words and case
    (chat-routing-ascii): asked in every run's first task, so never lazily; False in an entity
    run from before the patch, which keeps Unicode routing until it continues as new."""
    _bounds_inputs: bool = False
    """What the entity's signals carry is held to bounds (entity-inputs-bounded,
    workflows/entity_inputs.py): asked in every run's first task, after the routing patch;
    False in an entity run from before it, which keeps what it is told whole."""

    def _ask_patches(self, bundle: str | None) -> None:
        """In the run's first task, before any handler or `run` has run. A run started with
        the bundle in its input asks none of the bundle's patches; one started without asks
        the bundle. Every run then asks the patches released since the bundle."""
        if bundle == names.ENTITY_PATCHES_2026_12:
            if workflow.unsafe.is_replaying():
                # begun by a worker from before the field (one deploy behind its starter),
                # which asked the bundle: its replay asks again; one begun since finds no
                # marker and records none
                workflow.patched(names.ENTITY_PATCHES_2026_12)
            self.decides_after_handlers = self._saved_per_turn = self._notes_as_data = True
            self._reads_runs = (True, True)
        elif workflow.patched(names.ENTITY_PATCHES_2026_12):
            self.decides_after_handlers = self._saved_per_turn = self._notes_as_data = True
            self._reads_runs = (True, True)
        else:  # an entity run from before: the rest is asked where it is first needed
            self.decides_after_handlers = workflow.patched(
                names.ENTITY_CONTINUES_AFTER_HANDLERS_PATCH
            )
        # released after the bundle, so asked by every run, bundled or not, in the order
        # released; until the release that asks each, only where a run of that release may
        # have recorded it
        if names.ASCII_CHAT_ROUTING_ASKED or workflow.unsafe.is_replaying():
            self._ascii_routing = workflow.patched(names.ASCII_CHAT_ROUTING_PATCH)
        if names.ENTITY_INPUTS_BOUNDED_ASKED or workflow.unsafe.is_replaying():
            self._bounds_inputs = workflow.patched(names.ENTITY_INPUTS_BOUNDED_PATCH)

    def _sessions_saved_per_turn(self) -> bool:
        if self._saved_per_turn is None:
            self._saved_per_turn = workflow.patched(names.SESSIONS_IN_POSTGRES_PATCH)
        return self._saved_per_turn

    def _chat_notes_as_data(self) -> bool:
        if self._notes_as_data is None:
            self._notes_as_data = workflow.patched(names.CHAT_NOTES_PATCH)
        return self._notes_as_data

    def _runs_read(self) -> tuple[bool, bool]:
        """(runs in progress from visibility, the last run from Postgres with them)."""
        if self._reads_runs is None:
            from_visibility = workflow.patched(names.LIVE_RUNS_FROM_VISIBILITY_PATCH)
            from_store = from_visibility and workflow.patched(names.LAST_RUN_FROM_STORE_PATCH)
            self._reads_runs = (from_visibility, from_store)
        return self._reads_runs
