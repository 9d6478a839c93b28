"""Parsing is tools_py's: `doc_parse` over NATS for one document, `doc_parse_many` for a batch's
small inline documents (one request instead of one per document)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from services.tools_go_equiv import objects
from services.tools_go_equiv.runtime import Runtime
from shared.contract.ingest import IngestJob
from shared.contract.tools import ToolMeta, ToolReply
from shared.errors import AgentixError

# Documents sent together: each at most SMALL_TEXT characters of inline text, at most REQUEST_TEXT
# in all — the request and the reply (about twice the text) stay well under NATS's 1 MiB.
SMALL_TEXT = 32 * 1024
REQUEST_TEXT = 160 * 1024
MAX_DOCUMENTS = 256  # doc_parse_many's own limit


class IngestError(AgentixError):
    """A reason the job could not be done (retried until the attempts run out)."""

    code = "ingest_failed"
    http_status = 422
    # Parsing runs in another service, whose failure (a crash, a restart, a timeout) another
    # attempt may not meet; a document that cannot be parsed costs only its bounded attempts.
    retryable = True


def _args(job: IngestJob) -> dict[str, Any]:
    args: dict[str, Any] = {"filename": job.filename, "media_type": job.media_type}
    if job.text is not None:
        args["text"] = job.text
    else:
        args["object_name"] = job.content_ref
    return args


def _failure(reply: ToolReply) -> IngestError:
    code = reply.error.code if reply.error else "error"
    message = reply.error.message if reply.error else "no result"
    return IngestError(f"parsing failed ({code}): {message}")


async def _stored(rt: Runtime, name: str, delete: bool) -> Any:
    bucket = await objects.uploads(rt.bus)
    data = json.loads(await objects.read_all(bucket, name))
    if delete:
        await objects.delete_quietly(bucket, name)
    return data


async def parse(rt: Runtime, job: IngestJob) -> dict[str, Any]:
    meta = ToolMeta(user_id=job.user_id)
    reply = await rt.tools.call("doc_parse", _args(job), meta, timeout_s=rt.settings.kb_parse_timeout_s)
    if not reply.ok or reply.error is not None:
        raise _failure(reply)
    result = dict(reply.result or {})
    if "result_ref" in result:  # too large for one message: doc_parse left it in the uploads store
        result = await _stored(rt, result["result_ref"], delete=False)  # removed with the upload
    return result


async def parse_all(rt: Runtime, jobs: list[IngestJob]) -> list[dict[str, Any] | Exception]:
    """Each job's parsed document, or why it could not be parsed; in the order of `jobs`."""
    results: list[dict[str, Any] | Exception | None] = [None] * len(jobs)
    groups: list[list[int]] = []
    alone: list[int] = []
    size = 0
    for i, job in enumerate(jobs):
        if job.text is None or len(job.text) > SMALL_TEXT:
            alone.append(i)
            continue
        if not groups or size + len(job.text) > REQUEST_TEXT or len(groups[-1]) >= MAX_DOCUMENTS:
            groups.append([])
            size = 0
        groups[-1].append(i)
        size += len(job.text)

    async def one(i: int) -> None:
        results[i] = await _parse_or_error(rt, jobs[i])

    async def many(group: list[int]) -> None:
        try:
            parsed = await _parse_many(rt, [jobs[i] for i in group])
        except Exception as exc:  # e.g. the overflow object could not be read: the whole group failed
            parsed = [exc] * len(group)
        for i, result in zip(group, parsed, strict=True):
            results[i] = result

    await asyncio.gather(*(many(g) if len(g) > 1 else one(g[0]) for g in groups), *(one(i) for i in alone))
    return [r if r is not None else IngestError("not parsed") for r in results]


async def _parse_many(rt: Runtime, jobs: list[IngestJob]) -> list[dict[str, Any] | Exception]:
    meta = ToolMeta(user_id=jobs[0].user_id)
    args = {"documents": [_args(job) for job in jobs]}
    reply = await rt.tools.call("doc_parse_many", args, meta, timeout_s=rt.settings.kb_parse_timeout_s)
    if reply.error is not None and reply.error.code == "unknown_tool":  # a tools_py without it
        return list(await asyncio.gather(*(_parse_or_error(rt, job) for job in jobs)))
    if not reply.ok:
        return [_failure(reply)] * len(jobs)
    answer = dict(reply.result or {})
    if "result_ref" in answer:  # too large for one message: read it from the uploads store
        answer = await _stored(rt, answer["result_ref"], delete=True)
    results = list(answer.get("results") or [])
    out: list[dict[str, Any] | Exception] = []
    for k in range(len(jobs)):
        one = results[k] if k < len(results) else {}
        if one.get("ok") and isinstance(one.get("result"), dict):
            out.append(one["result"])
        else:
            out.append(_failure(ToolReply.model_validate({"ok": False, "error": one.get("error")})))
    return out


async def _parse_or_error(rt: Runtime, job: IngestJob) -> dict[str, Any] | Exception:
    try:
        return await parse(rt, job)
    except Exception as exc:
        return exc
