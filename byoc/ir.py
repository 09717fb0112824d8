"""byoc's one intermediate representation.

``Program`` -> ``Function`` -> ``Node``, with ``TensorType(shape, dtype)``. Every
front end (the graph DSL, ExampleJSON) produces it and every generator consumes it.

Conventions:

* Values are referred to by name. A function's names are its parameters, its
  constants and the outputs of its nodes; all are unique within the function.
* Nodes are stored in topological order: every input is defined before use.
* A node whose ``op`` is ``"call"`` runs another function, its ``callee``: that is
  how a backend region (``s = @ccompiler { ... }``) is held. The callee's
  parameters are the outer names it captures, so ``node.inputs`` equals the
  callee's parameter names, and the callee's ``backend`` says who runs it.
* Nested calls in the DSL become nodes with anonymous names ``%<k>``. They are not
  valid DSL identifiers, so they never collide with a user's names, and the printer
  folds them back into nested calls.
* A node whose callee has ``composite`` set is a *composite*: a small group of ops
  that a backend spec's pattern matched and that its backend runs as one kernel
  (TVM's ``Composite`` functions). It sits inside the region of that backend and
  prints as ``y = @backend.pattern { ... }``.
* Source locations never take part in equality: ``parse(print(f)) == f``.

The types here are plain frozen data. Checking a function against the op catalog
lives in :mod:`byoc.validate`; building one from unordered statements lives in
:mod:`byoc.builder`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Container, Iterable
from dataclasses import dataclass, field
from math import prod
from typing import TypeVar

import ml_dtypes  # noqa: F401  (registers bfloat16 with numpy: np.dtype("bfloat16"))
import numpy as np

from .errors import Location

T = TypeVar("T")

DTYPES: tuple[str, ...] = (
    "float32",
    "float64",
    "int32",
    "int64",
    "int8",
    "uint8",
    "bool",
    "float16",
    "bfloat16",
    "int16",
    "uint16",
    "uint32",
    "uint64",
)
"""The element types byoc supports, in a stable order (the first six are the original
ones; the rest were added later, so listings that follow this order keep their place)."""

OP_DEFAULT_DTYPES: tuple[str, ...] = ("float32", "float64", "int32", "int64")
"""The dtypes of a catalog op that lists none. The others are opt-in: an op takes
``int8``, ``bool``, ``float16`` ... only where its catalog entry says so, since
arithmetic that is exact in 32 bits wraps in 8, a C expression such as ``x < 0`` is
always false (a ``-Wtype-limits`` warning) on an unsigned type, and the 16-bit floats
need their loads and stores converted (see :data:`FLOAT_DTYPES`)."""

INTEGER_DTYPES: tuple[str, ...] = ("int32", "int64", "int8", "uint8", "int16", "uint16", "uint32", "uint64")
"""The dtypes whose values are integers (their constants take integer literals).
``bool`` is not one of them: its literals are ``true`` and ``false``."""

FLOAT_DTYPES: tuple[str, ...] = ("float32", "float64", "float16", "bfloat16")
"""The floating-point dtypes.

``float16`` and ``bfloat16`` are *storage* types: byoc computes on them in float32, as
ONNX Runtime does on CPUs without native half arithmetic. Generated C converts each
element to ``float`` where it is read, computes, and rounds the result back (round to
nearest even) where a node's value is defined, so every node's value is rounded once to
its dtype, exactly like the numpy reference (:data:`HALF_DTYPES`)."""

HALF_DTYPES: tuple[str, ...] = ("float16", "bfloat16")
"""The 16-bit float dtypes, stored in 16 bits and computed in float32."""

UNSIGNED_DTYPES: tuple[str, ...] = ("uint8", "uint16", "uint32", "uint64", "bool")
"""The dtypes that hold no negative value."""

DTYPE_BYTES: dict[str, int] = {
    "float32": 4,
    "float64": 8,
    "int32": 4,
    "int64": 8,
    "int8": 1,
    "uint8": 1,
    "bool": 1,
    "float16": 2,
    "bfloat16": 2,
    "int16": 2,
    "uint16": 2,
    "uint32": 4,
    "uint64": 8,
}

C_TYPES: dict[str, str] = {
    "float32": "float",
    "float64": "double",
    "int32": "int32_t",
    "int64": "int64_t",
    "int8": "int8_t",
    "uint8": "uint8_t",
    "bool": "bool",
    "float16": "byoc_float16",
    "bfloat16": "byoc_bfloat16",
    "int16": "int16_t",
    "uint16": "uint16_t",
    "uint32": "uint32_t",
    "uint64": "uint64_t",
}
"""The C (and C++) element type of each dtype; the value of a template's ``${ctype}``.
``bool`` is C99's ``bool`` (``<stdbool.h>``; one byte holding 0 or 1, as numpy's and
DLPack's bool). ``byoc_float16`` and ``byoc_bfloat16`` are 16-bit storage types that
generated code defines in its support text: never computed on directly, only
converted to and from ``float``."""

C_COMPUTE_TYPES: dict[str, str] = {**C_TYPES, "float16": "float", "bfloat16": "float"}
"""The C type that generated code computes a dtype's values in: the storage type, but
``float`` for the 16-bit floats (see :data:`FLOAT_DTYPES`)."""


def first_uses(items: Iterable[T], local: Container[str], name: Callable[[T], str] = str) -> list[T]:
    """The items whose ``name`` is not in ``local``, the first of each name only, in
    order: a region's parameters in the order its body first reads them (the inputs
    of its nodes, then its outputs), as the DSL's parser orders a region written
    without a parameter list and its printer decides whether to write one."""
    seen: set[str] = set()
    found: list[T] = []
    for item in items:
        key = name(item)
        if key not in local and key not in seen:
            seen.add(key)
            found.append(item)
    return found


def is_integer(dtype: str) -> bool:
    """Whether ``dtype`` holds integers (see :data:`INTEGER_DTYPES`)."""
    return dtype in INTEGER_DTYPES


def is_float(dtype: str) -> bool:
    """Whether ``dtype`` is a floating-point type (see :data:`FLOAT_DTYPES`)."""
    return dtype in FLOAT_DTYPES


def is_half(dtype: str) -> bool:
    """Whether ``dtype`` is a 16-bit float computed in float32 (see :data:`HALF_DTYPES`)."""
    return dtype in HALF_DTYPES


def numpy_dtype(dtype: str) -> np.dtype:
    """The numpy dtype of a byoc dtype. ``bfloat16`` is ``ml_dtypes.bfloat16``, which
    this module registers with numpy by importing it, so ``np.dtype("bfloat16")`` and
    ``str(array.dtype) == "bfloat16"`` work everywhere byoc runs."""
    return np.dtype(dtype)


def dtype_name(dtype: np.dtype) -> str | None:
    """The byoc dtype of a numpy dtype, or None when byoc has no such dtype (a
    byte-swapped or structured dtype, float8, complex, strings, objects)."""
    if not dtype.isnative:
        return None
    name = str(dtype)
    return name if name in DTYPES else None


CALL_OP = "call"
"""The op of a node that runs a callee function (a backend region)."""

ANON_PREFIX = "%"
"""Names of anonymous nodes (nested calls) start with this character."""

MAX_ELEMENTS = 1 << 48
"""The most elements a tensor may have, and so the largest dimension: 2**48 (about
2.8e14). Byte sizes and every index a generated loop computes then fit in int64 with
room to spare; a type beyond it is a located error when the text is read, not a
failed allocation later."""

MAX_NAME_LENGTH = 128
"""The longest name the text languages accept (values, graphs, regions, ops)."""

AttrValue = int | float | str | bool | tuple[int, ...]
Attrs = tuple[tuple[str, AttrValue], ...]


@dataclass(frozen=True, slots=True)
class TensorType:
    """A dense tensor type: a shape (a tuple of non-negative ints) and a dtype name."""

    shape: tuple[int, ...]
    dtype: str

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * DTYPE_BYTES[self.dtype]

    def __str__(self) -> str:
        return f"{self.dtype}[{', '.join(map(str, self.shape))}]"


def shape_problem(shape: tuple[int, ...]) -> str | None:
    """Why a tensor of ``shape`` is beyond byoc's limits (:data:`MAX_ELEMENTS`), or None."""
    for d in shape:
        if d > MAX_ELEMENTS:
            return f"dimension {d:,} is larger than the limit of 2**48 elements"
    n = prod(shape)
    if n > MAX_ELEMENTS:
        return f"{n:,} elements is more than the limit of 2**48"
    return None


@dataclass(frozen=True, slots=True)
class Param:
    name: str
    type: TensorType
    loc: Location | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class WeightsSource:
    """Where an external constant's values came from: entry ``entry`` of the weights
    file ``file`` (a ``.npz`` archive, named as the graph text names it, relative to
    the graph file), whose SHA-256 digest is ``sha256``."""

    file: str
    sha256: str
    entry: str


@dataclass(frozen=True, slots=True, eq=False)
class Constant:
    """A named constant tensor.

    ``values`` is a read-only, C-contiguous numpy array of the constant's dtype, flat
    (one dimension, row-major order): a 25-million-element weight is 100 MB of
    float32, not 25 million Python floats. Anything array-like may be passed in
    (a tuple, a list, an array of any shape or dtype); it is converted with
    ``np.array(values, dtype)`` as the numpy reference does, flattened, and frozen.
    :attr:`array` is the same data viewed in the constant's shape.

    Two constants are equal when their names, types and value *bytes* are: a NaN
    equals the same NaN and ``-0.0`` differs from ``0.0``, so equality is exactly
    "the same constant" and ``parse(print(f)) == f`` holds bit for bit.

    ``source`` says where the values were read from, for an external constant
    (``const float32[64] weights["conv1.w"]``); the printer writes that reference
    back instead of the values. Like ``loc``, it takes no part in equality: the
    values are the constant."""

    name: str
    type: TensorType
    values: np.ndarray
    loc: Location | None = field(default=None, compare=False, repr=False)
    source: WeightsSource | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "values", frozen_values(self.values, self.type.dtype))

    @property
    def array(self) -> np.ndarray:
        """The values in the constant's shape (a read-only view), or flat when their
        count does not match the type (which :func:`byoc.validate` reports)."""
        if self.values.size != self.type.size:
            return self.values
        return self.values.reshape(self.type.shape)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Constant):
            return NotImplemented
        return (
            self.name == other.name
            and self.type == other.type
            and self.values.dtype == other.values.dtype
            and self.values.shape == other.values.shape
            and bool(np.array_equal(self.values.view(np.uint8), other.values.view(np.uint8)))
        )

    def __hash__(self) -> int:
        # The digest keeps hashing a 100 MB constant to one pass over its bytes, no copy.
        digest = hashlib.blake2b(self.values.data, digest_size=8).digest()
        return hash((self.name, self.type, self.values.dtype.str, digest))


def frozen_values(values: object, dtype: str) -> np.ndarray:
    """``values`` as a constant holds them: a flat, C-contiguous, read-only array of
    ``dtype``; an array that already is one is used as is, without a copy."""
    if (
        isinstance(values, np.ndarray)
        and values.dtype == np.dtype(dtype)
        and values.ndim == 1
        and values.flags.c_contiguous
        and not values.flags.writeable
    ):
        return values
    array = np.array(values, dtype=dtype).reshape(-1)  # always a copy: nobody else can write it
    array.flags.writeable = False
    return array


def plain_numbers(values: np.ndarray) -> list[int | float]:
    """A constant's values as Python numbers, as its text writes them: ints, doubles,
    and for float32 the double nearest the shortest decimal that reads back as the
    float32 (``0.1``, not ``0.10000000149011612``), so printing, JSON and C show
    what the user wrote."""
    if values.dtype == np.float32:
        return [float(str(v)) for v in values]
    return values.tolist()


@dataclass(frozen=True, slots=True)
class Node:
    """One op application.

    ``outputs`` are the names this node defines (one for most catalog ops, one per
    part for an op of several outputs such as ``a, b = split(x)``; a call defines one
    per callee output), and ``types`` their tensor types.
    ``attrs`` holds every attribute of the op, defaults filled in, in catalog order.
    """

    outputs: tuple[str, ...]
    op: str
    inputs: tuple[str, ...]
    types: tuple[TensorType, ...]
    attrs: Attrs = ()
    callee: Function | None = None
    loc: Location | None = field(default=None, compare=False, repr=False)

    @property
    def name(self) -> str:
        return self.outputs[0]

    @property
    def type(self) -> TensorType:
        return self.types[0]

    def attr(self, key: str) -> AttrValue:
        for k, v in self.attrs:
            if k == key:
                return v
        raise KeyError(key)


@dataclass(frozen=True, slots=True)
class Function:
    """A graph: parameters, constants, nodes in topological order, and outputs.

    ``name`` is ``None`` for a backend region that the DSL did not name; the
    generator gives it a symbol from the backend's prefix. ``backend`` is ``None``
    for host code. ``composite`` names the backend's pattern that a composite's
    callee implements (None for every other function).
    """

    name: str | None
    params: tuple[Param, ...]
    constants: tuple[Constant, ...]
    nodes: tuple[Node, ...]
    outputs: tuple[str, ...]
    backend: str | None = None
    loc: Location | None = field(default=None, compare=False, repr=False)
    composite: str | None = None

    def types(self) -> dict[str, TensorType]:
        """Every name defined in this function, mapped to its type."""
        table: dict[str, TensorType] = {p.name: p.type for p in self.params}
        table.update((c.name, c.type) for c in self.constants)
        for node in self.nodes:
            table.update(zip(node.outputs, node.types))
        return table

    @property
    def output_types(self) -> tuple[TensorType, ...]:
        """The types of ``outputs``; scans from the end, where outputs usually are."""
        wanted = set(self.outputs)
        found: dict[str, TensorType] = {}
        for node in reversed(self.nodes):
            for name, t in zip(node.outputs, node.types):
                if name in wanted:
                    found.setdefault(name, t)
            if len(found) == len(wanted):
                break
        else:
            for value in (*self.params, *self.constants):
                if value.name in wanted:
                    found.setdefault(value.name, value.type)
        return tuple(found[name] for name in self.outputs)

    def regions(self) -> tuple[Function, ...]:
        """The callee functions of this function's call nodes, in node order."""
        return tuple(n.callee for n in self.nodes if n.callee is not None)


def weights_sources(functions: Iterable[Function]) -> list[WeightsSource]:
    """Where each constant read from a weights file in ``functions`` and their regions
    came from, in order."""
    found = []
    for fn in functions:
        found += [c.source for c in fn.constants if c.source is not None]
        found += weights_sources(fn.regions())
    return found


@dataclass(frozen=True, slots=True)
class Program:
    """A module: one or more functions with unique names."""

    functions: tuple[Function, ...]

    def function(self, name: str) -> Function:
        for fn in self.functions:
            if fn.name == name:
                return fn
        raise KeyError(name)
