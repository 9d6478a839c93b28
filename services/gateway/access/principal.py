"""Who is calling: the authenticated principal every route sees."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Principal:
    id: str
    is_admin: bool = False

    def can_see(self, owner_id: str | None) -> bool:
        """Ownership rule of API.md: your own resources; admins see all."""
        return self.is_admin or owner_id == self.id
