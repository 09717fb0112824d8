"""What a generator returns: named text artifacts."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Role(str, Enum):
    """What an artifact is for. A ``str`` too, so ``role == "module"`` keeps working; show
    it with ``.value`` (``str()`` and f-strings of a str-Enum differ between Pythons)."""

    MODULE = "module"
    """A backend's external functions (C, C++, JSON or ExampleJSON)."""
    HEADER = "header"
    """A generated header that the module includes."""
    HOST_GRAPH = "host_graph"
    """A graph-executor JSON."""
    HOST_FUNCTIONS = "host_functions"
    """The ops the host graph runs itself, as DSL text."""


@dataclass(frozen=True, slots=True)
class Artifact:
    """One generated file; ``backend`` is None for the host graph's artifacts."""

    name: str
    text: str
    role: Role
    backend: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.role, Role):  # a plain string would never compare equal to a Role
            raise TypeError(f"Artifact {self.name!r}: role must be a Role, not {self.role!r}")
