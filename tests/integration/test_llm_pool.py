"""The model pool against the scripted OpenAI-protocol server (real openai client, real HTTP):
streaming, usage, retries, failover, error kinds, budget, cache, redaction, pinning, offline."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from services.dispatcher.llm.api import BudgetExceeded, Delta, LLMError, LLMRequest, TokenBudget
from services.dispatcher.llm.cache import RedisCache
from services.dispatcher.llm.chain_config import ModelControl
from services.dispatcher.llm.pool import ModelPool
from services.dispatcher.llm.retry import RetryPolicy
from services.dispatcher.llm.tokens import estimate_messages, estimate_text
from shared.contract.models import ModelChain, ModelConfig, ModelParams, PriceEntry, Pricing
from shared.secrets import encrypt_secret
from shared.settings import Settings
from tests.support import openai_server as oai

KEY = "sk-test-key-0123456789"
SECRET = "deployment-secret-for-tests"
MESSAGES = [{"role": "user", "content": "Say hello"}]


@pytest.fixture
async def srv() -> AsyncIterator[oai.OpenAIServer]:
    async with oai.OpenAIServer(api_key=KEY, models=["primary-m", "fallback-m"], context_tokens=2000) as server:
        yield server


@pytest.fixture
def lsettings(tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path, secret_key=SECRET, llm_base_url=None, redis_url=None)


def model(
    name: str, url: str, *, key: str | None = KEY, timeout_s: float = 5.0, remote: str | None = None
) -> ModelConfig:
    return ModelConfig(
        id=name,
        name=name,
        base_url=url,
        model=remote or f"{name}-m",
        api_key_enc=encrypt_secret(key, SECRET) if key else None,
        params=ModelParams(timeout_s=timeout_s),
    )


class Recorder:
    """The pool's sleep: records the delays it was asked to wait, without waiting."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)
        await asyncio.sleep(0)


def make_pool(settings: Settings, models: list[ModelConfig], *, attempts: int = 3, **kw: object) -> ModelPool:
    chain = ModelChain(
        revision=1, active=models[0].name, fallbacks=[m.name for m in models[1:]], models={m.name: m for m in models}
    )
    return ModelPool(
        settings,
        control=ModelControl(settings, chain=chain),
        retry=RetryPolicy(attempts=attempts, base_delay_s=0.01, max_delay_s=0.02, max_retry_after_s=5),
        sleep=kw.pop("sleep", Recorder()),
        **kw,
    )  # type: ignore[arg-type]


def sink() -> tuple[list[Delta], object]:
    got: list[Delta] = []

    async def on_delta(delta: Delta) -> None:
        got.append(delta)

    return got, on_delta


async def test_stream_tokens_thinking_usage_and_cost(srv: oai.OpenAIServer, lsettings: Settings) -> None:
    srv.script(
        [
            oai.reply(
                "Hello there, friend.", reasoning="Let me think.", usage={"prompt_tokens": 11, "completion_tokens": 7}
            )
        ],
        model="primary-m",
    )
    pool = make_pool(lsettings, [model("primary", srv.url)])
    pool.control.apply(
        "models.pricing", Pricing(models={"primary": PriceEntry(prompt_per_1k=1.0, completion_per_1k=2.0)}), 3
    )
    got, on_delta = sink()
    result = await pool.pinned().complete(LLMRequest(messages=MESSAGES), on_delta=on_delta)  # type: ignore[arg-type]
    assert "".join(d.text for d in got if d.kind == "token") == "Hello there, friend."
    assert "".join(d.text for d in got if d.kind == "thinking") == "Let me think."
    assert {d.model for d in got} == {"primary"}
    assert got[0].kind == "thinking"
    assert result.text == "Hello there, friend." and result.thinking == "Let me think."
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (11, 7)
    assert result.usage.cost == pytest.approx(11 / 1000 * 1.0 + 7 / 1000 * 2.0)
    assert result.usage.models == ["primary"] and result.model == "primary"
    body = srv.requests()[0]["body"]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert srv.requests()[0]["headers"]["authorization"] == f"Bearer {KEY}"  # decrypted key was used
    await pool.aclose()


async def test_a_models_params_and_extras_reach_the_streamed_request_body(
    srv: oai.OpenAIServer, lsettings: Settings
) -> None:
    cfg = model("primary", srv.url).model_copy(update={"params": ModelParams(
        temperature=0.2, max_tokens=64, timeout_s=5.0, extra={"top_k": 5, "repetition_penalty": 1.1})})
    pool = make_pool(lsettings, [cfg])
    tools = [{"type": "function", "function": {"name": "kb_search", "parameters": {"type": "object"}}}]
    await pool.pinned().complete(LLMRequest(messages=MESSAGES, tools=tools, json_output=True))
    body = srv.requests()[0]["body"]
    assert body["model"] == "primary-m" and body["messages"] == MESSAGES and body["tools"] == tools
    assert (body["temperature"], body["max_tokens"], body["top_k"], body["repetition_penalty"]) == (0.2, 64, 5, 1.1)
    assert body["response_format"] == {"type": "json_object"} and body["stream"] is True
    assert "extra_body" not in body and "extra" not in body
    await pool.aclose()


async def test_reasoning_field_variant_and_usage_estimated_when_omitted(
    srv: oai.OpenAIServer, lsettings: Settings
) -> None:
    srv.script([oai.reply("abcdefgh" * 5, reasoning="hmm", reasoning_field="reasoning", usage=False)])
    pool = make_pool(lsettings, [model("primary", srv.url)])
    budget = TokenBudget(limit=10_000)
    result = await pool.pinned().complete(LLMRequest(messages=MESSAGES), budget=budget)
    assert result.thinking == "hmm"
    assert result.usage.prompt_tokens == estimate_messages(MESSAGES)
    assert result.usage.completion_tokens == estimate_text("abcdefgh" * 5) + estimate_text("hmm")
    assert budget.used == result.usage.total_tokens  # the budget is trued up to the usage
    await pool.aclose()


async def test_failover_primary_to_fallback_after_retries(srv: oai.OpenAIServer, lsettings: Settings) -> None:
    srv.script([oai.server_error(500)] * 3, model="primary-m")
    srv.script([oai.reply("from fallback")], model="fallback-m")
    sleeps = Recorder()
    pool = make_pool(lsettings, [model("primary", srv.url), model("fallback", srv.url)], sleep=sleeps)
    got, on_delta = sink()
    result = await pool.pinned().complete(LLMRequest(messages=MESSAGES), on_delta=on_delta)  # type: ignore[arg-type]
    assert result.model == "fallback" and result.text == "from fallback"
    assert [r["model"] for r in srv.requests()] == ["primary-m"] * 3 + ["fallback-m"]
    assert len(sleeps.delays) == 2  # backoff between the three attempts at the primary
    assert {d.model for d in got} == {"fallback"}
    await pool.aclose()


async def test_retry_after_is_honoured(srv: oai.OpenAIServer, lsettings: Settings) -> None:
    srv.script([oai.rate_limited(retry_after=2), oai.reply("ok now")], model="primary-m")
    sleeps = Recorder()
    pool = make_pool(lsettings, [model("primary", srv.url)], sleep=sleeps)
    result = await pool.pinned().complete(LLMRequest(messages=MESSAGES))
    assert result.text == "ok now" and sleeps.delays == [2.0]
    await pool.aclose()


async def test_auth_failure_is_not_retried_but_fails_over(srv: oai.OpenAIServer, lsettings: Settings) -> None:
    srv.script([oai.reply("fallback answer")], model="fallback-m")
    pool = make_pool(lsettings, [model("primary", srv.url, key="sk-wrong-key-000000"), model("fallback", srv.url)])
    result = await pool.pinned().complete(LLMRequest(messages=MESSAGES))
    assert result.model == "fallback"
    assert [r["model"] for r in srv.requests()] == ["primary-m", "fallback-m"]  # one try at the primary
    await pool.aclose()


@pytest.mark.parametrize(
    ("steps", "code", "words", "requests"),
    [
        ([oai.rate_limited(retry_after=0)] * 3, "rate_limited", ["HTTP 429", "after 3 attempts"], 3),
        ([oai.server_error(503)] * 3, "unavailable", ["HTTP 503", "after 3 attempts"], 3),
        ([oai.hang(seconds=30)] * 3, "timeout", ["timed out", "0.3s"], 3),
        ([oai.auth_failure()], "auth", ["authentication failed", "401"], 1),
        ([oai.malformed()], "stream_broken", ["malformed"], 1),
        ([oai.error(400, "unsupported parameter: top_k")], "bad_request", ["HTTP 400", "top_k"], 1),
    ],
    ids=["429-exhausted", "5xx-exhausted", "hang", "401", "malformed-chunk", "bad-request"],
)
async def test_error_kinds(
    srv: oai.OpenAIServer, lsettings: Settings, steps: list[oai.Step], code: str, words: list[str], requests: int
) -> None:
    srv.script(steps, model="primary-m")
    pool = make_pool(lsettings, [model("primary", srv.url, timeout_s=0.3)])
    with pytest.raises(LLMError) as info:
        await pool.pinned().complete(LLMRequest(messages=MESSAGES))
    assert info.value.code == code
    for word in [*words, "'primary'"]:
        assert word in info.value.message
    assert len(srv.requests()) == requests
    await pool.aclose()


async def test_real_404_and_context_too_long(srv: oai.OpenAIServer, lsettings: Settings) -> None:
    pool = make_pool(lsettings, [model("primary", srv.url, remote="no-such-model")])
    with pytest.raises(LLMError) as info:
        await pool.pinned().complete(LLMRequest(messages=MESSAGES))
    assert info.value.code == "model_not_found" and "no-such-model" in info.value.message
    await pool.aclose()

    pool = make_pool(lsettings, [model("primary", srv.url)])
    long = [{"role": "user", "content": "word " * 3000}]  # > the server's 2000-token context
    with pytest.raises(LLMError) as info:
        await pool.pinned().complete(LLMRequest(messages=long))
    assert info.value.code == "context_too_long" and "context" in info.value.message
    assert len(srv.requests()) == 2  # 404 and 400 are never retried
    await pool.aclose()


@pytest.mark.parametrize(
    "failure", [oai.hang("Hello wor", seconds=30), oai.malformed("Hello wor")], ids=["hang", "malformed"]
)
async def test_no_failover_after_first_token(srv: oai.OpenAIServer, lsettings: Settings, failure: oai.Step) -> None:
    srv.script([failure], model="primary-m")
    srv.script([oai.reply("must not be used")], model="fallback-m")
    pool = make_pool(lsettings, [model("primary", srv.url, timeout_s=0.3), model("fallback", srv.url)])
    got, on_delta = sink()
    with pytest.raises(LLMError) as info:
        await pool.pinned().complete(LLMRequest(messages=MESSAGES), on_delta=on_delta)  # type: ignore[arg-type]
    assert info.value.code == "stream_broken" and "after output had started" in info.value.message
    assert "".join(d.text for d in got) == "Hello wor"
    assert [r["model"] for r in srv.requests()] == ["primary-m"]
    await pool.aclose()


async def test_failover_when_stream_breaks_before_first_token(srv: oai.OpenAIServer, lsettings: Settings) -> None:
    srv.script([oai.malformed("")], model="primary-m")
    srv.script([oai.reply("fallback text")], model="fallback-m")
    pool = make_pool(lsettings, [model("primary", srv.url), model("fallback", srv.url)])
    got, on_delta = sink()
    result = await pool.pinned().complete(LLMRequest(messages=MESSAGES), on_delta=on_delta)  # type: ignore[arg-type]
    assert result.model == "fallback" and "".join(d.text for d in got) == "fallback text"
    await pool.aclose()


async def test_all_models_failed_message_names_each(srv: oai.OpenAIServer, lsettings: Settings) -> None:
    srv.script([oai.auth_failure()], model="primary-m")
    srv.script([oai.server_error(502)] * 3, model="fallback-m")
    pool = make_pool(lsettings, [model("primary", srv.url), model("fallback", srv.url)])
    with pytest.raises(LLMError) as info:
        await pool.pinned().complete(LLMRequest(messages=MESSAGES))
    assert info.value.code == "auth"
    assert info.value.message.startswith("all models failed")
    assert "'primary'" in info.value.message and "'fallback'" in info.value.message and "502" in info.value.message
    await pool.aclose()


async def test_budget_stops_a_running_stream(srv: oai.OpenAIServer, lsettings: Settings) -> None:
    text = "token " * 2000  # 12,000 characters
    srv.script([oai.reply(text, chunk_chars=6)], model="primary-m")
    pool = make_pool(lsettings, [model("primary", srv.url)])
    limit = estimate_messages(MESSAGES) + 100
    budget = TokenBudget(limit=limit)
    got, on_delta = sink()
    with pytest.raises(BudgetExceeded) as info:
        await pool.pinned().complete(LLMRequest(messages=MESSAGES), budget=budget, on_delta=on_delta)  # type: ignore[arg-type]
    streamed = "".join(d.text for d in got)
    assert 0 < len(streamed) < 1000 and streamed == text[: len(streamed)]
    assert info.value.limit == limit and budget.used > limit
    # A later call of the same task is refused before any request is sent.
    before = len(srv.requests())
    with pytest.raises(BudgetExceeded):
        await pool.pinned().complete(LLMRequest(messages=MESSAGES), budget=budget)
    assert len(srv.requests()) == before
    await pool.aclose()


async def test_output_cache_hit_for_non_streaming(srv: oai.OpenAIServer, lsettings: Settings) -> None:
    srv.script([oai.reply("cached answer")], model="primary-m")
    pool = make_pool(lsettings, [model("primary", srv.url)])
    request = LLMRequest(messages=MESSAGES, stream=False, temperature=0.0)
    first = await pool.pinned().complete(request)
    second = await pool.pinned().complete(request)
    assert not first.cached and first.usage.cached_calls == 0
    assert second.cached and second.text == "cached answer" and second.usage.cached_calls == 1
    assert second.usage.total_tokens == 0 and second.usage.models == ["primary"]
    assert len(srv.requests()) == 1
    # Other params or a streaming request are not served from the cache.
    await pool.pinned().complete(LLMRequest(messages=MESSAGES, stream=False, temperature=0.5))
    await pool.pinned().complete(LLMRequest(messages=MESSAGES, stream=True, temperature=0.0))
    assert len(srv.requests()) == 3
    await pool.aclose()


async def test_output_cache_in_redis_is_shared(
    srv: oai.OpenAIServer, lsettings: Settings, redis_url: str, redis_prefix: str
) -> None:
    srv.script([oai.reply("shared answer")], model="primary-m")
    pools = [
        make_pool(lsettings, [model("primary", srv.url)], cache=RedisCache(redis_url, redis_prefix)) for _ in range(2)
    ]
    request = LLMRequest(messages=MESSAGES, stream=False)
    assert not (await pools[0].pinned().complete(request)).cached
    hit = await pools[1].pinned().complete(request)
    assert hit.cached and hit.text == "shared answer" and hit.usage.cached_calls == 1
    assert len(srv.requests()) == 1
    for p in pools:
        await p.aclose()


async def test_tool_calls_are_parsed_streamed_and_not(srv: oai.OpenAIServer, lsettings: Settings) -> None:
    calls = [oai.tool_call("lookup", {"q": "nats"}, id="c1"), oai.tool_call("broken", "{not json", id="c2")]
    srv.script([oai.reply("", tool_calls=calls), oai.reply("", tool_calls=calls)], model="primary-m")
    pool = make_pool(lsettings, [model("primary", srv.url)])
    for stream in (True, False):
        result = await pool.pinned().complete(LLMRequest(messages=MESSAGES, stream=stream))
        assert [(c.id, c.name, c.arguments) for c in result.tool_calls] == [
            ("c1", "lookup", {"q": "nats"}),
            ("c2", "broken", {}),
        ]
        assert result.tool_calls[1].arguments_error and "not valid JSON" in result.tool_calls[1].arguments_error
        assert result.finish_reason == "tool_calls"
    await pool.aclose()


async def test_secret_is_redacted_at_every_split_point_of_the_stream(
    srv: oai.OpenAIServer, lsettings: Settings
) -> None:
    secret = "sk-proj-A1b2C3d4E5f6G7h8I9j0"
    text = f"The key is {secret} — keep it safe."
    pool = make_pool(lsettings, [model("primary", srv.url)])
    for cut in range(len("The key is "), len("The key is ") + len(secret) + 1):
        srv.script([oai.reply([text[:cut], text[cut:]])], model="primary-m")
        got, on_delta = sink()
        result = await pool.pinned().complete(LLMRequest(messages=MESSAGES), on_delta=on_delta)  # type: ignore[arg-type]
        streamed = "".join(d.text for d in got)
        assert streamed == result.text == "The key is [REDACTED:api_key] — keep it safe."
        assert all(secret[:12] not in d.text for d in got)
    await pool.aclose()


async def test_pinned_chain_survives_a_hot_swap(srv: oai.OpenAIServer, lsettings: Settings) -> None:
    pool = make_pool(lsettings, [model("primary", srv.url), model("fallback", srv.url)])
    before = pool.pinned()
    swapped = ModelChain(revision=7, active="fallback", models=pool.control.chain.models)
    assert pool.control.apply("models.chain", swapped.model_dump(), 40)
    assert not pool.control.apply("models.chain", swapped.model_dump(), 41)  # same revision: idempotent
    after = pool.pinned()
    assert (before.chain_revision, after.chain_revision) == (1, 7)
    assert (await before.complete(LLMRequest(messages=MESSAGES))).model == "primary"
    assert (await after.complete(LLMRequest(messages=MESSAGES))).model == "fallback"
    await pool.aclose()


async def test_model_alias_and_unknown_alias(srv: oai.OpenAIServer, lsettings: Settings) -> None:
    pool = make_pool(lsettings, [model("primary", srv.url), model("fallback", srv.url)])
    llm = pool.pinned()
    assert (await llm.complete(LLMRequest(messages=MESSAGES, model="fallback"))).model == "fallback"
    with pytest.raises(LLMError) as info:
        await llm.complete(LLMRequest(messages=MESSAGES, model="gpt-9"))
    assert info.value.code == "model_not_found" and "gpt-9" in info.value.message
    await pool.aclose()


async def test_undecryptable_key_is_a_clear_auth_error(srv: oai.OpenAIServer, lsettings: Settings) -> None:
    bad = model("primary", srv.url).model_copy(update={"api_key_enc": encrypt_secret(KEY, "another-deployment")})
    pool = make_pool(lsettings, [bad])
    with pytest.raises(LLMError) as info:
        await pool.pinned().complete(LLMRequest(messages=MESSAGES))
    assert info.value.code == "auth" and "secret_key" in info.value.message
    assert srv.requests() == []
    await pool.aclose()


async def test_offline_model_when_no_endpoint_is_configured(lsettings: Settings) -> None:
    # Nothing in KV, no AGENTIX_LLM_BASE_URL: the offline model. Every chunk its own delta (no
    # interval merging them), to see that it streams word by word.
    pool = ModelPool(lsettings.model_copy(update={"token_event_interval_ms": 0}))
    assert pool.control.chain.active == "offline"
    got, on_delta = sink()
    prompt = (
        "Context: NATS JetStream stores messages in streams. Paris is the capital of France. "
        "Cats sleep a lot.\nQuestion: Where does JetStream store messages?"
    )
    result = await pool.pinned().complete(LLMRequest(messages=[{"role": "user", "content": prompt}]), on_delta=on_delta)  # type: ignore[arg-type]
    assert result.model == "offline" and result.usage.models == ["offline"]
    assert {d.model for d in got} == {"offline"} and len(got) > 3
    assert "".join(d.text for d in got) == result.text == "Context: NATS JetStream stores messages in streams."
    assert result.usage.completion_tokens > 0 and result.usage.cost == 0
    briefs = await pool.pinned().complete(
        LLMRequest(
            messages=[
                {"role": "system", "content": "You coordinate experts. Return a JSON list of briefs."},
                {"role": "user", "content": 'Goal: plan a launch\nExperts: [{"name": "market"}, {"name": "legal"}]'},
            ],
            json_output=True,
            stream=False,
        )
    )
    parsed = json.loads(briefs.text)
    assert [b["name"] for b in parsed] == ["market", "legal"] and all("plan a launch" in b["brief"] for b in parsed)
    await pool.aclose()
