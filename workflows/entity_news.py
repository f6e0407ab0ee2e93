"""What runs and builders tell the agent entity: its runs' news and its configuration.

A mixin of AgentWorkflow, kept apart so the entity's module holds its chat and sessions.
Runs no longer signal their agent (they keep themselves in Postgres as they end, and chat
reads the last one there, through `run_finished` as a signal would have told it), but runs
started before that still do, builders send `configure`, and anyone who may signal the
agent's workflow can send any of these by hand.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from reactive_temporal.contracts import names
    from reactive_temporal.contracts.entity import AgentState, DebriefReady, RunFinished, RunStarted
    from reactive_temporal.contracts.run import AgentConfig
    from reactive_temporal.limits import system_prompt_problem
    from workflows.entity_lifetime import Lifetime, notes_lifetime


class RunNews(Lifetime):
    """The entity's signal handlers (a mixin of AgentWorkflow)."""

    state: AgentState

    @workflow.signal(name=names.RUN_STARTED_SIGNAL)
    @notes_lifetime
    def run_started(self, event: RunStarted) -> None:
        self.state.active_runs[event.run_id] = event.started_at

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
        self.state.active_runs.pop(event.run_id, None)
        last = self.state.last_run_started_at
        if last is not None and event.started_at < last:
            return  # an older run finishing late: the newer run's context stands
        set_at = self.state.agent_set_at
        if set_at is None or event.started_at >= set_at:  # else the builder spoke since
            self.state.agent = event.agent
        self.state.last_run_id = event.run_id
        self.state.last_run_started_at = event.started_at
        self.state.last_debrief = event.debrief
        self.state.last_observations = event.observations

    @workflow.signal(name=names.CONFIGURE_SIGNAL)
    @notes_lifetime
    def configure(self, config: AgentConfig) -> None:
        """The agent's configuration as its builder set it: chat from any process uses it
        (until a run that starts later brings its own)."""
        if config.agent_id != self.state.agent.agent_id:
            workflow.logger.warning("configure for %r ignored by this agent", config.agent_id)
            return
        if problem := system_prompt_problem(config.system_prompt):  # sent by hand: builders check
            workflow.logger.warning("configure ignored: %s", problem)
            return
        self.state.agent = config
        self.state.agent_set_at = workflow.now()

    @workflow.signal(name=names.DEBRIEF_READY_SIGNAL)
    @notes_lifetime
    def debrief_ready(self, event: DebriefReady) -> None:
        """Upgrade to the rich debrief, only for the run whose context we hold."""
        if event.run_id == self.state.last_run_id:
            self.state.last_debrief = event.debrief
