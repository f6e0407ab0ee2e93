"""Which workflows run in Temporal's sandbox: the project's own, by default, do not.

Temporal's Python sandbox re-imports a workflow's module for every workflow it starts and
runs every activation, and every payload the SDK encodes or decodes for it, through an
`exec` with its import hooks applied. For an agent run that is about a quarter of the
worker's CPU: 93.8 → 70.5 ms per 3-iteration run with memory on, 67.5 → 53.2 for a bare
workflow doing the same I/O (bench/README.md, "The project's workflows out of the sandbox").

What the sandbox buys is a runtime check of the workflow code it runs: a non-deterministic
call (the clock, randomness, I/O) in it raises, and module globals start fresh per workflow.
For the project's workflows that check reaches little and is made elsewhere:

- every module they import is already passed through (imported once, outside the check),
  so only the three `workflows.agent_*` files run restricted, and they hold no module state
  that changes;
- CI replays every committed history under the sandbox (`tests/unit/test_replay.py`: the
  Replayer sandboxes what it replays), and an AST check holds every module in `workflows/`
  to deterministic calls (`tests/unit/test_workflow_determinism.py`);
- no user code runs in them: tools, models and stores are activities.

So `create_worker` runs the project's own workflows unsandboxed and any other workflow on
the same worker sandboxed, as Temporal's default has it.
`REACTIVE_TEMPORAL_SANDBOX_WORKFLOWS=true` puts the project's back in the sandbox.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from temporalio import workflow
from temporalio.worker import (
    UnsandboxedWorkflowRunner,
    WorkflowInstance,
    WorkflowInstanceDetails,
    WorkflowRunner,
)
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner


class OwnWorkflowsUnsandboxed(WorkflowRunner):
    """Runs the workflow classes in `own` without the sandbox and every other in Temporal's
    `SandboxedWorkflowRunner()`."""

    def __init__(self, own: Iterable[type]) -> None:
        self.own = frozenset(own)
        self.sandboxed = SandboxedWorkflowRunner()
        self.unsandboxed = UnsandboxedWorkflowRunner()

    def runner_for(self, defn: workflow._Definition) -> WorkflowRunner:
        return self.unsandboxed if defn.cls in self.own else self.sandboxed

    def prepare_workflow(self, defn: workflow._Definition) -> None:
        self.runner_for(defn).prepare_workflow(defn)

    def create_instance(self, det: WorkflowInstanceDetails) -> WorkflowInstance:
        return self.runner_for(det.defn).create_instance(det)

    def set_worker_level_failure_exception_types(
        self, types: Sequence[type[BaseException]]
    ) -> None:
        self.sandboxed.set_worker_level_failure_exception_types(types)
        self.unsandboxed.set_worker_level_failure_exception_types(types)
