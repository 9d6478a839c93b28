"""Deterministic entity–relation extraction (no model needed).

Entities are runs of capitalised words (or acronyms / CamelCase / words with digits such as
`NATS`, `JetStream`, `GPT4`), minus sentence-initial function words. Per sentence:
  * `X is a Y` / `X are Y` / `X was the Y` → (X, is_a, Y);
  * two entities joined by a short verb phrase → (A, <phrase>, B), e.g. (Orion, uses, NATS);
  * any other pair of entities in the sentence → (A, related_to, B).
Names are normalised (lower case, single spaces) for lookup; the surface form is kept."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

# Sentence ends, paragraph breaks and list items; a lone newline inside a paragraph is a space.
_SENTENCES = re.compile(r"(?<=[.!?])\s+|\n\s*\n|\n(?=\s*(?:[-*+]|\d+[.)])\s)")
_TOKEN = re.compile(r"[A-Za-z0-9][\w'’-]*|[.,;:()\[\]\"]")
_FUNCTION = frozenset(
    "the a an this that these those it its in on at for from to of by with as and or but if when while "
    "however also then there here we you they he she i our your their his her my after before during "
    "although because since so thus therefore each every all some many most no not yes who what where "
    "why how which whose whom do does did is are was were be been can could would should will may might "
    "must has have had".split()
)
_BE = frozenset({"is", "are", "was", "were"})
_ARTICLES = frozenset({"a", "an", "the"})
_OBJECT_STOP = frozenset({"that", "which", "who", "with", "for", "and", "in", "on", "at", "by", "to", "from", "of"})
MAX_ENTITY_WORDS = 4
MAX_ENTITIES_PER_SENTENCE = 6
MAX_LINK_WORDS = 4
_CAPS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")  # tokens start with an ASCII letter or digit


_WORDS = re.compile(r"\w+")


@lru_cache(maxsize=200_000)
def normalize(name: str) -> str:
    return " ".join(_WORDS.findall(name.lower()))[:300]


@dataclass(frozen=True)
class Fact:
    subject: str
    relation: str
    object: str
    subject_norm: str = field(init=False)
    object_norm: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "subject_norm", normalize(self.subject))
        object.__setattr__(self, "object_norm", normalize(self.object))


@lru_cache(maxsize=200_000)
def _is_entity_word(word: str, first: bool) -> bool:
    if not word[0].isupper() and not (word[0].isdigit() and any(c.isupper() for c in word)):
        return False
    if word.lower() in _FUNCTION and (first or word.lower() in {"the", "a", "an"}):
        return False
    return not (first and word.isalpha() and word[1:].islower() and word.lower() in _FUNCTION)


def _entities(tokens: list[str]) -> list[tuple[int, int, str]]:
    """(start, end, surface) of each entity span. Only tokens starting with a capital or a digit
    can be entity words, so only those are looked at (most tokens are not)."""
    spans: list[tuple[int, int, str]] = []
    end = 0
    n = len(tokens)
    for i in [k for k, t in enumerate(tokens) if t[0] in _CAPS]:
        if i < end or not _is_entity_word(tokens[i], i == 0):
            continue
        j = i + 1
        while j < n and j - i < MAX_ENTITY_WORDS and tokens[j][0] in _CAPS and _is_entity_word(tokens[j], False):
            j += 1
        spans.append((i, j, " ".join(tokens[i:j])))
        end = j
    return spans


def _is_a(tokens: list[str], spans: list[tuple[int, int, str]]) -> Fact | None:
    if not spans or spans[0][0] != 0:
        return None
    _, end, subject = spans[0]
    if end >= len(tokens) or tokens[end].lower() not in _BE:
        return None
    k = end + 1
    if k < len(tokens) and tokens[k].lower() in _ARTICLES:
        k += 1
    words: list[str] = []
    while k < len(tokens) and len(words) < 5:
        tok = tokens[k]
        if not tok[0].isalnum() or tok.lower() in _OBJECT_STOP:
            break
        words.append(tok)
        k += 1
    if not words or words[0].lower() in {"not", "also", "very", "used", "being"}:
        return None
    return Fact(subject, "is_a", " ".join(words))


def extract_facts(text: str, context: str = "") -> list[Fact]:
    """Facts of one chunk. With `context` (the document title), an entity that takes part in no
    other fact is still recorded as (entity, mentioned_in, context): the graph then indexes every
    named entity, not only those that share a sentence with another."""
    found: dict[tuple[str, str, str], Fact] = {}
    mentioned: dict[str, str] = {}

    def add(fact: Fact) -> None:
        key = (fact.subject_norm, fact.relation, fact.object_norm)
        if fact.subject_norm and fact.object_norm and fact.subject_norm != fact.object_norm:
            found.setdefault(key, fact)

    for sentence in _SENTENCES.split(text):
        tokens = _TOKEN.findall(sentence)
        if len(tokens) < 2:
            continue
        spans = _entities(tokens)
        for _, _, surface in spans:
            mentioned.setdefault(normalize(surface), surface)
        fact = _is_a(tokens, spans)
        if fact:
            add(fact)
        spans = spans[:MAX_ENTITIES_PER_SENTENCE]
        linked: set[tuple[int, int]] = set()
        for a in range(len(spans) - 1):
            gap = tokens[spans[a][1] : spans[a + 1][0]]
            if 0 < len(gap) <= MAX_LINK_WORDS and all(t[0].isalpha() for t in gap):
                phrase = " ".join(t.lower() for t in gap)
                if phrase not in _FUNCTION and phrase not in {"and", "or"}:
                    add(Fact(spans[a][2], phrase, spans[a + 1][2]))
                    linked.add((a, a + 1))
        for a in range(len(spans)):
            for b in range(a + 1, len(spans)):
                if (a, b) not in linked:
                    add(Fact(spans[a][2], "related_to", spans[b][2]))
    if context:
        involved = {f.subject_norm for f in found.values()} | {f.object_norm for f in found.values()}
        for norm, surface in mentioned.items():
            if norm not in involved:
                add(Fact(surface, "mentioned_in", context))
    return list(found.values())


def query_entities(query: str, max_words: int = 3) -> list[str]:
    """Every 1–3 word sequence of the query, normalised: candidate entity names to look up."""
    words = [w for w in re.findall(r"\w+", query.lower()) if w]
    out: list[str] = []
    for n in range(max_words, 0, -1):
        for i in range(len(words) - n + 1):
            gram = words[i : i + n]
            if n == 1 and (gram[0] in _FUNCTION or len(gram[0]) < 2):
                continue
            name = " ".join(gram)
            if name not in out:
                out.append(name)
    return out[:60]
