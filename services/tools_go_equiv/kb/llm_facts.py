"""Entity–relation facts from a language model, when one is configured for it
(`AGENTIX_KB_FACTS_MODEL`, with `_BASE_URL`/`_API_KEY` defaulting to the LLM endpoint). Any failure
— the endpoint down, an answer that is not the JSON asked for — falls back to the deterministic
extractor, so ingestion never depends on the model."""

from __future__ import annotations

import json
import logging
from typing import Any

from services.tools_go_equiv.kb.facts import Fact, extract_facts
from shared.settings import ToolsGoSettings

log = logging.getLogger("agentix.tools_go.facts")

PROMPT = """Extract the factual relations between named entities in the text below.
Answer with JSON only: {{"facts": [{{"subject": "...", "relation": "...", "object": "..."}}]}}.
Use short lower-case relations with underscores (e.g. "is_a", "uses", "part_of"). At most {limit} facts.
Document: {context}

Text:
{text}"""


class LlmFactExtractor:
    def __init__(self, model: str, base_url: str, api_key: str | None, max_facts: int = 30) -> None:
        self.model = model
        self.max_facts = max_facts
        from openai import AsyncOpenAI  # loaded only where a fact model is configured

        self._client = AsyncOpenAI(base_url=base_url, api_key=api_key or "unused", max_retries=1, timeout=60)

    @classmethod
    def from_settings(cls, settings: ToolsGoSettings) -> LlmFactExtractor | None:
        base_url = settings.kb_facts_base_url or settings.llm_base_url
        if not settings.kb_facts_model or not base_url:
            return None
        return cls(settings.kb_facts_model, base_url, settings.kb_facts_api_key or settings.llm_api_key)

    async def extract(self, text: str, context: str = "") -> list[Fact]:
        from openai import OpenAIError  # loaded by __init__ already

        try:
            resp = await self._client.chat.completions.create(
                model=self.model,
                messages=[{"role": "user", "content": PROMPT.format(limit=self.max_facts, context=context, text=text)}],
                response_format={"type": "json_object"},
                temperature=0,
            )
            return parse_facts(resp.choices[0].message.content or "", self.max_facts)
        except (OpenAIError, ValueError) as exc:
            log.warning("fact model %s failed (%s); using the deterministic extractor", self.model, exc)
            return extract_facts(text, context)

    async def extract_all(self, texts: list[str], context: str = "") -> list[list[Fact]]:
        return [await self.extract(text, context) for text in texts]


def parse_facts(answer: str, limit: int) -> list[Fact]:
    """The model's JSON → facts; raises ValueError when it is not the shape asked for."""
    data: Any = json.loads(answer)
    items = data.get("facts") if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise ValueError("the answer has no 'facts' list")
    facts: dict[tuple[str, str, str], Fact] = {}
    for item in items[:limit]:
        if not isinstance(item, dict):
            continue
        parts = [str(item.get(k) or "").strip()[:200] for k in ("subject", "relation", "object")]
        if all(parts):
            fact = Fact(parts[0], parts[1].lower().replace(" ", "_"), parts[2])
            if fact.subject_norm and fact.object_norm and fact.subject_norm != fact.object_norm:
                facts.setdefault((fact.subject_norm, fact.relation, fact.object_norm), fact)
    return list(facts.values())
