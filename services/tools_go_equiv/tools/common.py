"""Helpers every tool module uses: the caller's identity and common argument shapes.

Ownership (API.md): a user sees and acts on their own resources; admins see all. Whether the
caller is an admin comes from the request metadata only (`ToolMeta.admin`, set by the gateway
from its verified principal) — never from the arguments, which a model may write."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, Field

from shared.bus.tools import ToolContext, ToolFailure

USER_ID = Field(default=None, max_length=200, description="injected: the calling user")


class UserArgs(BaseModel):
    user_id: str | None = USER_ID


@dataclass(frozen=True)
class Caller:
    """Who a call acts as: `user` owns whatever the call creates; an `admin` also reaches every
    other user's resources."""

    user: str
    admin: bool = False

    @property
    def scope(self) -> str | None:
        """The owner to filter by, or None for every owner."""
        return None if self.admin else self.user

    def may_act_on(self, owner: str | None) -> bool:
        return self.admin or owner == self.user


def user_of(args: UserArgs, ctx: ToolContext) -> str:
    """The injected `user_id`, else the one in the request metadata; tools never run anonymously.

    When both are given they must agree unless the metadata says the caller is an admin (the
    gateway acting on another user's memory): arguments alone never pick someone else."""
    user = args.user_id or ctx.meta.user_id
    if not user:
        raise ToolFailure("bad_arguments", "user_id is required (it is injected by the caller)")
    if ctx.meta.user_id and user != ctx.meta.user_id and not ctx.meta.admin:
        raise ToolFailure("forbidden", "user_id is not the calling user's; only an administrator may act for another")
    return user


def caller_of(args: UserArgs, ctx: ToolContext) -> Caller:
    return Caller(user_of(args, ctx), admin=ctx.meta.admin is True)


class Page(BaseModel):
    limit: int = Field(default=50, ge=1, le=200)
    cursor: str | None = Field(default=None, max_length=200)
