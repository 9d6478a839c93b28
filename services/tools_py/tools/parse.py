"""`doc_parse`: a .txt .md .html .pdf .docx document → {title, text, sections:[{heading, text}]};
`doc_parse_many`: the same for a list of documents in one call (the ingestion worker's batches),
each answered with its result or its own error."""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import tempfile
import uuid
from typing import Any

from nats.js.errors import NotFoundError
from pydantic import BaseModel, Field, model_validator

from services.tools_py.parsing import ParsedDocument, ParseError, parse_document
from services.tools_py.registry import READS, registry
from shared.bus.tools import ToolContext, ToolFailure

MAX_BYTES = 50 * 1024 * 1024
# Replies above this size go to the object store (NATS max_payload is 1 MiB by default).
INLINE_RESULT_MAX = 512 * 1024
MAX_DOCUMENTS = 256


class DocParseArgs(BaseModel):
    filename: str | None = Field(
        default=None, max_length=512, description="original file name (its extension picks the parser)"
    )
    media_type: str | None = Field(default=None, max_length=200)
    content_b64: str | None = Field(default=None, description="the file's bytes, base64")
    text: str | None = Field(default=None, description="the document as text (markdown, html or plain)")
    object_name: str | None = Field(default=None, max_length=512, description="an object in the uploads bucket")

    @model_validator(mode="after")
    def _one_source(self) -> DocParseArgs:
        given = [x for x in (self.content_b64, self.text, self.object_name) if x is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of content_b64, text and object_name")
        return self


class DocParseManyArgs(BaseModel):
    documents: list[DocParseArgs] = Field(min_length=1, max_length=MAX_DOCUMENTS)


@registry.tool(
    name="doc_parse",
    title="Parse a document",
    description="Extract the title, text and heading sections of a .txt, .md, .html, .pdf or .docx document.",
    annotations=READS,
)
async def doc_parse(args: DocParseArgs, ctx: ToolContext) -> dict[str, Any]:
    data = await _bytes_of(args, ctx)
    try:
        parsed = await asyncio.to_thread(_parse, args, data)
    except ParseError as exc:
        raise ToolFailure("bad_document", str(exc)) from exc
    result = parsed.model_dump()
    encoded = json.dumps(result).encode()
    if len(encoded) <= INLINE_RESULT_MAX:
        return result
    # Too big for one NATS message: leave it next to the upload and answer with its name.
    name = f"{args.object_name or 'inline'}.parsed.json"
    store = await ctx.bus.object_store(ctx.bus.names.uploads_bucket)
    await store.put(name, encoded)
    return {"title": parsed.title, "format": parsed.format, "result_ref": name, "size": len(encoded)}


@registry.tool(
    name="doc_parse_many",
    title="Parse several documents",
    description=(
        "doc_parse for a list of documents in one call: `results` holds, in order, {ok, result} or "
        "{ok: false, error: {code, message}} per document."
    ),
    agent=False,
    annotations=READS,
)
async def doc_parse_many(args: DocParseManyArgs, ctx: ToolContext) -> dict[str, Any]:
    failures: dict[int, ToolFailure] = {}
    data: list[bytes | None] = []
    for i, doc in enumerate(args.documents):
        try:
            data.append(await _bytes_of(doc, ctx))
        except ToolFailure as exc:
            failures[i] = exc
            data.append(None)

    def parse_all() -> list[dict[str, Any]]:  # one thread hop for the whole list
        out: list[dict[str, Any]] = []
        for i, (doc, raw) in enumerate(zip(args.documents, data, strict=True)):
            if i in failures:
                out.append({"ok": False, "error": {"code": failures[i].code, "message": failures[i].message}})
                continue
            try:
                out.append({"ok": True, "result": _parse(doc, raw).model_dump()})
            except ParseError as exc:
                out.append({"ok": False, "error": {"code": "bad_document", "message": str(exc)}})
        return out

    reply = {"results": await asyncio.to_thread(parse_all)}
    encoded = json.dumps(reply).encode()
    if len(encoded) <= INLINE_RESULT_MAX:
        return reply
    # Too big for one NATS message: the caller reads (and deletes) it from the uploads store.
    name = f"parsed/{uuid.uuid4().hex}.json"
    store = await ctx.bus.object_store(ctx.bus.names.uploads_bucket)
    await store.put(name, encoded)
    return {"result_ref": name, "size": len(encoded)}


async def _bytes_of(args: DocParseArgs, ctx: ToolContext) -> bytes | None:
    """The document's bytes (None when it came as text), size-checked."""
    data: bytes | None = None
    if args.content_b64 is not None:
        try:
            data = base64.b64decode(args.content_b64, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise ToolFailure("bad_arguments", f"content_b64 is not valid base64: {exc}") from exc
    elif args.object_name is not None:
        data = await _read_object(ctx, args.object_name)
    if data is not None and len(data) > MAX_BYTES:
        raise ToolFailure("too_large", f"document is {len(data)} bytes; the limit is {MAX_BYTES}")
    return data


def _parse(args: DocParseArgs, data: bytes | None) -> ParsedDocument:
    return parse_document(data=data, text=args.text, filename=args.filename, media_type=args.media_type)


async def _read_object(ctx: ToolContext, name: str) -> bytes:
    try:
        store = await ctx.bus.object_store(ctx.bus.names.uploads_bucket)
        with tempfile.TemporaryFile() as f:
            # writeinto keeps a large get linear (BUS.md).
            await store.get(name, writeinto=f)
            f.seek(0)
            return f.read()
    except NotFoundError as exc:
        raise ToolFailure("not_found", f"upload {name!r} not found in the uploads store") from exc
