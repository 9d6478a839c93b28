"""Subject, stream, consumer and bucket names, all derived from the configured prefix."""

from __future__ import annotations

from dataclasses import dataclass

from shared.contract.tools import ToolServiceName
from shared.settings import CommonSettings

ToolService = ToolServiceName  # the contract's name for who answers a tool (mcp: the bridge)


@dataclass(frozen=True)
class Subjects:
    prefix: str

    @property
    def tasks_submit(self) -> str:
        return f"{self.prefix}.tasks.submit"

    @property
    def tasks_resume(self) -> str:
        return f"{self.prefix}.tasks.resume"

    def cancel(self, task_id: str) -> str:
        return f"{self.prefix}.tasks.cancel.{task_id}"

    @property
    def cancel_all(self) -> str:
        return f"{self.prefix}.tasks.cancel.*"

    def running(self, task_id: str) -> str:
        """Asked by a dispatcher handed a redelivered task: does another dispatcher still run it?"""
        return f"{self.prefix}.tasks.running.{task_id}"

    def events(self, task_id: str, channel: str) -> str:
        return f"{self.prefix}.events.{task_id}.{channel}"

    def events_all(self, task_id: str) -> str:
        return f"{self.prefix}.events.{task_id}.>"

    @property
    def live_all(self) -> str:
        """Where the events stream republishes every event once stored (with its stream sequence
        in the `Nats-Sequence` header): read by plain subscribers, no consumer needed."""
        return f"{self.prefix}.live.>"

    def live(self, task_id: str) -> str:
        return f"{self.prefix}.live.{task_id}.>"

    @property
    def mcp_cancel(self) -> str:
        """An MCP client cancelled a workflow call (`McpCancel`, core NATS, every gateway hears it)."""
        return f"{self.prefix}.mcp.cancel"

    def mcp_events(self, audience: str, key: str) -> str:
        """A notification for MCP sessions' GET streams (stream `P_MCP`): `audience` `user` (every
        session of the user whose key is `key`) or `session` (the one session `key`)."""
        return f"{self.prefix}.mcp.events.{audience}.{key}"

    def recorded(self, run_id: str) -> str:
        """Announced (core NATS, empty) by a gateway once it committed a change to the records of
        a task or chat run: readers that must not answer ahead of a record wait for it."""
        return f"{self.prefix}.recorded.{run_id}"

    def tool(self, service: ToolService, tool: str) -> str:
        return f"{self.prefix}.tools.{service}.{tool}"

    def list_tools(self, service: ToolService) -> str:
        return self.tool(service, "list_tools")

    @property
    def control_models(self) -> str:
        return f"{self.prefix}.control.models"

    @property
    def control_prompts(self) -> str:
        return f"{self.prefix}.control.prompts"

    def control(self, topic: str) -> str:
        return f"{self.prefix}.control.{topic}"

    def heartbeat(self, service: str, instance: str) -> str:
        return f"{self.prefix}.heartbeat.{service}.{instance}"

    @property
    def heartbeat_all(self) -> str:
        return f"{self.prefix}.heartbeat.>"

    def health(self, service: str) -> str:
        return f"{self.prefix}.health.{service}"

    @property
    def ingest_jobs(self) -> str:
        return f"{self.prefix}.ingest.jobs"

    def kb_changed(self, kb: str) -> str:
        return f"{self.prefix}.kb.changed.{kb}"

    def schedule(self, schedule_id: str) -> str:
        """Where a schedule's definition lives (the last message holds it: `Nats-Schedule`)."""
        return f"{self.prefix}.schedules.def.{schedule_id}"

    def schedule_fire(self, schedule_id: str) -> str:
        """Where the server puts each fire of a schedule (`Nats-Schedule-Target`)."""
        return f"{self.prefix}.schedules.fire.{schedule_id}"

    @property
    def schedule_fires_all(self) -> str:
        return f"{self.prefix}.schedules.fire.*"

    @property
    def callbacks_deliver(self) -> str:
        """A completion callback to deliver (its delivery id); the gateways' work queue."""
        return f"{self.prefix}.callbacks.deliver"


@dataclass(frozen=True)
class Names:
    """JetStream names. Defaults match BUS.md (`AGENTIX_TASKS`, `agentix_control`, …)."""

    stream_prefix: str
    bucket_prefix: str

    @property
    def tasks_stream(self) -> str:
        return f"{self.stream_prefix}_TASKS"

    @property
    def events_stream(self) -> str:
        return f"{self.stream_prefix}_EVENTS"

    @property
    def ingest_stream(self) -> str:
        return f"{self.stream_prefix}_INGEST"

    @property
    def schedules_stream(self) -> str:
        """Schedules (held by the server, which fires them) and their fires."""
        return f"{self.stream_prefix}_SCHEDULES"

    @property
    def callbacks_stream(self) -> str:
        """Completion callbacks waiting to be delivered (a work queue)."""
        return f"{self.stream_prefix}_CALLBACKS"

    @property
    def dead_stream(self) -> str:
        """The work queues' MAX_DELIVERIES advisories, kept until a live service records them."""
        return f"{self.stream_prefix}_DEAD"

    dispatcher_consumer: str = "dispatcher"
    recorder_consumer: str = "recorder"
    chat_consumer: str = "chat"
    ingest_consumer: str = "ingest"
    triggers_consumer: str = "triggers"
    callbacks_consumer: str = "callbacks"  # delivers callbacks (on the callbacks stream)
    callback_ends_consumer: str = "callback-ends"  # task ends that owe a callback (on the events stream)

    @staticmethod
    def dead_consumer(consumer: str) -> str:
        """The durable consumer of the dead-letter stream that serves work consumer `consumer`."""
        return f"{consumer}-dead"

    @staticmethod
    def exhausted_subject(stream: str, consumer: str) -> str:
        """Where the server announces that `consumer` gave up on a message of `stream`."""
        return f"$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.{stream}.{consumer}"

    @property
    def mcp_stream(self) -> str:
        """MCP sessions' server-to-client notifications: the replay log behind `GET /mcp`."""
        return f"{self.stream_prefix}_MCP"

    @property
    def mcp_sessions_bucket(self) -> str:
        return f"{self.bucket_prefix}_mcp_sessions"

    @property
    def control_bucket(self) -> str:
        return f"{self.bucket_prefix}_control"

    @property
    def checkpoints_bucket(self) -> str:
        return f"{self.bucket_prefix}_checkpoints"

    @property
    def reports_bucket(self) -> str:
        return f"{self.bucket_prefix}_reports"

    @property
    def uploads_bucket(self) -> str:
        """Uploads waiting for ingestion (too large to travel inline)."""
        return f"{self.bucket_prefix}_uploads"


def subjects_for(settings: CommonSettings) -> Subjects:
    return Subjects(settings.subject_prefix)


def names_for(settings: CommonSettings) -> Names:
    return Names(settings.stream_prefix, settings.bucket_prefix)
