"""An optional second stage for hybrid search: a reranking model re-scores the fused candidates.

Speaks the `/rerank` API that vLLM, Jina, TEI and Cohere-compatible servers share:
`POST {base}/rerank {model, query, documents, top_n}` → `{results: [{index, relevance_score}]}`.
Configured with `AGENTIX_KB_RERANK_MODEL` (and `_BASE_URL`/`_API_KEY`, defaulting to the LLM endpoint);
its HTTP client library is imported only then."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from shared.errors import AgentixError
from shared.settings import ToolsGoSettings

if TYPE_CHECKING:
    import httpx

log = logging.getLogger("agentix.tools_go.rerank")


class RerankError(AgentixError):
    """The rerank endpoint failed or answered nonsense; search keeps its own order then."""

    code = "rerank_failed"
    http_status = 502


class Reranker:
    def __init__(self, model: str, base_url: str, api_key: str | None, timeout_s: float = 30.0) -> None:
        import httpx

        self.model = model
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client: httpx.AsyncClient = httpx.AsyncClient(
            base_url=base_url.rstrip("/"), headers=headers, timeout=timeout_s
        )

    @classmethod
    def from_settings(cls, settings: ToolsGoSettings) -> Reranker | None:
        base_url = settings.kb_rerank_base_url or settings.llm_base_url
        if not settings.kb_rerank_model or not base_url:
            return None
        return cls(settings.kb_rerank_model, base_url, settings.kb_rerank_api_key or settings.llm_api_key)

    async def scores(self, query: str, documents: list[str]) -> list[float]:
        """One relevance score per document, in the documents' order."""
        if not documents:
            return []
        import httpx  # loaded already by __init__

        try:
            resp = await self._client.post(
                "/rerank", json={"model": self.model, "query": query, "documents": documents, "top_n": len(documents)}
            )
            resp.raise_for_status()
            results = resp.json()["results"]
            scores = [0.0] * len(documents)
            for item in results:
                scores[int(item["index"])] = float(item["relevance_score"])
            return scores
        except (httpx.HTTPError, KeyError, ValueError, TypeError, IndexError) as exc:
            raise RerankError(f"reranker {self.model!r} failed: {type(exc).__name__}: {exc}",
                              retryable=isinstance(exc, httpx.HTTPError)) from exc  # not a malformed answer

    async def aclose(self) -> None:
        await self._client.aclose()
