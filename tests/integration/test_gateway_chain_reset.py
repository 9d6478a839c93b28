"""An admin can always get back to the built-in model: chain the offline model, or clear the
chain (`{"active": null}`), after which the chained model can be deleted. Admin lists are pages."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from services.dispatcher.llm.chain_config import ModelControl
from services.gateway.embedded import EmbeddedGateway
from shared.auth_tokens import mint_token
from shared.bus.control import ControlPlane
from shared.settings import Settings

LOCAL = {"name": "local-openai", "provider": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m"}


@pytest.fixture
async def admin(gw: EmbeddedGateway) -> AsyncIterator[httpx.AsyncClient]:
    headers = {"Authorization": f"Bearer {mint_token(gw.settings, 'root', admin=True)}"}
    async with httpx.AsyncClient(base_url=gw.url, headers=headers, timeout=10) as c:
        yield c


async def _dispatcher_view(gw: EmbeddedGateway, settings: Settings) -> ModelControl:
    """What a dispatcher started now makes of the chain in KV."""
    stored = await ControlPlane(gw.app.state.bus).get("models.chain")
    assert stored is not None
    control = ModelControl(settings.model_copy(update={"llm_base_url": None}))
    control.apply("models.chain", stored[0], stored[1])
    return control


async def test_back_to_the_offline_model_then_clear_the_chain(
    gw: EmbeddedGateway, admin: httpx.AsyncClient, settings: Settings
) -> None:
    model = (await admin.post("/api/v1/admin/models", json=LOCAL)).json()
    resp = await admin.put("/api/v1/admin/models/chain", json={"active": "local-openai", "fallbacks": []})
    assert resp.status_code == 200, resp.text

    resp = await admin.put("/api/v1/admin/models/chain", json={"active": "offline"})
    assert resp.status_code == 200, resp.text
    assert [m.provider for m in (await _dispatcher_view(gw, settings)).chain.ordered()] == ["offline"]
    resp = await admin.put("/api/v1/admin/models/chain", json={"active": "local-openai", "fallbacks": ["offline"]})
    assert resp.status_code == 200, resp.text

    refused = await admin.delete(f"/api/v1/admin/models/{model['id']}")
    assert refused.status_code == 409 and '"active": null' in refused.json()["detail"]

    resp = await admin.put("/api/v1/admin/models/chain", json={"active": None, "fallbacks": []})
    assert resp.status_code == 200, resp.text
    cleared = resp.json()["revision"]
    assert (await admin.get("/api/v1/admin/models/chain")).json() == {
        "revision": cleared, "active": None, "fallbacks": []}
    control = await _dispatcher_view(gw, settings)
    assert control.chain.revision == cleared
    assert [m.name for m in control.chain.ordered()] == ["offline"]
    assert (await admin.delete(f"/api/v1/admin/models/{model['id']}")).status_code == 204

    bad = await admin.put("/api/v1/admin/models/chain", json={"active": None, "fallbacks": ["offline"]})
    assert bad.status_code == 422


async def test_models_and_prompts_lists_are_pages(admin: httpx.AsyncClient) -> None:
    for name in ("m1", "m2", "m3"):
        assert (await admin.post("/api/v1/admin/models", json={**LOCAL, "name": name})).status_code == 201
        version = await admin.post(f"/api/v1/admin/prompts/{name}/versions", json={"text": f"You are {name}."})
        assert version.status_code == 201, version.text
    for route in ("/api/v1/admin/models", "/api/v1/admin/prompts"):
        first = (await admin.get(route, params={"limit": 2})).json()
        assert [i["name"] for i in first["items"]] == ["m1", "m2"] and first["next_cursor"]
        rest = (await admin.get(route, params={"limit": 2, "cursor": first["next_cursor"]})).json()
        assert [i["name"] for i in rest["items"]] == ["m3"] and rest["next_cursor"] is None
