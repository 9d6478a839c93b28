"""The test-run guard refuses HTTP to remote hosts (so no test reaches a real model), lets
loopback through, and fails a test that swallowed the refusal."""

from __future__ import annotations

import socket

import httpx
import openai
import pytest

from services.dispatcher.llm.api import LLMRequest
from services.dispatcher.llm.endpoint import OpenAIEndpoint
from services.dispatcher.llm.errors import AttemptError
from shared.contract.models import ModelConfig
from tests.support.model_guard import RemoteHostRefused, is_loopback, take_reached

pytest_plugins = ("pytester",)

# 192.0.2.0/24 is TEST-NET-1 (RFC 5737): routable nowhere, so even a broken guard reaches nobody.
REMOTE = "http://192.0.2.10:8000/v1"


def closed_loopback_port() -> int:
    """A loopback port nobody listens on: a connection there is refused by the kernel at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("127.8.9.10", True), ("::1", True), ("localhost", True),
     ("10.0.0.1", False), ("192.0.2.10", False), ("::2", False), ("api.openai.com", False),
     ("localhost.example.com", False)],
)
def test_only_loopback_hosts_count_as_local(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


async def test_the_openai_client_toward_a_remote_host_is_refused_and_recorded() -> None:
    client = openai.AsyncOpenAI(base_url=REMOTE, api_key="k", max_retries=0)
    with pytest.raises(openai.APIConnectionError) as caught:
        await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    assert isinstance(caught.value.__cause__, RemoteHostRefused)
    assert take_reached() == [f"{REMOTE}/chat/completions"]  # taken: this test meant to trip it
    await client.close()


async def test_the_dispatchers_model_client_toward_a_remote_host_is_refused_and_recorded() -> None:
    endpoint = OpenAIEndpoint(ModelConfig(id="r", name="remote", base_url=REMOTE, model="m"), "k")
    with pytest.raises(AttemptError) as caught:
        await endpoint.generate(LLMRequest(messages=[{"role": "user", "content": "hi"}]), None)
    assert caught.value.code == "unavailable" and isinstance(caught.value.__cause__, RemoteHostRefused)
    assert take_reached() == [f"{REMOTE}/chat/completions"]
    await endpoint.aclose()


def test_sync_httpx_toward_a_remote_host_is_refused_and_recorded() -> None:
    with pytest.raises(httpx.ConnectError) as caught:
        httpx.get("https://api.openai.com/v1/models?key=secret")
    assert isinstance(caught.value, RemoteHostRefused)
    assert take_reached() == ["https://api.openai.com/v1/models"]  # the query (a key?) is not repeated


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
async def test_loopback_goes_through_to_the_network(host: str) -> None:
    """Refused by the kernel (nobody listens), not by the guard, for both HTTP stacks."""
    async with httpx.AsyncClient() as client:
        with pytest.raises(httpx.ConnectError) as caught:
            await client.get(f"http://{host}:{closed_loopback_port()}/v1/models")
    assert not isinstance(caught.value, RemoteHostRefused)
    model_client = openai.AsyncOpenAI(base_url=f"http://{host}:{closed_loopback_port()}/v1", api_key="k",
                                      max_retries=0)
    with pytest.raises(openai.APIConnectionError) as refused:
        await model_client.models.list()
    assert refused.value.__cause__ is not None and not isinstance(refused.value.__cause__, RemoteHostRefused)
    await model_client.close()
    endpoint = OpenAIEndpoint(ModelConfig(id="l", name="local", base_url=f"http://{host}:{closed_loopback_port()}/v1",
                                          model="m"), None)
    with pytest.raises(AttemptError) as unreachable:
        await endpoint.generate(LLMRequest(messages=[{"role": "user", "content": "hi"}]), None)
    assert unreachable.value.code == "unavailable" and "is unreachable" in unreachable.value.message
    assert not isinstance(unreachable.value.__cause__, RemoteHostRefused)
    await endpoint.aclose()
    assert take_reached() == []


def test_a_test_that_swallows_the_refusal_still_fails(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        f"""
        import httpx

        def test_reaches_out_quietly():
            try:
                httpx.post("{REMOTE}/embeddings", json={{"input": ["x"]}})
            except httpx.HTTPError:
                pass  # as a failover or a fallback would
        """
    )
    result = pytester.runpytest_inprocess(
        "-p", "tests.support.model_guard", "-p", "no:cacheprovider", "-o", "asyncio_default_fixture_loop_scope=function"
    )
    result.assert_outcomes(passed=1, errors=1)  # the call passed; the guard's teardown failed it
    result.stdout.fnmatch_lines([f"*non-loopback host*{REMOTE}/embeddings*"])
    assert take_reached() == []  # the inner run took its own record
