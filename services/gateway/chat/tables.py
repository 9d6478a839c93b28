"""The chat tables: conversations, their messages (the truth a client shows after `done`) and
their runs (one per user message; a run's id is its task's id)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Column, Index, Text
from sqlmodel import Field

from services.gateway.tables import GatewayModel, _json, _stamp, _ts


class Conversation(GatewayModel, table=True):
    __tablename__ = "conversations"
    __table_args__ = (Index("ix_conversations_user_activity", "user_id", "pinned", "last_activity_at"),)

    id: str = Field(primary_key=True, max_length=64)
    user_id: str = Field(index=True, max_length=64)
    title: str = Field(default="New conversation", max_length=200)
    model: str | None = Field(default=None, max_length=200)
    mode: str = Field(default="react", max_length=16)
    kb: str | None = Field(default=None, max_length=200)
    pinned: bool = False
    # The running summary of the older turns (chat/memory.py) and how many messages it covers.
    summary: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    summarized: int = 0
    meta: dict[str, Any] = _json(dict)  # what a LangGraph client gave the thread as its metadata
    last_activity_at: datetime = _stamp()
    created_at: datetime = _stamp()


class ChatRun(GatewayModel, table=True):
    __tablename__ = "chat_runs"
    __table_args__ = (Index("ix_chat_runs_conversation_seq", "conversation_id", "seq", unique=True),)

    id: str = Field(primary_key=True, max_length=64)  # = the task id once published
    conversation_id: str = Field(max_length=64)
    seq: int
    mode: str = Field(max_length=16)
    # The model asked for (message > conversation), then the model that answered.
    model: str | None = Field(default=None, max_length=200)
    state: str = Field(default="queued", index=True, max_length=32)
    position: int = 0  # runs ahead of it when it was accepted
    # The policy it was posted with toward a run still going (enqueue, reject, interrupt, rollback).
    multitask: str = Field(default="enqueue", max_length=16)
    # Set when a later message interrupts this run: its cancellation ends it `interrupted`.
    stop_reason: str | None = Field(default=None, max_length=32)
    guardrail_grey: list[str] = _json(list)
    meta: dict[str, Any] = _json(dict)  # what a LangGraph client gave the run as its metadata
    # The run this one goes on from when that is not the run before it (a branch: chat/lineage.py).
    follows: str | None = Field(default=None, max_length=64)
    # The run whose question this one answers again (its own question is a copy of that one): a
    # LangGraph run from that question's checkpoint, whose answer history shows beside the first.
    answers_again: str | None = Field(default=None, max_length=64)
    created_at: datetime = _stamp()
    ended_at: datetime | None = _ts()


class ChatMessage(GatewayModel, table=True):
    __tablename__ = "messages"
    __table_args__ = (Index("ix_messages_conversation_order", "conversation_id", "run_seq", "id"),
                      Index("ix_messages_conversation_client", "conversation_id", "client_id"))

    # The row's own id (`new_id`, in the order written): it orders a turn's messages as they were said.
    id: str = Field(primary_key=True, max_length=64)
    conversation_id: str = Field(max_length=64)
    # The id a LangGraph client gave the message, unique in its thread (`protocols/langgraph/messages.py`).
    client_id: str | None = Field(default=None, max_length=64)
    run_id: str | None = Field(default=None, index=True, max_length=64)
    # The run's seq: messages read in turn order (a queued user message after the answer before it).
    run_seq: int = 0
    role: str = Field(max_length=16)
    content: str = Field(default="", sa_column=Column(Text, nullable=False))
    message_type: str = Field(default="text", max_length=16)
    tool_events: list[dict[str, Any]] = _json(list)
    thinking: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    usage: dict[str, Any] | None = _json()
    model: str | None = Field(default=None, max_length=200)
    created_at: datetime = _stamp()
