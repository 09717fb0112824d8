"""What a generator returns: named artifacts, text (sources, JSON, DSL) or binary
(a large constant's values, :attr:`Role.WEIGHTS`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum


class Role(str, Enum):
    """What an artifact is for. A ``str`` too, so ``role == "module"`` keeps working; show
    it with ``.value`` (``str()`` and f-strings of a str-Enum differ between Pythons)."""

    MODULE = "module"
    """A backend's external functions (C, C++, JSON or ExampleJSON)."""
    HEADER = "header"
    """A header that the module includes: generated, or the spec's (``support:``)."""
    SUPPORT = "support"
    """C of the spec's that each module links (``support:``, :mod:`byoc.spec.support`):
    compiled once per spec, not per module."""
    HOST_GRAPH = "host_graph"
    """A graph-executor JSON."""
    HOST_FUNCTIONS = "host_functions"
    """The ops the host graph runs itself, as DSL text."""
    WEIGHTS = "weights"
    """A large constant's values as bytes, beside the module that reads them (a C
    module's ``.incbin``, a JSON module's ``.npz``): see :data:`LARGE_CONSTANT_ELEMENTS`."""


LARGE_CONSTANT_ELEMENTS = 4096
"""A constant of more elements than this is never written as text into generated code:
C-family modules include its bytes from a binary artifact (``.incbin``), JSON modules
name an ``.npz`` member. 4096 float32 values are 16 KB of data but some 50 KB of C
initialiser that the compiler parses token by token (a ResNet-50's 25 million weights
took a minute of gcc as literals, milliseconds as ``.incbin``), and nobody reads
that many numbers in a file; every smaller constant (the examples, biases, the
golden files) stays a readable literal."""

LITERAL_VALUES_PER_FUNCTION = LARGE_CONSTANT_ELEMENTS
"""C-family modules write at most this many values of one function's constants as
literal text (:func:`literal_constants`); the rest are included from binary artifacts
too. A model's biases and norm parameters are each below :data:`LARGE_CONSTANT_ELEMENTS`,
but BERT-base has 129,000 such values: as literals they were 1.8 MB of C, and gcc spent
1.3 s of its 4.5 s on the module parsing them (2026-12-02, Zen 4). Every example and
golden function stays within the budget, so they keep their literals."""


def literal_constants(sizes: Sequence[int]) -> frozenset[int]:
    """Which of a function's constants, given by their element counts in order, are
    written as literal text: those of at most :data:`LARGE_CONSTANT_ELEMENTS` values,
    smallest first (then in order), while their total stays within
    :data:`LITERAL_VALUES_PER_FUNCTION`. Scalars and short vectors always fit; which
    constants become binary artifacts depends only on the sizes, so the text is
    deterministic."""
    chosen, total = set(), 0
    for k in sorted(range(len(sizes)), key=lambda k: (sizes[k], k)):
        if sizes[k] > LARGE_CONSTANT_ELEMENTS or total + sizes[k] > LITERAL_VALUES_PER_FUNCTION:
            break
        chosen.add(k)
        total += sizes[k]
    return frozenset(chosen)


@dataclass(frozen=True, slots=True)
class Artifact:
    """One generated file; ``backend`` is None for the host graph's artifacts. A
    :attr:`Role.WEIGHTS` artifact holds ``data`` (bytes) and an empty ``text``; every
    other one holds ``text``. :attr:`content` is what its file holds, either way."""

    name: str
    text: str
    role: Role
    backend: str | None = None
    data: bytes | None = None
    digest: str | None = None
    """A weights artifact's SHA-256 (hex), when its maker computed it: the build keys
    its cache by it (:func:`byoc.runtime.build.build_library`)."""

    def __post_init__(self) -> None:
        if not isinstance(self.role, Role):  # a plain string would never compare equal to a Role
            raise TypeError(f"Artifact {self.name!r}: role must be a Role, not {self.role!r}")
        if (self.data is not None) != (self.role is Role.WEIGHTS) or (self.data is not None and self.text):
            raise TypeError(f"Artifact {self.name!r}: a weights artifact holds bytes, any other one text")

    @property
    def content(self) -> str | bytes:
        """The file's content: the text, or a weights artifact's bytes."""
        return self.data if self.data is not None else self.text

    @property
    def payload(self) -> bytes:
        """The file's bytes (text as UTF-8)."""
        return self.data if self.data is not None else self.text.encode("utf-8")


def weights_artifact(name: str, data: bytes, backend: str | None, digest: str | None = None) -> Artifact:
    """A binary artifact holding a large constant's values; ``digest``, their SHA-256
    when the caller has it already (a build keys its cache by it: no second pass over
    a model's 100 MB)."""
    return Artifact(name, "", Role.WEIGHTS, backend, data, digest)
