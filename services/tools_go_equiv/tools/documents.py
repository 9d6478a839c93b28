"""Documents of a knowledge base: ingest (queue a job), job state, list, get, delete."""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import logging
import uuid
from dataclasses import dataclass
from typing import Any

from nats.js.errors import NotFoundError
from pydantic import BaseModel, Field, model_validator
from sqlalchemy import Connection
from sqlalchemy.exc import IntegrityError

from services.tools_go_equiv import objects, runtime
from services.tools_go_equiv.ingest import jobs
from services.tools_go_equiv.kb import store
from services.tools_go_equiv.registry import ADDS_ONCE, DELETES, READS, registry
from services.tools_go_equiv.tools.common import Caller, Page, UserArgs, caller_of
from services.tools_go_equiv.tools.kb import KB_REF, resolve_kb
from shared.bus.events import EventPublisher
from shared.bus.tools import ToolContext, ToolFailure
from shared.contract.events import ProgressEvent
from shared.contract.ingest import INLINE_UPLOAD_MAX, IngestJob

log = logging.getLogger("agentix.tools_go.documents")
SUPPORTED = (".txt", ".md", ".markdown", ".html", ".htm", ".pdf", ".docx", ".text")


class DocumentSource(BaseModel):
    """One document to ingest: its content (exactly one source) and how to call it."""

    title: str | None = Field(default=None, max_length=500)
    text: str | None = Field(default=None, description="the document as text (markdown or plain)")
    content_b64: str | None = Field(default=None, description="a file's bytes, base64")
    object_name: str | None = Field(default=None, max_length=512, description="an upload in the uploads store")
    filename: str | None = Field(default=None, max_length=512)
    media_type: str | None = Field(default=None, max_length=200)

    @model_validator(mode="after")
    def _one_source(self) -> DocumentSource:
        if sum(x is not None for x in (self.text, self.content_b64, self.object_name)) != 1:
            raise ValueError("give exactly one of text, content_b64 and object_name")
        return self


class KbIngestArgs(UserArgs, DocumentSource):
    kb: str = KB_REF


@dataclass
class Prepared:
    """A document's content, checked and hashed; large content already in the uploads store."""

    source: DocumentSource
    text: str | None
    ref: str | None  # the upload made for this request (or given by the caller)
    media_type: str | None
    content_hash: str
    size: int

    @property
    def title(self) -> str:
        return self.source.title or ""

    def register_args(self) -> tuple[str, str | None, str | None, str, int]:
        return (self.title or (self.source.filename or ""), self.source.filename, self.media_type,
                self.content_hash, self.size)  # fmt: skip


async def prepare(src: DocumentSource) -> Prepared:
    """Check and hash one document; content that should not travel inline goes to the store."""
    rt = runtime.get()
    if src.filename and "." in src.filename and not src.filename.lower().endswith(SUPPORTED):
        raise ToolFailure("unsupported_media_type", f"{src.filename!r}: supported are .txt .md .html .pdf .docx")
    text, ref, media_type = src.text, src.object_name, src.media_type
    if text is not None:
        if not text.strip():
            raise ToolFailure("bad_arguments", "text is empty")
        data = text.encode("utf-8")
        media_type = media_type or "text/markdown"
        content_hash, size = hashlib.sha256(data).hexdigest(), len(data)
        if size > INLINE_UPLOAD_MAX:  # keep job messages small: large text goes to the store
            ref, text = f"uploads/{uuid.uuid4().hex}", None
            await (await objects.uploads(rt.bus)).put(ref, data)
    elif src.content_b64 is not None:
        try:
            data = base64.b64decode(src.content_b64, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise ToolFailure("bad_arguments", f"content_b64 is not valid base64: {exc}") from exc
        content_hash, size = hashlib.sha256(data).hexdigest(), len(data)
        ref = f"uploads/{uuid.uuid4().hex}"
        await (await objects.uploads(rt.bus)).put(ref, data)
    else:
        try:
            info = await (await objects.uploads(rt.bus)).get_info(src.object_name or "")
        except NotFoundError as exc:
            raise ToolFailure("not_found", f"upload {src.object_name!r} not found") from exc
        content_hash, size = objects.digest_hex(info.digest), int(info.size or 0)
    prepared = Prepared(src, text, ref, media_type, content_hash, size)
    if size == 0 or size > rt.settings.kb_max_document_bytes:
        await discard(prepared)
        if size == 0:
            raise ToolFailure("bad_arguments", "the document is empty")
        raise ToolFailure("too_large", f"document is {size} bytes; the limit is {rt.settings.kb_max_document_bytes}")
    return prepared


async def discard(prepared: Prepared) -> None:
    """The upload is not needed (a duplicate, a refused document or a failed queueing)."""
    if prepared.ref:
        await objects.delete_quietly(await objects.uploads(runtime.get().bus), prepared.ref)


def duplicate_reply(reg: store.Registered) -> dict[str, Any]:
    return {
        "job_id": reg.job_id,
        "document_id": reg.document_id,
        "status": reg.status,
        "duplicate": True,
        "message": f"identical content is already in this knowledge base as {reg.document_id}; nothing to do",
    }


async def enqueue(prepared: Prepared, reg: store.Registered, kb_id: str, user: str) -> dict[str, Any]:
    """Publish the registered document's job (and its `queued` event); undone if that fails."""
    rt = runtime.get()
    job = IngestJob(
        job_id=reg.job_id,
        kb=kb_id,
        document_id=reg.document_id,
        user_id=user,
        title=prepared.title,
        filename=prepared.source.filename,
        media_type=prepared.media_type,
        content_ref=prepared.ref if prepared.text is None else None,
        text=prepared.text,
        content_hash=prepared.content_hash,
    )
    try:
        events = EventPublisher(rt.bus, job.job_id)
        await events.emit(ProgressEvent(task_id=job.job_id, stage="queued", done=0, total=0))
        ack = await rt.bus.js_publish(rt.bus.subjects.ingest_jobs, job, msg_id=job.msg_id)
        await events.flush()
        if ack.duplicate:
            # Same content+KB queued moments ago for a job that since failed and was replaced:
            # this is a new job, so it needs its own dedupe id.
            await rt.bus.js_publish(rt.bus.subjects.ingest_jobs, job, msg_id=f"{job.msg_id}:{job.job_id}")
    except Exception as exc:
        await rt.db.run(store.forget_document, reg.document_id, reg.job_id)
        await discard(prepared)
        raise ToolFailure("unavailable", f"could not queue the ingestion job: {type(exc).__name__}",
                          retryable=True) from exc
    return {"job_id": reg.job_id, "document_id": reg.document_id, "status": "queued", "duplicate": False}


@registry.tool(
    name="kb_ingest",
    title="Add a document to a knowledge base",
    description=(
        "Queue a document (text, or a .txt .md .html .pdf .docx file) for ingestion into a knowledge "
        "base. Returns the job id; identical content already in the KB is a no-op that says so."
    ),
    inject=("user_id",),
    annotations=ADDS_ONCE,
)
async def kb_ingest(args: KbIngestArgs, ctx: ToolContext) -> dict[str, Any]:
    caller = caller_of(args, ctx)
    user = caller.user  # the uploader owns the document and its job, also in another user's KB
    kb = await resolve_kb(caller, args.kb, grouped=True)
    prepared = await prepare(args)
    def register(conn: Connection) -> store.Registered:
        return store.register_document(conn, kb.id, user, *prepared.register_args())

    # Concurrent uploads share the registration's commit (the single-document path's cost).
    try:
        try:
            reg = await runtime.get().db.run_grouped(register)
        except IntegrityError:  # the same content registered concurrently: now it is a duplicate
            reg = await runtime.get().db.run_grouped(register)
    except Exception:  # not registered: the upload made for this call is not needed
        await discard(prepared)
        raise
    if reg.duplicate:
        await discard(prepared)
        return duplicate_reply(reg)
    return await enqueue(prepared, reg, kb.id, user)


MAX_BATCH_DOCUMENTS = 100


class KbIngestManyArgs(UserArgs):
    kb: str = KB_REF
    documents: list[DocumentSource] = Field(min_length=1, max_length=MAX_BATCH_DOCUMENTS)


def register_all(conn: Connection, kb_id: str, user: str, items: list[Prepared]) -> list[store.Registered]:
    """Every document of a batch in one transaction (a repeat within the batch is a duplicate)."""
    return [store.register_document(conn, kb_id, user, *p.register_args()) for p in items]


@registry.tool(
    name="kb_ingest_many",
    title="Add several documents to a knowledge base",
    description=(
        f"Queue up to {MAX_BATCH_DOCUMENTS} documents for ingestion in one call. Answers one item per "
        "document, in order: its job, a duplicate no-op, or why that document was refused."
    ),
    agent=False,
    inject=("user_id",),
    annotations=ADDS_ONCE,
)
async def kb_ingest_many(args: KbIngestManyArgs, ctx: ToolContext) -> dict[str, Any]:
    caller = caller_of(args, ctx)
    user, rt = caller.user, runtime.get()
    kb = await resolve_kb(caller, args.kb)
    items: list[dict[str, Any] | None] = [None] * len(args.documents)
    prepared: list[tuple[int, Prepared]] = []
    outcomes = await asyncio.gather(*(prepare(d) for d in args.documents), return_exceptions=True)
    for i, (src, result) in enumerate(zip(args.documents, outcomes, strict=True)):
        if isinstance(result, Exception) and src.object_name:  # the caller's upload is ours now
            await objects.delete_quietly(await objects.uploads(rt.bus), src.object_name)
        if isinstance(result, ToolFailure):
            items[i] = {"error": {"code": result.code, "message": result.message}}
        elif isinstance(result, Exception):  # e.g. the uploads store failed for this one
            log.warning("kb_ingest_many: document %d could not be prepared: %r", i, result)
            items[i] = {"error": {"code": "unavailable", "message": f"{type(result).__name__}: {result}"[:500]}}
        elif isinstance(result, BaseException):
            raise result
        else:
            prepared.append((i, result))
    batch = [p for _, p in prepared]
    try:
        try:
            registered = await rt.db.run(register_all, kb.id, user, batch)
        except IntegrityError:  # some content registered concurrently: those are duplicates now
            registered = await rt.db.run(register_all, kb.id, user, batch)
    except Exception:  # nothing was registered: the uploads made for this call are not needed
        await asyncio.gather(*(discard(p) for p in batch))
        raise

    async def settle(i: int, p: Prepared, reg: store.Registered) -> None:
        if reg.duplicate:
            await discard(p)
            items[i] = duplicate_reply(reg)
            return
        try:
            items[i] = await enqueue(p, reg, kb.id, user)
        except ToolFailure as exc:
            items[i] = {"error": {"code": exc.code, "message": exc.message}}

    await asyncio.gather(*(settle(i, p, reg) for (i, p), reg in zip(prepared, registered, strict=True)))
    queued = sum(1 for item in items if item and item.get("duplicate") is False)
    duplicates = sum(1 for item in items if item and item.get("duplicate") is True)
    return {"items": items, "queued": queued, "duplicates": duplicates, "failed": len(items) - queued - duplicates}


class JobArgs(UserArgs):
    job_id: str = Field(min_length=1, max_length=100)


def visible_job(conn: Connection, caller: Caller, job_id: str) -> Any:
    """The job if the caller started it, owns its KB, or is an admin."""
    row = jobs.get_job(conn, job_id)
    if row is None or caller.may_act_on(row.user_id):
        return row
    kb = store.get_kb(conn, row.kb_id)
    return row if kb is not None and kb.user_id == caller.user else None


@registry.tool(
    name="kb_job_get",
    title="Ingestion job state",
    description="State of an ingestion job.",
    agent=False,
    inject=("user_id",),
    annotations=READS,
)
async def kb_job_get(args: JobArgs, ctx: ToolContext) -> dict[str, Any]:
    row = await runtime.get().db.read(visible_job, caller_of(args, ctx), args.job_id)
    if row is None:
        raise ToolFailure("not_found", f"ingestion job {args.job_id!r} not found")
    return jobs.job_state(row).model_dump(mode="json")


class DocListArgs(UserArgs, Page):
    kb: str = KB_REF


@registry.tool(
    name="doc_list",
    title="List documents",
    description="Documents of a knowledge base.",
    agent=False,
    inject=("user_id",),
    annotations=READS,
)
async def doc_list(args: DocListArgs, ctx: ToolContext) -> dict[str, Any]:
    kb = await resolve_kb(caller_of(args, ctx), args.kb)
    return await runtime.get().db.read(store.list_documents, kb.id, args.limit, args.cursor)


class DocArgs(UserArgs):
    kb: str = KB_REF
    doc_id: str = Field(min_length=1, max_length=100)


@registry.tool(
    name="doc_get",
    title="A document",
    description="One document's metadata and ingestion state.",
    agent=False,
    inject=("user_id",),
    annotations=READS,
)
async def doc_get(args: DocArgs, ctx: ToolContext) -> dict[str, Any]:
    kb = await resolve_kb(caller_of(args, ctx), args.kb)
    row = await runtime.get().db.read(store.get_document, kb.id, args.doc_id)
    if row is None:
        raise ToolFailure("not_found", f"document {args.doc_id!r} not found in {args.kb!r}")
    return store.doc_public(row)


@registry.tool(
    name="doc_delete",
    title="Delete a document",
    description="Delete a document with its chunks, vectors and facts.",
    agent=False,
    inject=("user_id",),
    annotations=DELETES,
)
async def doc_delete(args: DocArgs, ctx: ToolContext) -> dict[str, Any]:
    kb = await resolve_kb(caller_of(args, ctx), args.kb)
    rt = runtime.get()

    def delete(conn: Any) -> tuple[int, int] | None:
        if store.get_document(conn, kb.id, args.doc_id) is None:
            return None
        removed = store.delete_document(conn, kb.id, args.doc_id)
        return removed, store.bump_revision(conn, kb.id)

    outcome = await rt.db.run(delete)
    if outcome is None:
        raise ToolFailure("not_found", f"document {args.doc_id!r} not found in {args.kb!r}")
    removed, revision = outcome
    await rt.kb_changed(kb.id, revision, f"document {args.doc_id} deleted")
    return {"deleted": args.doc_id, "chunks": removed}


TEXT_LIMIT = 2_000_000  # characters: what one NATS reply carries comfortably


@registry.tool(
    name="doc_text",
    title="A document's text",
    description="One document's text as indexed (its chunks in order), with its title and media type.",
    agent=False,
    inject=("user_id",),
    annotations=READS,
)
async def doc_text(args: DocArgs, ctx: ToolContext) -> dict[str, Any]:
    kb = await resolve_kb(caller_of(args, ctx), args.kb)
    db = runtime.get().db
    row = await db.read(store.get_document, kb.id, args.doc_id)
    if row is None:
        raise ToolFailure("not_found", f"document {args.doc_id!r} not found in {args.kb!r}")
    text, cut = await db.read(store.document_text, row.id, TEXT_LIMIT)
    return {**store.doc_public(row), "kb": kb.name, "text": text, "truncated": cut}
