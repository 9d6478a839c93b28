"""A test-run guard: no test reaches a real model endpoint (or any other remote HTTP host).

Every HTTP request goes through a transport of `httpx`, of `httpx2` (the fork the `openai`
client is built on), or through an `aiohttp` session (the dispatcher's model client). The guard
wraps the three once per run: a request to a host that is not loopback (127.0.0.0/8, ::1,
`localhost`) is refused before anything leaves the machine, with that library's connection
error, which is how the code under test sees an unreachable endpoint. Since that code may catch
the error (a model pool fails over, a reranker keeps the fused order), the attempt is also
recorded, and the test during which it happened fails at teardown. In-process transports (ASGI,
mock) are not touched.

Registered as a plugin by `tests/conftest.py`; cost per request is one host check."""

from __future__ import annotations

import importlib
import ipaddress
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest

_reached: list[str] = []  # remote URLs requested since the current test started
_GUARDED = "_agentix_model_guard"
HTTP_LIBRARIES = ("httpx", "httpx2")


class RemoteHostRefused(Exception):
    """Mixed into each library's ConnectError: to the code under test, a host it cannot reach."""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a name other than localhost: it would be resolved, so it is remote
        return False


def _guard(library: ModuleType) -> None:
    """Wrap `library`'s sync and async transports, unless already wrapped."""
    sync_send = library.HTTPTransport.handle_request
    if getattr(sync_send, _GUARDED, False):
        return
    async_send = library.AsyncHTTPTransport.handle_async_request
    refused = type("RemoteHostRefused", (RemoteHostRefused, library.ConnectError), {})

    def refuse_remote(request: Any) -> None:
        if not is_loopback(request.url.host):
            url = str(request.url.copy_with(query=None))  # the query may hold a key: not repeated
            _reached.append(url)
            raise refused(f"tests may not reach {url}: only loopback hosts are allowed", request=request)

    def handle_request(self: Any, request: Any) -> Any:
        refuse_remote(request)
        return sync_send(self, request)

    async def handle_async_request(self: Any, request: Any) -> Any:
        refuse_remote(request)
        return await async_send(self, request)

    for wrapper in (handle_request, handle_async_request):
        setattr(wrapper, _GUARDED, True)
    library.HTTPTransport.handle_request = handle_request
    library.AsyncHTTPTransport.handle_async_request = handle_async_request


def _guard_aiohttp() -> None:
    """Wrap `aiohttp.ClientSession._request`, where every request of a session starts (the
    connector's connection is made further in), unless already wrapped."""
    import aiohttp
    import yarl

    request = aiohttp.ClientSession._request
    if getattr(request, _GUARDED, False):
        return
    refused = type("RemoteHostRefused", (RemoteHostRefused, aiohttp.ClientConnectionError), {})

    async def guarded(self: Any, method: str, str_or_url: Any, *args: Any, **kwargs: Any) -> Any:
        url = yarl.URL(str(str_or_url))
        if not is_loopback(url.host or ""):
            where = str(url.with_query(None))  # the query may hold a key: not repeated
            _reached.append(where)
            raise refused(f"tests may not reach {where}: only loopback hosts are allowed")
        return await request(self, method, str_or_url, *args, **kwargs)

    setattr(guarded, _GUARDED, True)
    aiohttp.ClientSession._request = guarded  # type: ignore[method-assign]


def install() -> None:
    """Guard every installed HTTP library (idempotent: an in-process inner run configures again)."""
    for name in HTTP_LIBRARIES:
        try:
            library = importlib.import_module(name)
        except ImportError:  # httpx2 comes with newer openai releases only
            continue
        _guard(library)
    _guard_aiohttp()


def take_reached() -> list[str]:
    """The remote URLs requested so far in this test, forgotten once taken (the guard's own test
    takes them, so that its deliberate attempts do not fail it)."""
    taken = _reached.copy()
    _reached.clear()
    return taken


def pytest_configure(config: pytest.Config) -> None:
    install()


@pytest.fixture(autouse=True)
def _no_remote_hosts() -> Iterator[None]:
    """Autouse: set up before the test's other function-scoped fixtures and torn down after them,
    so requests made by those fixtures count too."""
    _reached.clear()
    yield
    reached = take_reached()
    if reached:
        pytest.fail(f"the test tried to reach a non-loopback host (a real model?): {', '.join(reached)}")
