"""Common base for every contract model: strict about unknown fields where it matters, JSON in/out."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Self

from pydantic import BaseModel, ConfigDict


def utcnow() -> datetime:
    return datetime.now(UTC)


class Contract(BaseModel):
    """A model that crosses a service boundary. Extra fields are ignored so old readers survive
    new writers (the bus is a rolling-upgrade boundary)."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    def to_bytes(self) -> bytes:
        return self.model_dump_json(exclude_none=True, by_alias=True).encode()

    @classmethod
    def from_bytes(cls, data: bytes | str) -> Self:
        return cls.model_validate_json(data)
