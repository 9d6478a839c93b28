"""The gateway's KB, memory and report routes over real HTTP, calling the tool services over
NATS: uploads (JSON, multipart, large), progress over SSE, search, deletes, memory, and report
downloads opened with python-docx / pypdf."""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime

import docx
import httpx
import pypdf
import pytest
from nats.js.errors import NotFoundError

from shared.auth_tokens import mint_token
from shared.settings import Settings
from tests.integration.test_tools_support import Tools, corpus_doc, tools_and_gateway


@dataclass
class Api:
    alice: httpx.AsyncClient
    bob: httpx.AsyncClient
    tools: Tools


@pytest.fixture
async def api(settings: Settings) -> AsyncIterator[Api]:
    async with tools_and_gateway(settings) as (cfg, _bus, tools, base_url):

        def client(user: str) -> httpx.AsyncClient:
            headers = {"Authorization": f"Bearer {mint_token(cfg, user)}"}
            return httpx.AsyncClient(base_url=base_url, headers=headers, timeout=30)

        async with client("alice") as alice, client("bob") as bob:
            yield Api(alice, bob, tools)


async def sse_events(client: httpx.AsyncClient, path: str) -> list[tuple[str, dict]]:
    events: list[tuple[str, dict]] = []
    async with client.stream("GET", path) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        kind = ""
        async for line in response.aiter_lines():
            if line.startswith("event:"):
                kind = line.split(":", 1)[1].strip()
            elif line.startswith("data:"):
                events.append((kind, json.loads(line.split(":", 1)[1])))
    return events


def problem(response: httpx.Response, status: int) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    return response.json()


def a_docx() -> bytes:
    d = docx.Document()
    d.add_heading("Travel guide", level=1)
    d.add_paragraph("Book trains for journeys under four hours; the Berlin office pays.")
    out = io.BytesIO()
    d.save(out)
    return out.getvalue()


async def test_kb_lifecycle_over_http(api: Api) -> None:
    a = api.alice
    made = await a.post("/kb", json={"name": "handbook", "description": "policies"})
    assert made.status_code == 201 and made.json()["name"] == "handbook"
    assert datetime.fromisoformat(made.json()["created_at"]).tzinfo is not None  # also on SQLite
    problem(await a.post("/kb", json={"name": "handbook"}), 409)
    assert [k["name"] for k in (await a.get("/kb")).json()["items"]] == ["handbook"]

    vacation = {"title": "Vacation", "text": corpus_doc("vacation-policy").read_text()}
    queued = await a.post("/kb/handbook/documents", json=vacation)
    assert queued.status_code == 202
    job = queued.json()
    assert job["job_id"].startswith("job_") and job["document_id"].startswith("doc_")
    events = await sse_events(a, f"/kb/ingest/{job['job_id']}/stream")
    kinds = [k for k, _ in events]
    assert kinds[0] == "progress" and kinds[-1] == "done" and "status" in kinds
    assert events[-1][1]["status"] == "done" and events[-1][1]["document_id"] == job["document_id"]
    assert events[-1][1]["chunks"] >= 1
    state = (await a.get(f"/kb/ingest/{job['job_id']}")).json()
    assert state["status"] == "done" and state["chunks"] == events[-1][1]["chunks"]
    assert datetime.fromisoformat(state["created_at"].replace("Z", "+00:00")).tzinfo is not None
    # Replaying the stream of a finished job ends by itself.
    assert [k for k, _ in await sse_events(a, f"/kb/ingest/{job['job_id']}/stream")] == kinds

    # The same bytes twice (a .docx made twice differs: it carries its creation time).
    travel_docx = a_docx()
    upload = await a.post(
        "/kb/handbook/documents", files={"file": ("travel.docx", travel_docx)}, data={"title": "Travel"}
    )
    assert upload.status_code == 202
    travel = upload.json()
    assert (await api.tools.wait_job(travel["job_id"])).status == "done"
    again = await a.post("/kb/handbook/documents", files={"file": ("copy.docx", travel_docx)})
    assert again.status_code == 200 and again.json()["duplicate"] is True
    assert again.json()["document_id"] == travel["document_id"] and "nothing to do" in again.json()["detail"]

    found = await a.post("/kb/handbook/search", json={"query": "trains for short journeys", "top_k": 3})
    assert found.status_code == 200
    top = found.json()["chunks"][0]
    assert top["doc_id"] == travel["document_id"] and top["title"] == "Travel" and top["sources"]
    only_text = await a.post("/kb/handbook/search", json={"query": "vacation days", "mode": "fulltext"})
    assert set(only_text.json()["chunks"][0]["sources"]) == {"fulltext"}

    docs = (await a.get("/kb/handbook/documents", params={"limit": 1})).json()
    assert len(docs["items"]) == 1 and docs["next_cursor"]
    rest = (await a.get("/kb/handbook/documents", params={"cursor": docs["next_cursor"]})).json()
    assert {d["id"] for d in docs["items"] + rest["items"]} == {job["document_id"], travel["document_id"]}
    one = (await a.get(f"/kb/handbook/documents/{travel['document_id']}")).json()
    assert one["filename"] == "travel.docx" and one["status"] == "ready" and one["title"] == "Travel"

    assert (await a.delete(f"/kb/handbook/documents/{travel['document_id']}")).status_code == 200
    problem(await a.get(f"/kb/handbook/documents/{travel['document_id']}"), 404)
    deleted = await a.delete("/kb/handbook")
    assert deleted.status_code == 200 and deleted.json()["documents"] == 1
    problem(await a.post("/kb/handbook/search", json={"query": "x"}), 404)


async def test_kb_bad_input_and_ownership(api: Api) -> None:
    a, b = api.alice, api.bob
    await a.post("/kb", json={"name": "private"})
    problem(await b.post("/kb/private/search", json={"query": "x"}), 404)
    problem(await b.delete("/kb/private"), 404)
    problem(await a.post("/kb/private/documents", files={"file": ("virus.exe", b"MZ")}), 415)
    problem(await a.post("/kb/private/documents", content=b"hello", headers={"content-type": "text/plain"}), 415)
    problem(await a.post("/kb/private/documents", json={"title": "no text"}), 422)
    problem(await a.post("/kb/nope/documents", json={"title": "t", "text": "x"}), 404)
    problem(await a.post("/kb/private/search", json={"query": "x", "mode": "psychic"}), 422)
    problem(await a.get("/kb/ingest/job_unknown"), 404)
    problem(await a.post("/kb", json={"name": "bad/name"}), 422)
    assert (await httpx.AsyncClient(base_url=str(a.base_url)).get("/kb")).status_code == 401


async def test_large_json_upload_goes_through_the_object_store(api: Api) -> None:
    a = api.alice
    await a.post("/kb", json={"name": "big"})
    text = "\n\n".join(f"Paragraph {i} about the Orion order pipeline and queue {i % 13}." for i in range(6000))
    assert len(text) > 300_000
    queued = await a.post("/kb/big/documents", json={"title": "Big", "text": text})
    assert queued.status_code == 202
    done = await api.tools.wait_job(queued.json()["job_id"], timeout_s=90)
    assert done.status == "done" and done.chunks > 100


async def test_batch_upload_one_item_per_document_in_order(api: Api) -> None:
    a = api.alice
    await a.post("/kb", json={"name": "bulk"})
    first = {"title": "Trains", "text": "Book trains for journeys under four hours."}
    assert (await a.post("/kb/bulk/documents", json=first)).status_code == 202  # already in the KB
    docs = [
        {"title": "Hotels", "text": "Hotels up to 150 euros a night need no approval."},
        first,  # identical content already ingested
        {"title": "Taxis", "text": "Taxis after 22:00 are paid by the Berlin office."},
        {"title": "Hotels again", "text": "Hotels up to 150 euros a night need no approval."},  # repeats item 0
    ]
    resp = await a.post("/kb/bulk/documents/batch", json={"documents": docs})
    assert resp.status_code == 202, resp.text
    body = resp.json()
    items = body["items"]
    assert (body["queued"], body["duplicates"], body["failed"]) == (2, 2, 0)
    assert [item["duplicate"] for item in items] == [False, True, False, True]
    assert items[3]["document_id"] == items[0]["document_id"]  # a repeat within the batch is a duplicate
    assert items[0]["links"]["stream"] == f"/api/v1/kb/ingest/{items[0]['job_id']}/stream"
    for item in (items[0], items[2]):
        assert (await api.tools.wait_job(item["job_id"])).status == "done"
    hits = (await a.post("/kb/bulk/search", json={"query": "taxi after 22:00", "mode": "fulltext"})).json()
    assert hits["chunks"] and hits["chunks"][0]["doc_id"] == items[2]["document_id"]

    # Files: a refused one does not stop the others; nothing queued at all is a 200.
    files = [("file", ("visa.md", b"# Visa\n\nApply six weeks ahead.")), ("file", ("virus.exe", b"MZ"))]
    mixed = await a.post("/kb/bulk/documents/batch", files=files)
    assert mixed.status_code == 202, mixed.text
    visa, virus = mixed.json()["items"]
    assert visa["duplicate"] is False and virus["error"]["code"] == "unsupported_media_type"
    assert (await api.tools.wait_job(visa["job_id"])).status == "done"
    bus = api.tools.bus
    uploads = await bus.object_store(bus.names.uploads_bucket)
    with contextlib.suppress(NotFoundError):  # empty: the refused file's upload is gone too
        assert [o.name for o in await uploads.list() if not o.deleted] == []
    again = await a.post("/kb/bulk/documents/batch", json={"documents": [first]})
    assert again.status_code == 200 and again.json()["items"][0]["duplicate"] is True

    problem(await a.post("/kb/bulk/documents/batch", json={"documents": []}), 422)
    problem(await a.post("/kb/bulk/documents/batch", json={"documents": [{"title": "t"}] * 101}), 422)
    problem(await a.post("/kb/bulk/documents/batch", content=b"x", headers={"content-type": "text/plain"}), 415)
    problem(await a.post("/kb/nope/documents/batch", json={"documents": [first]}), 404)
    problem(await api.bob.post("/kb/bulk/documents/batch", json={"documents": [first]}), 404)


async def test_untyped_uploads_get_the_media_type_their_name_implies(api: Api) -> None:
    """`curl -F file=@notes.md` sends application/octet-stream: the document is text/markdown."""
    a = api.alice
    await a.post("/kb", json={"name": "typed"})
    untyped = "application/octet-stream"
    one = await a.post("/kb/typed/documents", files={"file": ("notes.md", b"# Notes\n\nCheck the queue.", untyped)})
    assert one.status_code == 202, one.text
    files = [
        ("file", ("guide.markdown", b"# Guide\n\nRestart the worker.", untyped)),
        ("file", ("page.html", b"<h1>Page</h1><p>Drain first.</p>", untyped)),
        ("file", ("plain.md", b"Declared types are kept.", "text/plain")),
    ]
    many = await a.post("/kb/typed/documents/batch", files=files)
    assert many.status_code == 202, many.text
    queued = [one.json(), *many.json()["items"]]
    media = []
    for item in queued:
        assert (await api.tools.wait_job(item["job_id"])).status == "done"
        media.append((await a.get(f"/kb/typed/documents/{item['document_id']}")).json()["media_type"])
    assert media == ["text/markdown", "text/markdown", "text/html", "text/plain"]


async def test_memory_routes(api: Api) -> None:
    a, b = api.alice, api.bob
    put = await a.put("/memory/favourite%20colour", json={"value": {"colour": "teal"}})
    assert put.status_code == 200 and put.json()["value"] == {"colour": "teal"}
    assert (await a.get("/memory/favourite%20colour")).json()["value"] == {"colour": "teal"}
    await a.put("/memory/lang", json={"value": "pt"})
    listed = (await a.get("/memory", params={"limit": 1})).json()
    assert len(listed["items"]) == 1 and listed["next_cursor"]
    assert (await b.get("/memory")).json()["items"] == []
    problem(await b.get("/memory/lang"), 404)
    assert (await a.delete("/memory/lang")).json() == {"deleted": "lang"}
    problem(await a.get("/memory/lang"), 404)
    problem(await a.delete("/memory/lang"), 404)
    problem(await a.put("/memory/x", json={"nope": 1}), 422)


async def test_report_round_trip_md_docx_pdf(api: Api) -> None:
    a = api.alice
    markdown = "# Findings\n\nThe **Orion** backlog fell by 40% — café ✓.\n\n- queue depth\n- retries\n"
    stored = await api.tools("report_store", "alice", title="Weekly review", content=markdown)
    listed = (await a.get("/reports")).json()["items"]
    assert [r["id"] for r in listed] == [stored["id"]]
    base = f"/reports/{stored['id']}/export"

    md = await a.get(base, params={"format": "md"})
    assert md.status_code == 200 and md.text == markdown
    assert md.headers["content-type"].startswith("text/markdown")
    assert 'filename="Weekly-review.md"' in md.headers["content-disposition"]

    word = await a.get(base, params={"format": "docx"})
    assert word.headers["content-type"] == "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
    assert int(word.headers["content-length"]) == len(word.content)
    paragraphs = [p.text for p in docx.Document(io.BytesIO(word.content)).paragraphs]
    assert paragraphs[:2] == ["Weekly review", "Findings"] and "The Orion backlog fell by 40% — café ✓." in paragraphs

    pdf = await a.get(base, params={"format": "pdf"})
    assert pdf.headers["content-type"] == "application/pdf" and pdf.content.startswith(b"%PDF-")
    text = "\n".join(p.extract_text() for p in pypdf.PdfReader(io.BytesIO(pdf.content)).pages)
    assert "Weekly review" in text and "backlog fell by 40%" in text and "retries" in text

    listed = (await a.get("/reports")).json()["items"]
    assert listed[0]["formats"] == ["docx", "md", "pdf"]
    problem(await api.bob.get(base, params={"format": "pdf"}), 404)
    problem(await a.get(base, params={"format": "exe"}), 422)
    problem(await a.get("/reports/rep_missing/export"), 404)

    # Delete: another user's report is not found; the owner's goes with every rendered file.
    problem(await api.bob.delete(f"/reports/{stored['id']}"), 404)
    gone = await a.delete(f"/reports/{stored['id']}")
    assert gone.status_code == 200
    assert gone.json() == {"deleted": stored["id"], "title": "Weekly review", "user_id": "alice"}
    assert (await a.get("/reports")).json()["items"] == []
    problem(await a.get(base, params={"format": "md"}), 404)
    problem(await a.delete(f"/reports/{stored['id']}"), 404)
    bucket = await api.tools.bus.object_store(api.tools.bus.names.reports_bucket)
    try:
        objects = await bucket.list(ignore_deletes=True)
    except NotFoundError:  # nats-py: an empty bucket
        objects = []
    left = [o.name for o in objects if stored["id"] in (o.name or "")]
    assert left == [], f"rendered files left behind: {left}"


async def test_large_report_streams_in_chunks(api: Api) -> None:
    lines = "\n".join(f"- item {i}: " + "lorem ipsum " * 20 for i in range(3300))
    content = f"# Huge\n\n{lines}\n"
    stored = await api.tools("report_store", "alice", title="Huge", content=content)
    received = bytearray()
    async with api.alice.stream("GET", f"/reports/{stored['id']}/export", params={"format": "md"}) as response:
        assert response.status_code == 200
        async for part in response.aiter_raw():
            received += part
    assert int(response.headers["content-length"]) == len(received) > 800_000
    assert bytes(received) == content.encode()
    too_big = await api.tools.reply("report_store", "alice", title="Too big", content="x" * 950_000)
    assert not too_big.ok and too_big.error.code == "too_large"
