"""Who is calling: the authenticated principal every route sees."""

from __future__ import annotations

from dataclasses import dataclass

# What an API key may reach (docs/API.md "API keys"); a bearer token reaches all of it.
SCOPES = ("chat", "mcp", "api", "admin")


@dataclass(frozen=True)
class Principal:
    id: str
    is_admin: bool = False
    key_id: str | None = None  # the API key the caller used (None: a bearer token)
    scopes: frozenset[str] | None = None  # an API key's scopes (None: everything the user may do)

    def can_see(self, owner_id: str | None) -> bool:
        """Ownership rule of API.md: your own resources; admins see all."""
        return self.is_admin or owner_id == self.id

    def allows(self, *scopes: str) -> bool:
        """Whether the caller may use a door that any of `scopes` opens."""
        return self.scopes is None or any(s in self.scopes for s in scopes)
