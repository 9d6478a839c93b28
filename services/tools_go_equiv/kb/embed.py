"""Embedders. The local one needs no model download: hashed word, stem, word-pair and character
trigram features folded into a fixed dimension and L2-normalised — deterministic across
processes and machines. The remote one calls an OpenAI-compatible `/embeddings` endpoint.

A KB records the embedder it was built with (`local-hash-v1:<dim>` or `openai:<model>`), and
queries are embedded with that same embedder.

numpy (~15 MB resident) is imported by the functions that compute, so a tools-go that has not
touched a knowledge base yet never loads it; after the first use the import is a dict lookup."""

from __future__ import annotations

import itertools
import re
import threading
import zlib
from functools import lru_cache
from typing import TYPE_CHECKING, NamedTuple, Protocol

from shared.errors import AgentixError
from shared.settings import ToolsGoSettings

if TYPE_CHECKING:
    import numpy as np

LOCAL_PREFIX = "local-hash-v1:"
REMOTE_PREFIX = "openai:"
_WORD = re.compile(r"\w+", re.UNICODE)
_STOP = frozenset(
    "a an and are as at be but by for from has have in into is it its of on or that the their then there "
    "these this to was were what when where which who why will with does do did how can".split()
)
_SUFFIXES = (
    "ingly",
    "edly",
    "ations",
    "ation",
    "ments",
    "ment",
    "ness",
    "ings",
    "ing",
    "ies",
    "ied",
    "ed",
    "es",
    "ly",
    "s",
)


class EmbedderUnavailable(AgentixError, RuntimeError):
    """The knowledge base's embedder cannot embed now (endpoint down, wrong answer, not configured)."""

    code = "unavailable"
    http_status = 503
    # An endpoint comes back; a model not configured on this replica may be on another, or on
    # this one once restarted with it.
    retryable = True


class Embedder(Protocol):
    name: str

    async def embed(self, texts: list[str]) -> np.ndarray:
        """Row-wise L2-normalised float32 matrix, one row per text."""
        ...


@lru_cache(maxsize=500_000)
def stem(word: str) -> str:
    for suffix in _SUFFIXES:
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def _slot(feature: str, dim: int) -> tuple[int, float]:
    h = zlib.crc32(feature.encode("utf-8", "surrogatepass"))
    return h % dim, (1.0 if (h >> 31) & 1 else -1.0)


@lru_cache(maxsize=500_000)
def _pair_slot(a: str, b: str, dim: int) -> tuple[int, float]:
    return _slot(f"b:{a} {b}", dim)


MAX_PAIRS = 1_000_000  # cached stem-pair slots


class _Vocabulary:
    """Every word seen, with its features stored once in flat arrays (CSR): a batch of texts is
    embedded with a dictionary lookup per word and a few numpy gathers, instead of Python work
    per feature. Entries are only ever appended (arrays grow by copy) and a reset makes new
    arrays, so a reader holding the arrays of its lookup is never disturbed by another thread."""

    def __init__(self, dim: int, max_words: int = 200_000) -> None:
        self.dim = dim
        self.max_words = max_words
        self._lock = threading.Lock()
        self._reset()

    def _reset(self) -> None:
        import numpy as np

        self.ids: dict[str, int] = {}
        self.stems: dict[str, int] = {}
        self.stem_names: list[str] = []
        self.pairs: dict[int, int] = {}
        self.feat_idx = np.empty(4096, dtype=np.int64)
        self.feat_val = np.empty(4096, dtype=np.float64)
        self.word_start = np.empty(1024, dtype=np.int64)
        self.word_len = np.empty(1024, dtype=np.int64)
        self.word_stem = np.empty(1024, dtype=np.int64)  # the stem's id, -1 for a stop word
        self.features = 0

    def lookup(self, words: list[str]) -> _Lookup:
        import numpy as np

        with self._lock:  # everything from one generation (a reset replaces it all)
            get = self.ids.get
            found = [get(w) for w in words]
            if None in found:
                if len(self.ids) > self.max_words:
                    self._reset()
                for w in words:
                    if w not in self.ids:
                        self._add(w)
                found = [self.ids[w] for w in words]
            return _Lookup(
                np.array(found, dtype=np.int64), self.word_start, self.word_len, self.word_stem, self.feat_idx,
                self.feat_val, self.stem_names, self.pairs,
            )  # fmt: skip

    def _add(self, word: str) -> None:
        weight = 0.15 if word in _STOP else 1.0
        feats: list[tuple[str, float]] = [("w:" + word, weight)]
        root = stem(word)
        feats.append(("s:" + root, 0.8 * weight))
        if word not in _STOP and not word.isdigit():
            padded = f"<{word}>"
            grams = [padded[i : i + 3] for i in range(len(padded) - 2)]
            each = 0.6 / max(1.0, len(grams) ** 0.5)
            feats.extend(("c:" + g, each) for g in grams)
        slots = [_slot(f, self.dim) for f, _ in feats]
        n, at, wid = len(slots), self.features, len(self.ids)
        if at + n > len(self.feat_idx):
            self.feat_idx = _grown(self.feat_idx, at + n)
            self.feat_val = _grown(self.feat_val, at + n)
        if wid >= len(self.word_start):
            self.word_start, self.word_len, self.word_stem = (
                _grown(a, wid + 1) for a in (self.word_start, self.word_len, self.word_stem)
            )
        self.feat_idx[at : at + n] = [s[0] for s in slots]
        self.feat_val[at : at + n] = [s[1] * w for s, (_, w) in zip(slots, feats, strict=True)]
        stem_id = -1
        if word not in _STOP:
            stem_id = self.stems.setdefault(root, len(self.stems))
            if stem_id == len(self.stem_names):
                self.stem_names.append(root)
        self.word_start[wid], self.word_len[wid], self.word_stem[wid] = at, n, stem_id
        self.features = at + n
        self.ids[word] = wid


class _Lookup(NamedTuple):
    """Word ids and the arrays they index: start, length and stem id per word; slot and weight
    per feature. `stem_names` and `pairs` (stem pair → slot·2 + (sign > 0)) of the same generation."""

    ids: np.ndarray
    start: np.ndarray
    length: np.ndarray
    stem: np.ndarray
    feat_idx: np.ndarray
    feat_val: np.ndarray
    stem_names: list[str]
    pairs: dict[int, int]

    def pair_slots(self, a: np.ndarray, b: np.ndarray, dim: int) -> tuple[np.ndarray, np.ndarray]:
        """Slot and sign of each (stem a, stem b) pair feature; Python work per distinct pair only."""
        import numpy as np

        pairs, names = self.pairs, self.stem_names
        if len(pairs) > MAX_PAIRS:
            pairs.clear()
        distinct, where = np.unique((a << 32) | b, return_inverse=True)
        packed = np.empty(len(distinct), dtype=np.int64)
        for i, key in enumerate(distinct.tolist()):
            value = pairs.get(key)
            if value is None:
                slot, sign = _slot(f"b:{names[key >> 32]} {names[key & 0xFFFFFFFF]}", dim)
                value = pairs[key] = slot * 2 + (sign > 0)
            packed[i] = value
        chosen = packed[where]
        return chosen >> 1, np.where(chosen & 1, 1.0, -1.0)


def _grown(a: np.ndarray, needed: int) -> np.ndarray:
    import numpy as np

    bigger = np.empty(max(needed, 2 * len(a)), dtype=a.dtype)
    bigger[: len(a)] = a
    return bigger


class LocalEmbedder:
    def __init__(self, dim: int = 384) -> None:
        self.dim = dim
        self.name = f"{LOCAL_PREFIX}{dim}"
        self._vocab = _Vocabulary(dim)

    def embed_sync(self, texts: list[str]) -> np.ndarray:
        """Per text: hashed features of every word (the word, its stem, its character trigrams)
        and of every pair of consecutive content-word stems, summed into `dim` slots, then
        sublinear and L2-normalised. All word features of the batch come first and all pair
        features after, which adds up each slot in the same order as text by text would."""
        import numpy as np

        dim, rows = self.dim, len(texts)
        words = [_WORD.findall(t.lower()) for t in texts]
        counts = np.fromiter((len(w) for w in words), dtype=np.int64, count=rows)
        vocab = self._vocab.lookup(list(itertools.chain(*words)))
        row = np.repeat(np.arange(rows, dtype=np.int64), counts)  # the text of each word
        lens = vocab.length[vocab.ids]
        ends = np.cumsum(lens)
        at = np.repeat(vocab.start[vocab.ids] - (ends - lens), lens) + np.arange(int(ends[-1]) if len(ends) else 0)
        idx = [vocab.feat_idx[at] + np.repeat(row * dim, lens)]
        val = [vocab.feat_val[at]]
        stems = vocab.stem[vocab.ids]
        content, content_row = stems[stems >= 0], row[stems >= 0]
        same = content_row[:-1] == content_row[1:]  # consecutive content words of one text
        if same.any():
            slots, signs = vocab.pair_slots(content[:-1][same], content[1:][same], dim)
            idx.append(slots + content_row[:-1][same] * dim)
            val.append(0.5 * signs)
        flat = np.bincount(np.concatenate(idx), np.concatenate(val), minlength=rows * dim)
        matrix = flat.reshape(rows, dim)
        # Sublinear term frequency keeps long chunks from being dominated by repeated words.
        matrix = np.sign(matrix) * np.log1p(np.abs(matrix))
        return normalize(matrix.astype(np.float32))

    async def embed(self, texts: list[str]) -> np.ndarray:
        return self.embed_sync(texts)


class RemoteEmbedder:
    def __init__(self, model: str, base_url: str, api_key: str | None) -> None:
        from openai import AsyncOpenAI  # imported only when a remote model is configured (slow import)

        self.name = f"{REMOTE_PREFIX}{model}"
        self.model = model
        self._client = AsyncOpenAI(base_url=base_url, api_key=api_key or "unused", max_retries=2, timeout=60)

    async def embed(self, texts: list[str]) -> np.ndarray:
        import numpy as np
        from openai import APIError

        try:
            reply = await self._client.embeddings.create(model=self.model, input=texts)
        except APIError as exc:
            raise EmbedderUnavailable(f"embeddings endpoint failed: {type(exc).__name__}: {exc}") from exc
        rows = sorted(reply.data, key=lambda d: d.index)
        if len(rows) != len(texts):
            raise EmbedderUnavailable(f"embeddings endpoint returned {len(rows)} vectors for {len(texts)} texts")
        return normalize(np.asarray([r.embedding for r in rows], dtype=np.float32))


def normalize(matrix: np.ndarray) -> np.ndarray:
    import numpy as np

    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (matrix / norms).astype(np.float32, copy=False)


class Embedders:
    """The embedder for new KBs, and the one a given KB was built with."""

    def __init__(self, settings: ToolsGoSettings) -> None:
        self._local_name = f"{LOCAL_PREFIX}{settings.kb_embed_dim}"
        base_url = settings.kb_embed_base_url or settings.llm_base_url
        self._remote: RemoteEmbedder | None = None
        if settings.kb_embed_model and base_url:
            self._remote = RemoteEmbedder(settings.kb_embed_model, base_url,
                                          settings.kb_embed_api_key or settings.llm_api_key)
        self._locals: dict[str, LocalEmbedder] = {}  # made on first use (their vocabularies are numpy arrays)

    @property
    def default(self) -> Embedder:
        return self._remote or self.local()

    def local(self) -> LocalEmbedder:
        embedder = self.for_name(self._local_name)
        assert isinstance(embedder, LocalEmbedder)
        return embedder

    def for_name(self, name: str) -> Embedder:
        if name.startswith(LOCAL_PREFIX):
            if name not in self._locals:
                self._locals[name] = LocalEmbedder(int(name[len(LOCAL_PREFIX) :]))
            return self._locals[name]
        if self._remote is not None and self._remote.name == name:
            return self._remote
        raise EmbedderUnavailable(
            f"this knowledge base was embedded with {name!r}, which is not configured here "
            f"(set AGENTIX_KB_EMBED_MODEL and an endpoint)"
        )
