"""Two workflows that report whether they run in Temporal's sandbox, for the runner test."""

from __future__ import annotations

from temporalio import workflow


@workflow.defn(name="SandboxProbeOwn")
class OwnProbe:
    @workflow.run
    async def run(self) -> bool:
        return workflow.unsafe.in_sandbox()


@workflow.defn(name="SandboxProbeOther")
class OtherProbe:
    @workflow.run
    async def run(self) -> bool:
        return workflow.unsafe.in_sandbox()
