"""What runs and builders tell the agent entity: its runs' news and its configuration.

A mixin of AgentWorkflow, kept apart so the entity's module holds its chat and sessions.
Runs no longer signal their agent (they keep themselves in Postgres as they end, and chat
reads the last one there, through `run_finished` as a signal would have told it), but runs
started before that still do, builders send `configure`, and anyone who may signal the
agent's workflow can send any of these by hand. An entity run with the
`entity-inputs-bounded` patch keeps what they carry within bounds (workflows/entity_inputs.py
says which and why), ignoring what is past them with a warning that names it; one from
before keeps it whole, as its history was made.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from reactive_temporal.contracts import names
    from reactive_temporal.contracts.debrief import AgentDebrief
    from reactive_temporal.contracts.entity import AgentState, DebriefReady, RunFinished, RunStarted
    from reactive_temporal.contracts.run import AgentConfig
    from reactive_temporal.limits import system_prompt_problem
    from workflows.entity_inputs import (
        STATE_MAX_BYTES,
        agent_problem,
        debrief_problem,
        fitted,
        kept_observations,
        latest_runs,
        run_id_problem,
        with_run,
    )
    from workflows.entity_lifetime import Lifetime, notes_lifetime


class RunNews(Lifetime):
    """The entity's signal handlers, and the bounds of what they keep (a mixin of
    AgentWorkflow)."""

    state: AgentState

    @workflow.signal(name=names.RUN_STARTED_SIGNAL)
    @notes_lifetime
    def run_started(self, event: RunStarted) -> None:
        if not self._bounds_inputs:
            self.state.active_runs[event.run_id] = event.started_at
        elif problem := run_id_problem(event.run_id):
            _ignored("run_started", event.run_id, problem)
        else:
            self.state.active_runs = with_run(
                self.state.active_runs, event.run_id, event.started_at
            )

    @workflow.signal(name=names.RUN_FINISHED_SIGNAL)
    @notes_lifetime
    def run_finished(self, event: RunFinished) -> None:
        if event.agent.agent_id != self.state.agent.agent_id:  # sent by hand, to the wrong agent
            workflow.logger.warning(
                "run_finished of %r's run %r ignored by this agent",
                event.agent.agent_id,
                event.run_id[:200],
            )
            return
        if self._bounds_inputs and (problem := run_id_problem(event.run_id)):
            _ignored("run_finished", event.run_id, problem)
            return
        self.state.active_runs.pop(event.run_id, None)
        last = self.state.last_run_started_at
        if last is not None and event.started_at < last:
            return  # an older run finishing late: the newer run's context stands
        set_at = self.state.agent_set_at
        if set_at is None or event.started_at >= set_at:  # else the builder spoke since
            if self._bounds_inputs and (problem := agent_problem(event.agent)):
                _ignored("run_finished", event.run_id, problem, "its agent configuration")
            else:
                self.state.agent = event.agent
        self.state.last_run_id = event.run_id
        self.state.last_run_started_at = event.started_at
        self.state.last_debrief = self._debrief_kept("run_finished", event.run_id, event.debrief)
        self.state.last_observations = (
            kept_observations(event.observations) if self._bounds_inputs else event.observations
        )

    @workflow.signal(name=names.CONFIGURE_SIGNAL)
    @notes_lifetime
    def configure(self, config: AgentConfig) -> None:
        """The agent's configuration as its builder set it: chat from any process uses it
        (until a run that starts later brings its own)."""
        if config.agent_id != self.state.agent.agent_id:
            workflow.logger.warning("configure for %r ignored by this agent", config.agent_id)
            return
        problem = (  # sent by hand: builders check
            agent_problem(config)
            if self._bounds_inputs
            else system_prompt_problem(config.system_prompt)
        )
        if problem:
            workflow.logger.warning("configure ignored: %s", problem)
            return
        self.state.agent = config
        self.state.agent_set_at = workflow.now()

    @workflow.signal(name=names.DEBRIEF_READY_SIGNAL)
    @notes_lifetime
    def debrief_ready(self, event: DebriefReady) -> None:
        """Upgrade to the rich debrief, only for the run whose context we hold."""
        if event.run_id == self.state.last_run_id:
            kept = self._debrief_kept("debrief_ready", event.run_id, event.debrief)
            if kept is not None:  # else the debrief it has stands
                self.state.last_debrief = kept

    def _debrief_kept(
        self, signal: str, run_id: str, debrief: AgentDebrief | None
    ) -> AgentDebrief | None:
        if debrief is not None and self._bounds_inputs and (problem := debrief_problem(debrief)):
            _ignored(signal, run_id, problem, "its debrief")
            return None
        return debrief

    # -- the state as a run takes it and leaves it (entity-inputs-bounded) ----------------------

    def _bound_state(self) -> None:
        """What the run was started with, within the bounds (an entity run from before the
        patch may have kept anything it was told, and carried it here)."""
        if not self._bounds_inputs:
            return
        state = self.state
        state.active_runs = latest_runs(state.active_runs)
        state.last_observations = kept_observations(state.last_observations)
        if state.last_run_id is not None and (problem := run_id_problem(state.last_run_id)):
            workflow.logger.warning("the last run id carried over is dropped: %s", problem)
            state.last_run_id = None
        if state.last_debrief is not None and (problem := debrief_problem(state.last_debrief)):
            workflow.logger.warning("the last debrief carried over is dropped: %s", problem)
            state.last_debrief = None
        if problem := agent_problem(state.agent):  # kept: the agent has no other
            workflow.logger.warning("the agent's configuration is past its bounds: %s", problem)

    def _state_for_next_run(self) -> AgentState:
        """The state the next run is given: fitted within STATE_MAX_BYTES."""
        if not self._bounds_inputs:
            return self.state
        state, shed = fitted(self.state)
        if shed:
            workflow.logger.warning(
                "the state was past %s bytes: shed %s", f"{STATE_MAX_BYTES:,}", ", ".join(shed)
            )
        return state


def _ignored(signal: str, run_id: str, problem: str, part: str | None = None) -> None:
    """A warning that names what was ignored and why (the run id cut: it may be megabytes)."""
    if part is None:
        workflow.logger.warning("%s of run %r ignored: %s", signal, run_id[:120], problem)
    else:
        workflow.logger.warning("%s of run %r: %s ignored: %s", signal, run_id[:120], part, problem)
