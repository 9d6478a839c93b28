"""Embedders. The local one needs no model download: hashed word, stem, word-pair and character
trigram features folded into a fixed dimension and L2-normalised — deterministic across
processes and machines. The remote one calls an OpenAI-compatible `/embeddings` endpoint.

A KB records the embedder it was built with (`local-hash-v1:<dim>` or `openai:<model>`), and
queries are embedded with that same embedder."""

from __future__ import annotations

import itertools
import re
import zlib
from functools import lru_cache
from typing import Protocol

import numpy as np

from services.tools_go_equiv.config import KbSettings
from shared.settings import Settings

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


class EmbedderUnavailable(RuntimeError):
    pass


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


class LocalEmbedder:
    def __init__(self, dim: int = 384) -> None:
        self.dim = dim
        self.name = f"{LOCAL_PREFIX}{dim}"
        self._word = lru_cache(maxsize=200_000)(self._word_features)

    def _word_features(self, word: str) -> tuple[np.ndarray, np.ndarray]:
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
        idx = np.fromiter((s[0] for s in slots), dtype=np.int64, count=len(slots))
        weights = (s[1] * w for s, (_, w) in zip(slots, feats, strict=True))
        val = np.fromiter(weights, dtype=np.float64, count=len(slots))
        return idx, val

    def embed_sync(self, texts: list[str]) -> np.ndarray:
        dim = self.dim
        idx_parts: list[np.ndarray] = []
        val_parts: list[np.ndarray] = []
        for row, text in enumerate(texts):
            words = _WORD.findall(text.lower())
            offset = row * dim
            if words:
                feats = [self._word(w) for w in words]
                idx_parts.append(np.concatenate([f[0] for f in feats]) + offset)
                val_parts.append(np.concatenate([f[1] for f in feats]))
            content = [stem(w) for w in words if w not in _STOP]
            if len(content) > 1:
                pairs = [_pair_slot(a, b, dim) for a, b in itertools.pairwise(content)]
                idx_parts.append(np.fromiter((p[0] + offset for p in pairs), dtype=np.int64, count=len(pairs)))
                val_parts.append(np.fromiter((0.5 * p[1] for p in pairs), dtype=np.float64, count=len(pairs)))
        flat = np.zeros(len(texts) * dim, dtype=np.float64)
        if idx_parts:
            flat = np.bincount(np.concatenate(idx_parts), np.concatenate(val_parts), minlength=len(texts) * dim)
        matrix = flat.reshape(len(texts), dim)
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
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (matrix / norms).astype(np.float32, copy=False)


class Embedders:
    """The embedder for new KBs, and the one a given KB was built with."""

    def __init__(self, settings: Settings, kb: KbSettings) -> None:
        self._local = LocalEmbedder(kb.embed_dim)
        base_url = kb.embed_base_url or settings.llm_base_url
        self._remote: RemoteEmbedder | None = None
        if kb.embed_model and base_url:
            self._remote = RemoteEmbedder(kb.embed_model, base_url, kb.embed_api_key or settings.llm_api_key)
        self._locals: dict[str, LocalEmbedder] = {self._local.name: self._local}

    @property
    def default(self) -> Embedder:
        return self._remote or self._local

    def local(self) -> LocalEmbedder:
        return self._local

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
