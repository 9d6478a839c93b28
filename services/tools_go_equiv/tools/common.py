"""Helpers every tool module uses: the caller's identity and common argument shapes."""

from __future__ import annotations

from pydantic import BaseModel, Field

from shared.bus.tools import ToolContext, ToolFailure

USER_ID = Field(default=None, max_length=200, description="injected: the calling user")


class UserArgs(BaseModel):
    user_id: str | None = USER_ID


def user_of(args: UserArgs, ctx: ToolContext) -> str:
    """The injected `user_id`, else the one in the request metadata; tools never run anonymously."""
    user = args.user_id or ctx.meta.user_id
    if not user:
        raise ToolFailure("bad_arguments", "user_id is required (it is injected by the caller)")
    return user


class Page(BaseModel):
    limit: int = Field(default=50, ge=1, le=200)
    cursor: str | None = Field(default=None, max_length=200)
