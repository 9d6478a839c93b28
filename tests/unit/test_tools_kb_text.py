"""The pure parts of the knowledge base: chunking, the local embedder, fact extraction, rank
fusion and report rendering."""

from __future__ import annotations

import io
import itertools
import subprocess
import sys

import docx
import numpy as np
import pypdf
import pytest

from services.tools_go_equiv.kb.chunk import chunk_sections, heading_paths
from services.tools_go_equiv.kb.embed import LocalEmbedder
from services.tools_go_equiv.kb.facts import extract_facts, query_entities
from services.tools_go_equiv.kb.search import reciprocal_rank_fusion
from services.tools_go_equiv.reports.render import render

SECTIONS = [
    {"heading": "Guide", "level": 1, "text": "Intro sentence. " * 40},
    {"heading": "Install", "level": 2, "text": "Short."},
    {"heading": "FAQ", "level": 1, "text": "\n\n".join(f"Question {i} is answered here." for i in range(30))},
]


def test_chunks_respect_headings_size_and_overlap() -> None:
    chunks = chunk_sections(SECTIONS, size=200, overlap=40)
    assert [c.position for c in chunks] == list(range(len(chunks)))
    assert all(len(c.text) <= 200 for c in chunks)
    by_heading = {c.heading for c in chunks}
    assert by_heading == {"Guide", "Guide > Install", "FAQ"}
    # A heading always starts a new chunk: no chunk mixes text of two sections.
    assert [c.text for c in chunks if c.heading == "Guide > Install"] == ["Short."]
    faq = [c.text for c in chunks if c.heading == "FAQ"]
    assert len(faq) > 2
    for prev, nxt in itertools.pairwise(faq):
        assert prev[-20:].split()[-1] in nxt.split("\n\n")[0]  # the tail of a chunk opens the next


def test_chunking_is_deterministic() -> None:
    assert chunk_sections(SECTIONS, 300, 50) == chunk_sections(SECTIONS, 300, 50)


def test_overlap_must_be_smaller_than_size() -> None:
    with pytest.raises(ValueError, match="overlap"):
        chunk_sections(SECTIONS, size=100, overlap=100)


def test_heading_paths_nest_by_level() -> None:
    sections = [{"heading": "A", "level": 1}, {"heading": "B", "level": 2}, {"heading": "C", "level": 3},
                {"heading": "D", "level": 2}, {"heading": "", "level": 0}]  # fmt: skip
    assert heading_paths(sections) == ["A", "A > B", "A > B > C", "A > D", "A > D"]


def test_local_embedder_is_normalised_and_meaningful() -> None:
    emb = LocalEmbedder(256)
    vecs = emb.embed_sync(
        ["JetStream stores messages durably on disk", "messages are stored on disk by JetStream",
         "apple pie recipe with cinnamon", ""]
    )  # fmt: skip
    assert vecs.shape == (4, 256) and vecs.dtype == np.float32
    assert np.allclose(np.linalg.norm(vecs[:3], axis=1), 1.0, atol=1e-5)
    assert not vecs[3].any()
    assert vecs[0] @ vecs[1] > 3 * abs(vecs[0] @ vecs[2])
    typo = emb.embed_sync(["kubernetes deployment", "kubernets deploymnt", "vacation policy"])
    assert typo[0] @ typo[1] > typo[0] @ typo[2]


def test_local_embedder_is_identical_across_processes() -> None:
    """Vectors written by one replica are compared with queries embedded by another."""
    code = (
        "import sys; from services.tools_go_equiv.kb.embed import LocalEmbedder;"
        "sys.stdout.write(LocalEmbedder(64).embed_sync(['Orion uses NATS JetStream']).tobytes().hex())"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True,
        env={"PYTHONHASHSEED": "12345", "PATH": "/usr/bin:/bin", "PYTHONPATH": "."},
    ).stdout  # fmt: skip
    assert out == LocalEmbedder(64).embed_sync(["Orion uses NATS JetStream"]).tobytes().hex()


def test_facts_is_a_verbs_cooccurrence_and_mentions() -> None:
    text = (
        "NATS is a messaging system. The Orion platform uses NATS JetStream for durable queues.\n"
        "Alice Smith founded Northwind Labs with Bob Jones in Berlin.\n\nThe Helios sensors run firmware."
    )
    facts = {(f.subject, f.relation, f.object) for f in extract_facts(text, context="Handbook")}
    assert ("NATS", "is_a", "messaging system") in facts
    assert ("Orion", "platform uses", "NATS JetStream") in facts
    assert ("Alice Smith", "founded", "Northwind Labs") in facts
    assert ("Alice Smith", "related_to", "Berlin") in facts
    assert ("Helios", "mentioned_in", "Handbook") in facts
    assert not any(s in ("The", "However") for s, _, _ in facts)


def test_query_entities_are_normalised_ngrams() -> None:
    names = query_entities("Who founded Acme Corp?")
    assert "acme corp" in names and "acme" in names and "who" not in names


def test_rank_fusion_records_every_source() -> None:
    fused = reciprocal_rank_fusion({"vector": [(1, 0.9), (2, 0.8)], "fulltext": [(2, 5.0), (3, 4.0)], "graph": []}, 60)
    assert [c for c, _, _ in fused] == [2, 1, 3]
    assert fused[0][2] == {"vector": {"rank": 2, "score": 0.8}, "fulltext": {"rank": 1, "score": 5.0}}
    assert set(fused[1][2]) == {"vector"}


REPORT = """# Findings

Revenue grew **12%** in *Q3* — naïve café ✓.

- first point
- second point

| Region | Sales |
|---|---|
| EU | 10 |

```
print("hi")
```
"""


def test_report_renders_to_docx_and_pdf_with_the_content() -> None:
    d = docx.Document(io.BytesIO(render("docx", "Quarterly", REPORT)))
    paragraphs = [p.text for p in d.paragraphs]
    assert paragraphs[0] == "Quarterly" and "Findings" in paragraphs
    assert any("Revenue grew 12% in Q3 — naïve café ✓." == p for p in paragraphs)
    assert [[c.text for c in r.cells] for r in d.tables[0].rows] == [["Region", "Sales"], ["EU", "10"]]
    bold = [r.text for p in d.paragraphs for r in p.runs if r.bold]
    assert "12%" in bold

    reader = pypdf.PdfReader(io.BytesIO(render("pdf", "Quarterly", REPORT)))
    content = "\n".join(page.extract_text() for page in reader.pages)
    for expected in ("Quarterly", "Findings", "Revenue grew 12%", "naïve café", "second point", "EU", 'print("hi")'):
        assert expected in content
    assert reader.metadata.title == "Quarterly"
    assert render("md", "x", REPORT) == REPORT.encode()


def _reference_embedding(texts: list[str], dim: int) -> np.ndarray:
    """The local embedder's definition, feature by feature: stored KBs were embedded with it,
    so the fast batched implementation must produce the very same bits."""
    import zlib

    from services.tools_go_equiv.kb import embed

    def slot(feature: str) -> tuple[int, float]:
        h = zlib.crc32(feature.encode("utf-8", "surrogatepass"))
        return h % dim, (1.0 if (h >> 31) & 1 else -1.0)

    rows = []
    for text in texts:
        idx: list[int] = []
        val: list[float] = []
        words = embed._WORD.findall(text.lower())
        for word in words:
            weight = 0.15 if word in embed._STOP else 1.0
            feats = [("w:" + word, weight), ("s:" + embed.stem(word), 0.8 * weight)]
            if word not in embed._STOP and not word.isdigit():
                padded = f"<{word}>"
                grams = [padded[i : i + 3] for i in range(len(padded) - 2)]
                feats += [("c:" + g, 0.6 / max(1.0, len(grams) ** 0.5)) for g in grams]
            for feature, w in feats:
                s, sign = slot(feature)
                idx.append(s)
                val.append(sign * w)
        content = [embed.stem(w) for w in words if w not in embed._STOP]
        for a, b in itertools.pairwise(content):
            s, sign = slot(f"b:{a} {b}")
            idx.append(s)
            val.append(0.5 * sign)
        rows.append(np.bincount(np.array(idx, dtype=np.int64), np.array(val), minlength=dim) if idx else np.zeros(dim))
    matrix = np.array(rows).reshape(len(texts), dim)
    return embed.normalize((np.sign(matrix) * np.log1p(np.abs(matrix))).astype(np.float32))


EMBED_TEXTS = [
    "JetStream stores messages durably on disk; the Orion team uses it.",
    "",
    "the a an of",
    "Ünïcödé wörds, 42 numbers and GPT4 tokens — plus repeated repeated repeated words",
    "kubernetes deployment rollback " * 30,
    "x",
]


def test_batched_embedding_is_bit_identical_to_the_definition_and_to_one_text_at_a_time() -> None:
    emb = LocalEmbedder(128)
    batch = emb.embed_sync(EMBED_TEXTS)
    assert batch.tobytes() == _reference_embedding(EMBED_TEXTS, 128).tobytes()
    one_by_one = np.vstack([emb.embed_sync([t]) for t in EMBED_TEXTS])
    assert batch.tobytes() == one_by_one.tobytes()
    assert emb.embed_sync([]).shape == (0, 128)


def test_embedding_is_unchanged_when_the_vocabulary_is_reset() -> None:
    """The word cache is bounded: it starts over when full, with the same vectors as before."""
    small = LocalEmbedder(64)
    small._vocab.max_words = 5
    texts = [f"{t} extra words beyond the tiny cache limit" for t in EMBED_TEXTS]
    one_by_one = np.vstack([small.embed_sync([t]) for t in texts])  # each text adds words: resets
    distinct = {w for t in texts for w in t.lower().split()}
    assert len(small._vocab.ids) < len(distinct)
    assert one_by_one.tobytes() == small.embed_sync(texts).tobytes() == _reference_embedding(texts, 64).tobytes()


def test_entity_spans_skip_lowercase_words_and_stop_at_four_words() -> None:
    text = "The Orion Helios Vega Atlas Team uses GPT4 and 3D printers. 4gpt is not an entity; X1 Carbon runs on ARM."
    facts = {(f.subject, f.relation, f.object) for f in extract_facts(text)}
    assert ("Team", "uses", "GPT4") in facts  # a span ends after four words; a new one starts
    assert ("Orion Helios Vega Atlas", "related_to", "Team") in facts
    assert ("GPT4", "related_to", "3D") in facts  # a digit-led word with a capital is a name
    assert ("X1 Carbon", "runs on", "ARM") in facts
    assert not any("4gpt" in (s, o) or "The" in s for s, _, o in facts)
