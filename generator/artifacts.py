"""What a generator returns: named text artifacts."""

from __future__ import annotations

from dataclasses import dataclass

ROLES = ("module", "header", "host_graph", "host_functions")


@dataclass(frozen=True, slots=True)
class Artifact:
    """One generated file.

    ``role``: ``module`` holds a backend's external functions (C, C++, JSON or
    ExampleJSON); ``header`` is a generated header the module includes;
    ``host_graph`` is a graph-executor JSON; ``host_functions`` holds the host ops.
    """

    name: str
    text: str
    role: str
    backend: str | None = None

    @property
    def suffix(self) -> str:
        return self.name.rsplit(".", 1)[-1]
