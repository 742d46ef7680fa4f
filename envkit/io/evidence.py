"""A file read (or not) in a target: what a probe saw, shared by doctor's probe and the fleet's net checks."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Evidence:
    """A file read (or not) in the target. ``source`` is the path as the target sees it."""

    source: str
    data: bytes | None = None
    error: str | None = None

    @property
    def found(self) -> bool:
        return self.data is not None
