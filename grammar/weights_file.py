"""A graph's weights file: the ``.npz`` sidecar that external constants name.

    weights "resnet.npz" sha256 "9f2c..."        # once, before the graphs
    graph main(x: float32[1, 3, 8, 8]) {
      w = const float32[4, 3, 3, 3] weights["conv1.weight"]
      ...

The file is found relative to the graph file (the working directory for text
without a file), its SHA-256 digest must be the declared one, and it is read with
``allow_pickle=False`` when the first constant names it. Each entry must have the
dtype and shape its constant declares. Every failure is a located GraphError.
"""

from __future__ import annotations

import io
import re
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

import numpy as np

from byoc.errors import GraphError, Location, ParseError
from byoc.input_files import NPZ_LIMIT, read_limited
from byoc.ir import Function, Program, TensorType, WeightsSource
from byoc.npz_files import ReadWeights, npz_bytes, read_npz, sha256_hex

SHA256 = re.compile(r"[0-9a-f]{64}")


class WeightsFile:
    """The weights declaration of one graph text, and its archive once read."""

    def __init__(
        self,
        file: str,
        sha256: str,
        graph_file: str | None,
        file_loc: Location,
        sha_loc: Location,
        files: Mapping[str, bytes | ReadWeights] | None = None,
    ):
        """``files`` holds weights files in memory by name (a bundle's members, or an
        import's :class:`ReadWeights`), looked up before the file system."""
        if not SHA256.fullmatch(sha256):
            raise ParseError(
                f"{sha256!r} is not a SHA-256 digest",
                sha_loc,
                hint="write the file's digest as 64 lowercase hex digits (sha256sum FILE)",
            )
        self.file = file
        self.sha256 = sha256
        base = Path(graph_file).parent if graph_file and not graph_file.startswith("<") else Path(".")
        self.path = base / file
        self.file_loc = file_loc
        self.sha_loc = sha_loc
        self.in_memory = None if files is None else files.get(file)
        self._arrays: dict[str, np.ndarray] | None = None

    def _error(self, at: Location):
        return lambda message, hint=None: GraphError(message, at, hint=hint)

    def arrays(self) -> dict[str, np.ndarray]:
        if self._arrays is None and isinstance(self.in_memory, ReadWeights):
            self._check_digest(self.in_memory.sha256, f"weights file {self.file!r}")
            self._arrays = dict(self.in_memory.arrays)
        if self._arrays is None and self.in_memory is not None:
            self._arrays = self._read(
                self.in_memory, f"weights file {self.file!r}", io.BytesIO(self.in_memory)
            )
        if self._arrays is None:
            data = read_limited(self.path, f"weights file {str(self.path)!r}", NPZ_LIMIT, self._read_error)
            self._arrays = self._read(data, f"weights file {str(self.path)!r}", data)
        return self._arrays

    def _read_error(self, message: str, hint: str | None = None) -> GraphError:
        """An error reading the weights file, at its name in the graph."""
        return GraphError(
            message, self.file_loc, hint=hint or "the weights file is found relative to the graph file"
        )

    def _read(self, data: bytes, what: str, source: bytes | io.BytesIO) -> dict[str, np.ndarray]:
        """The arrays of ``data`` (read from ``source``), after checking its digest."""
        self._check_digest(sha256_hex(data), what)
        return read_npz(source, what, self._error(self.file_loc))

    def _check_digest(self, digest: str, what: str) -> None:
        if digest != self.sha256:
            raise GraphError(
                f"{what} has SHA-256 {digest}, but the graph declares {self.sha256}",
                self.sha_loc,
                hint="the weights changed since the graph was written; re-import the model, "
                "or declare the new digest if the change is intended",
            )

    def values(self, entry: str, type_: TensorType, loc: Location) -> tuple[np.ndarray, WeightsSource]:
        """The values of ``entry`` (an array), checked against the constant's declared type."""
        arrays = self.arrays()
        array = arrays.get(entry)
        if array is None:
            shown = ", ".join(repr(k) for k in sorted(arrays)[:8]) or "none"
            raise GraphError(
                f"weights file {self.file!r} has no entry {entry!r}", loc, hint=f"its entries: {shown}"
            )
        got = f"{array.dtype}[{', '.join(map(str, array.shape))}]"
        if array.dtype != np.dtype(type_.dtype) or array.shape != type_.shape:
            raise GraphError(
                f"weights entry {entry!r} is {got}, but the constant declares {type_}",
                loc,
                hint=f"declare it as `const {got} weights[{entry!r}]`".replace("'", '"'),
            )
        flat = array.reshape(-1)  # freshly read and held only here: frozen, not copied
        flat.flags.writeable = False
        return flat, WeightsSource(self.file, self.sha256, entry)


def no_weights_file(loc: Location) -> GraphError:
    return GraphError(
        "weights[...] names an entry, but the text declares no weights file",
        loc,
        hint='declare it before the graphs: weights "FILE.npz" sha256 "DIGEST"',
    )


def externalize(
    program: Program, file: str, min_elements: int, *, sourced: bool = False
) -> tuple[Program, bytes | None]:
    """``program`` with every constant of more than ``min_elements`` elements (and with
    ``sourced``, every one already read from a weights file) read from one new weights
    file named ``file``, and that file's bytes (None when no constant qualifies).

    Entries keep a constant's own entry name, else take ``<function>/<constant>``; a
    name already taken by other values gets a ``~<k>`` suffix. Every other constant
    loses its source (it is printed as values), so the program names that one file
    only. A printed copy of the program then stays text-sized whatever its weights:
    a bundle's source, a host function with a large constant."""
    arrays: dict[str, np.ndarray] = {}
    entries: dict[int, str] = {}

    def collect(fn: Function, scope: str) -> None:
        for c in fn.constants:
            if id(c) in entries or not _goes_external(c, min_elements, sourced):
                continue  # a constant shared by several functions is stored once
            entry = base = c.source.entry if c.source is not None else f"{scope}/{c.name}"
            k = 0
            while entry in arrays and not _same(arrays[entry], c.array):
                k += 1
                entry = f"{base}~{k}"
            arrays[entry] = c.array
            entries[id(c)] = entry
        for node in fn.nodes:
            if node.callee is not None:
                collect(node.callee, f"{scope}/{node.callee.name or node.name}")

    for fn in program.functions:
        collect(fn, str(fn.name))
    if not arrays:
        return program, None
    data = npz_bytes(arrays)
    digest = sha256_hex(data)

    def rewrite(fn: Function) -> Function:
        constants = tuple(
            replace(c, source=WeightsSource(file, digest, entries[id(c)]) if id(c) in entries else None)
            for c in fn.constants
        )
        nodes = tuple(
            node if node.callee is None else replace(node, callee=rewrite(node.callee)) for node in fn.nodes
        )
        return replace(fn, constants=constants, nodes=nodes)

    return Program(tuple(rewrite(fn) for fn in program.functions)), data


def has_external(program: Program, min_elements: int, *, sourced: bool = False) -> bool:
    """Whether :func:`externalize` would write a weights file for ``program`` (some
    constant qualifies), found without writing it."""

    def any_in(fn: Function) -> bool:
        return any(_goes_external(c, min_elements, sourced) for c in fn.constants) or any(
            any_in(node.callee) for node in fn.nodes if node.callee is not None
        )

    return any(any_in(fn) for fn in program.functions)


def _goes_external(c, min_elements: int, sourced: bool) -> bool:
    """Whether :func:`externalize` moves constant ``c`` into the weights file."""
    return c.values.size > min_elements or (sourced and c.source is not None)


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
