"""The one object of a kind that a service process installs once it has built it (its runtime:
settings, database, bus), for the handlers that the tool framework calls without it."""

from __future__ import annotations

from typing import Generic, TypeVar

T = TypeVar("T")


class Installed(Generic[T]):
    def __init__(self, what: str) -> None:
        self.what = what
        self._current: T | None = None

    def install(self, value: T | None) -> None:
        self._current = value

    def get(self) -> T:
        if self._current is None:
            raise RuntimeError(f"{self.what} not started")
        return self._current
