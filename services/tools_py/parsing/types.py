"""The shape every parser returns: a title, the full text, and heading-delimited sections."""

from __future__ import annotations

from pydantic import BaseModel, Field

from shared.errors import AgentixError


class Section(BaseModel):
    heading: str = ""
    level: int = 0
    text: str


class ParsedDocument(BaseModel):
    title: str
    format: str
    text: str
    sections: list[Section] = Field(default_factory=list)


class ParseError(AgentixError, ValueError):
    """The bytes are not a readable document of the claimed format."""

    code = "bad_document"
    http_status = 422


def clean_sections(sections: list[Section]) -> list[Section]:
    """Drop empty sections and normalise whitespace at the edges."""
    out: list[Section] = []
    for s in sections:
        text = s.text.strip()
        if text or s.heading:
            out.append(Section(heading=s.heading.strip(), level=s.level, text=text))
    return out


def join_text(sections: list[Section]) -> str:
    parts: list[str] = []
    for s in sections:
        if s.heading:
            parts.append(s.heading)
        if s.text:
            parts.append(s.text)
    return "\n\n".join(parts)
