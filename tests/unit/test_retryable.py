"""`retryable` on every family of described failures: what each class says, what an instance
says when it knows better, and the tool reply that carries it across NATS."""

from __future__ import annotations

import aiohttp
import nats.js.errors
import pytest

from services.dispatcher.checkpoints_kv import CheckpointWriteError
from services.dispatcher.llm.api import BudgetExceeded, LLMError
from services.dispatcher.llm.errors import status_error, transport_error
from services.dispatcher.llm.model import ModelFailed
from services.dispatcher.llm.retry import RetryPolicy
from services.tools_go_equiv.ingest.parse import IngestError
from services.tools_go_equiv.ingest.pipeline import JobGone
from services.tools_go_equiv.kb.embed import EmbedderUnavailable
from services.tools_go_equiv.kb.store import DocumentGone
from services.tools_py.parsing.types import ParseError
from services.tools_py.sandbox.runner import SandboxUnavailable
from shared.bus.client import BusUnavailable
from shared.bus.retry import BusDeclareError, BusWriteError, declarations, with_retries
from shared.bus.tools import ToolFailure
from shared.contract.tools import ToolReply
from shared.errors import AgentixError
from shared.group_commit import GroupCommitClosed


def test_a_described_failure_is_not_retryable_unless_it_says_so() -> None:
    assert AgentixError("x").retryable is False
    assert AgentixError("x", retryable=True).retryable is True
    assert AgentixError.retryable is False  # the instance's word did not change the class


@pytest.mark.parametrize(("error", "retryable"), [
    (BusWriteError("no leader"), True),
    (BusUnavailable("no NATS"), True),
    (CheckpointWriteError("not stored"), True),
    (GroupCommitClosed("draining"), True),
    (EmbedderUnavailable("endpoint down"), True),
    (IngestError("parsing failed (timeout)"), True),
    (DocumentGone("doc_1"), False),
    (JobGone("job_1"), False),
    (ParseError("not a PDF"), False),
    (SandboxUnavailable("no namespaces"), False),
    (BudgetExceeded(11, 10), False),
], ids=lambda v: type(v).__name__ if isinstance(v, Exception) else str(v))
def test_each_family_says_whether_another_attempt_may_succeed(error: AgentixError, retryable: bool) -> None:
    assert error.retryable is retryable


async def test_a_declaration_that_timed_out_may_succeed_later_a_refused_one_never() -> None:
    async def forming() -> None:
        raise nats.js.errors.ServiceUnavailableError(code=503, err_code=10008, description="temporarily unavailable")

    async def refused() -> None:
        raise nats.js.errors.ServerError(code=500, err_code=10074, description="replicas > 1 not supported")

    with pytest.raises(BusDeclareError) as timed_out:
        await with_retries(forming, what="declaring S", policy=declarations(0.2))
    assert timed_out.value.retryable
    with pytest.raises(BusDeclareError) as refusal:
        await with_retries(refused, what="declaring S", policy=declarations(60))
    assert not refusal.value.retryable


@pytest.mark.parametrize(("status", "body", "retryable"), [
    (429, "", True),
    (429, '{"error": {"code": "insufficient_quota", "message": "quota"}}', False),  # more waiting won't pay
    (500, "", True),
    (503, "", True),
    (408, "", True),
    (400, "", False),
    (401, "", False),
    (404, "", False),
    (413, "", False),
])
def test_a_model_attempt_is_retryable_by_what_the_endpoint_answered(status: int, body: str, retryable: bool) -> None:
    assert status_error(status, None, body, "m").retryable is retryable


def test_a_transport_failure_is_retryable_a_malformed_answer_is_not() -> None:
    assert transport_error(aiohttp.ServerTimeoutError(), "m", 1, answering=False).retryable
    assert transport_error(aiohttp.ClientConnectionError(), "m", 1, answering=False).retryable
    assert not transport_error(ValueError("?"), "m", 1, answering=True).retryable


def test_a_models_final_error_carries_it() -> None:
    assert ModelFailed("unavailable", "gave up", attempts=3, retryable=True).retryable
    assert not ModelFailed("auth", "refused", attempts=1).retryable
    assert LLMError("timeout", "slow", retryable=True).retryable and not LLMError("bad_request", "no").retryable


def test_the_model_retry_policy_is_the_shared_backoff_with_half_jitter_and_its_attempts() -> None:
    backoff = RetryPolicy(attempts=4, base_delay_s=0.5, max_delay_s=8.0).backoff
    assert (backoff.first_s, backoff.max_s, backoff.jitter, backoff.attempts) == (0.5, 8.0, 0.5, 4)
    assert all(0.5 <= backoff.delay(1) <= 1.0 for _ in range(100))  # the old `d/2 + uniform(0, d/2)`, d = 1 s


def test_a_tool_failure_travels_as_a_reply_that_says_it() -> None:
    assert ToolFailure("unavailable", "store down", retryable=True).retryable
    assert not ToolFailure("not_found", "no such row").retryable
    reply = ToolReply.failure("unavailable", "store down", retryable=True)
    again = ToolReply.model_validate_json(reply.model_dump_json())
    assert again.error is not None and again.error.retryable
    # A reply from an older sender, without the field, is read as not retryable.
    old = ToolReply.model_validate_json('{"ok": false, "error": {"code": "timeout", "message": "slow"}}')
    assert old.error is not None and old.error.retryable is False
