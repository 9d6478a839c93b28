"""Knowledge-base routes. Thin: every read and write is a tool call to tools_go_equiv over NATS
(the gateway never touches those tables); uploads are streamed into the uploads object store
and the tool queues the ingestion job. The tools apply the ownership rule: the principal's
admin flag travels in the call's metadata, so an admin reaches every user's KBs."""

from __future__ import annotations

import contextlib
import mimetypes
import uuid
from pathlib import PurePosixPath
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import JSONResponse
from nats.js.object_store import ObjectStore
from pydantic import BaseModel, Field, ValidationError
from sse_starlette import EventSourceResponse
from starlette.datastructures import UploadFile

from services.gateway.deps import BusDep, CurrentUser
from services.gateway.go_tools import call_go_tool
from services.gateway.pagination import Cursor, Limit, decode_cursor, encode_cursor
from services.gateway.problems import ApiProblem, validation_problem
from services.gateway.runs.stream import resume_point, task_stream
from shared.bus import Bus
from shared.contract.ingest import INLINE_UPLOAD_MAX, TERMINAL_JOB

router = APIRouter(prefix="/api/v1/kb", tags=["knowledge base"])

async def uploads(bus: Bus) -> ObjectStore:
    return await bus.object_store(bus.names.uploads_bucket)


async def _drop_uploads(bus: Bus, sources: list[dict[str, Any]]) -> None:
    store = await uploads(bus)
    for name in (src["object_name"] for src in sources if src.get("object_name")):
        with contextlib.suppress(Exception):
            await store.delete(name)


def _media_type(request: Request) -> str:
    return (request.headers.get("content-type") or "").split(";", 1)[0].strip().lower()


# What `mimetypes` may not know on every system (Python 3.11's table has no Markdown).
MEDIA_TYPES_BY_SUFFIX = {".md": "text/markdown", ".markdown": "text/markdown"}
UNTYPED = {"", "application/octet-stream"}


def upload_media_type(upload: UploadFile) -> str | None:
    """The part's declared media type, or, when the client declared none or only
    `application/octet-stream` (what `curl -F file=@notes.md` sends), the one its file name implies."""
    declared = (upload.content_type or "").split(";", 1)[0].strip().lower()
    if declared not in UNTYPED:
        return upload.content_type
    name = (upload.filename or "").lower()
    guessed = MEDIA_TYPES_BY_SUFFIX.get(PurePosixPath(name).suffix) or mimetypes.guess_type(name, strict=False)[0]
    return guessed or upload.content_type or None


BINARY = {"type": "string", "format": "binary"}


def _upload_body(form_fields: dict[str, Any], json_model: type[BaseModel]) -> dict[str, Any]:
    """The OpenAPI request body of an upload route: multipart files or JSON."""
    form = {"type": "object", "properties": form_fields, "required": ["file"]}
    return {
        "requestBody": {
            "content": {
                "multipart/form-data": {"schema": form},
                "application/json": {"schema": json_model.model_json_schema()},
            }
        }
    }


class KbIn(BaseModel):
    name: str = Field(min_length=1, max_length=100)
    description: str = Field(default="", max_length=2000)


class DocumentText(BaseModel):
    title: str = Field(min_length=1, max_length=500)
    text: str = Field(min_length=1)


class SearchIn(BaseModel):
    query: str = Field(min_length=1, max_length=4000)
    top_k: int = Field(default=5, ge=1, le=50)
    mode: Literal["hybrid", "vector", "fulltext", "graph"] = "hybrid"


@router.post("", status_code=201)
async def create_kb(body: KbIn, request: Request, user: CurrentUser, bus: BusDep) -> dict[str, Any]:
    out = await call_go_tool(bus, user, "kb_create", body.model_dump())
    request.state.audit_target = f"kb={out['id']}"
    return out


@router.get("")
async def list_kbs(user: CurrentUser, bus: BusDep) -> dict[str, Any]:
    out = await call_go_tool(bus, user, "kb_list", {})
    return {"items": out["items"], "next_cursor": None}


@router.delete("/{kb}")
async def delete_kb(kb: str, request: Request, user: CurrentUser, bus: BusDep) -> dict[str, Any]:
    request.state.audit_target = f"kb={kb}"
    return await call_go_tool(bus, user, "kb_delete", {"kb": kb}, timeout_s=120)


@router.get("/ingest/{job_id}")
async def job_state(job_id: str, user: CurrentUser, bus: BusDep) -> dict[str, Any]:
    return await call_go_tool(bus, user, "kb_job_get", {"job_id": job_id})


@router.get(
    "/ingest/{job_id}/stream",
    response_class=EventSourceResponse,
    responses={200: {"content": {"text/event-stream": {}}, "description": "progress events"}},
)
async def job_stream(
    job_id: str,
    request: Request,
    user: CurrentUser,
    bus: BusDep,
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID", max_length=32)] = None,
    after: Annotated[str | None, Query(max_length=32)] = None,
) -> EventSourceResponse:
    start = resume_point(last_event_id, after)
    state = await call_go_tool(bus, user, "kb_job_get", {"job_id": job_id})
    return task_stream(request.app.state, bus, job_id, start, None, state["status"] in TERMINAL_JOB)


async def _form_upload(request: Request, bus: Bus) -> dict[str, Any]:
    form = await request.form(max_files=1, max_fields=10)
    try:
        upload = form.get("file")
        if not isinstance(upload, UploadFile):
            raise ApiProblem(422, "Invalid request", "Send the document as the multipart field `file`.")
        if not upload.filename:
            raise ApiProblem(422, "Invalid request", "The uploaded file has no name.")
        title = form.get("title")
        # Streamed into the object store chunk by chunk (the form spooled it to disk when large).
        name = f"uploads/{uuid.uuid4().hex}"
        # nats-py's annotation says BufferedIOBase, but it reads any file object with `readinto`.
        await (await uploads(bus)).put(name, upload.file)  # type: ignore[arg-type]
        return {
            "object_name": name,
            "filename": upload.filename,
            "media_type": upload_media_type(upload),
            "title": title if isinstance(title, str) and title.strip() else None,
        }
    finally:
        await form.close()


async def _json_upload(request: Request, bus: Bus) -> dict[str, Any]:
    body = _parse(DocumentText, await request.body(), "Send {title, text} or a multipart file.")
    return await _text_source(bus, body)


def _parse(model: type[BaseModel], raw: bytes, hint: str) -> Any:
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        raise validation_problem(exc.errors(include_input=False), hint) from exc


async def _text_source(bus: Bus, body: DocumentText) -> dict[str, Any]:
    """A text document for `kb_ingest`: inline when small, else through the uploads store."""
    data = body.text.encode("utf-8")
    if len(data) <= INLINE_UPLOAD_MAX:
        return {"title": body.title, "text": body.text}
    name = f"uploads/{uuid.uuid4().hex}"
    await (await uploads(bus)).put(name, data)
    return {"title": body.title, "object_name": name, "filename": "document.md", "media_type": "text/markdown"}


@router.post(
    "/{kb}/documents",
    status_code=202,
    responses={200: {"description": "identical content already ingested (no-op)"}, 415: {}, 413: {}},
    openapi_extra=_upload_body({"file": BINARY, "title": {"type": "string"}}, DocumentText),
)
async def add_document(kb: str, request: Request, user: CurrentUser, bus: BusDep) -> JSONResponse:
    media = _media_type(request)
    if media == "multipart/form-data":
        args = await _form_upload(request, bus)
    elif media == "application/json":
        args = await _json_upload(request, bus)
    else:
        raise ApiProblem(
            415, "Unsupported Media Type", "Send multipart/form-data (field `file`) or JSON {title, text}."
        )
    try:
        out = await call_go_tool(bus, user, "kb_ingest", {"kb": kb, **args}, timeout_s=60)
    except ApiProblem:  # the tool did not take the upload over
        await _drop_uploads(bus, [args])
        raise
    request.state.audit_target = f"document={out['document_id']}"
    body = {"job_id": out["job_id"], "document_id": out["document_id"], "status": out["status"]}
    if out.get("duplicate"):
        return JSONResponse({**body, "duplicate": True, "detail": out.get("message")}, status_code=200)
    links = {"self": f"/api/v1/kb/ingest/{out['job_id']}", "stream": f"/api/v1/kb/ingest/{out['job_id']}/stream"}
    return JSONResponse({**body, "duplicate": False, "links": links}, status_code=202)


MAX_BATCH_DOCUMENTS = 100


class DocumentBatch(BaseModel):
    documents: list[DocumentText] = Field(min_length=1, max_length=MAX_BATCH_DOCUMENTS)


async def _form_batch(request: Request, bus: Bus) -> list[dict[str, Any]]:
    form = await request.form(max_files=MAX_BATCH_DOCUMENTS, max_fields=10)
    try:
        files = [f for f in form.getlist("file") if isinstance(f, UploadFile)]
        if not files:
            raise ApiProblem(422, "Invalid request", "Send the documents as multipart fields named `file`.")
        if any(not f.filename for f in files):
            raise ApiProblem(422, "Invalid request", "Every uploaded file needs a name.")
        store, sources = await uploads(bus), []
        for upload in files:  # streamed into the object store one by one
            name = f"uploads/{uuid.uuid4().hex}"
            await store.put(name, upload.file)  # type: ignore[arg-type]  # as above: any file with `readinto`
            sources.append({"object_name": name, "filename": upload.filename, "media_type": upload_media_type(upload)})
        return sources
    finally:
        await form.close()


@router.post(
    "/{kb}/documents/batch",
    status_code=202,
    responses={200: {"description": "nothing was queued (every document a duplicate or refused)"}, 415: {}},
    openapi_extra=_upload_body({"file": {"type": "array", "items": BINARY}}, DocumentBatch),
)
async def add_documents(kb: str, request: Request, user: CurrentUser, bus: BusDep) -> JSONResponse:
    """Up to 100 documents in one request and one tool call: one item per document, in order."""
    media = _media_type(request)
    if media == "multipart/form-data":
        sources = await _form_batch(request, bus)
    elif media == "application/json":
        body = _parse(DocumentBatch, await request.body(), "Send {documents: [{title, text}, …]} or multipart files.")
        sources = [await _text_source(bus, d) for d in body.documents]
    else:
        raise ApiProblem(
            415, "Unsupported Media Type", "Send multipart/form-data (fields `file`) or JSON {documents: [...]}."
        )
    try:
        out = await call_go_tool(bus, user, "kb_ingest_many", {"kb": kb, "documents": sources}, timeout_s=120)
    except ApiProblem:  # the tool did not take the uploads over
        await _drop_uploads(bus, sources)
        raise
    items = [
        {**item, "links": {"self": f"/api/v1/kb/ingest/{item['job_id']}",
                           "stream": f"/api/v1/kb/ingest/{item['job_id']}/stream"}}
        if item.get("duplicate") is False else item
        for item in out["items"]
    ]  # fmt: skip
    request.state.audit_target = f"kb={kb} documents={out['queued']}"
    body = {"items": items, "queued": out["queued"], "duplicates": out["duplicates"], "failed": out["failed"]}
    return JSONResponse(body, status_code=202 if out["queued"] else 200)


@router.get("/{kb}/documents")
async def list_documents(
    kb: str, user: CurrentUser, bus: BusDep, limit: Limit = 50, cursor: Cursor = None
) -> dict[str, Any]:
    raw = decode_cursor(cursor) if cursor else None
    out = await call_go_tool(bus, user, "doc_list", {"kb": kb, "limit": limit, "cursor": raw})
    nxt = out.get("next_cursor")
    return {"items": out["items"], "next_cursor": encode_cursor(nxt) if nxt else None}


@router.get("/{kb}/documents/{doc_id}")
async def get_document(kb: str, doc_id: str, user: CurrentUser, bus: BusDep) -> dict[str, Any]:
    return await call_go_tool(bus, user, "doc_get", {"kb": kb, "doc_id": doc_id})


@router.delete("/{kb}/documents/{doc_id}")
async def delete_document(kb: str, doc_id: str, request: Request, user: CurrentUser, bus: BusDep) -> dict[str, Any]:
    request.state.audit_target = f"document={doc_id}"
    return await call_go_tool(bus, user, "doc_delete", {"kb": kb, "doc_id": doc_id}, timeout_s=120)


@router.post("/{kb}/search")
async def search(kb: str, body: SearchIn, user: CurrentUser, bus: BusDep, request: Request) -> dict[str, Any]:
    request.state.read_only = True  # a POST only for its body: the audit row need not hold the answer
    out = await call_go_tool(bus, user, "kb_search", {"kb": kb, **body.model_dump()})
    return {"kb": out["kb"], "mode": out["mode"], "chunks": out["chunks"]}
