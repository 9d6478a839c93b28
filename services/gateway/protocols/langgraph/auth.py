"""Who calls `/lg`: the API's bearer token or an API key with scope `chat`, sent as
`Authorization: Bearer …` (the SDK's `headers=`) or as the SDK's API key (`x-api-key`), within the
same per-user rate limit (`admission.admit`: the API's middleware covers `/api/v1` only)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from services.gateway.access.admission import admit
from services.gateway.access.principal import Principal


async def lg_user(request: Request) -> Principal:
    authorization = request.headers.get("authorization")
    api_key = request.headers.get("x-api-key")
    if not authorization and api_key:
        authorization = f"Bearer {api_key}"
    return await admit(request.app.state, request.scope, authorization, ("chat",))


LgUser = Annotated[Principal, Depends(lg_user)]
