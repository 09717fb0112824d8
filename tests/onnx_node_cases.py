"""ONNX's node tests, indexed without building them.

``onnx.backend.test.loader.load_model_tests(kind="node")`` builds every node test in
memory, a one-node model and its data sets, by running each op's reference
implementation: about 5 s on this project's machines. A module that parametrizes over
node tests needs only their names, ops and types to collect, so it reads them from the
index recorded in ``tests/data/onnx_node_cases.json`` for the onnx version installed
when it was written; under another onnx version the index is built from the tests
themselves, at collection. The tests are built once per process, when a test first
needs one (:func:`case`). ``test_onnx_node_types.py`` checks the record against the
installed onnx; rewrite it with::

    .venv/bin/python tests/onnx_node_cases.py
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
import onnx
from onnx.backend.test.loader import load_model_tests

RECORD = Path(__file__).resolve().parent / "data" / "onnx_node_cases.json"


@dataclass(frozen=True)
class CaseInfo:
    """What collection needs of one node test: its name, the op of each node of its
    model, and the TensorProto type names it uses (inputs, outputs, Cast's ``to``)."""

    name: str
    ops: tuple[str, ...]
    types: tuple[str, ...]


def type_names(model) -> tuple[str, ...]:
    """The TensorProto type names a node test's model uses: its inputs', outputs' and
    any ``to`` attribute's (Cast)."""
    names = []
    graph = model.graph
    for value in (*graph.input, *graph.output):
        names.append(onnx.TensorProto.DataType.Name(value.type.tensor_type.elem_type))
    for node in graph.node:
        names += (onnx.TensorProto.DataType.Name(a.i) for a in node.attribute if a.name == "to")
    return tuple(names)


@cache
def cases() -> dict:
    """Every node test of the installed onnx, built (once per process), by name."""
    with np.errstate(all="ignore"):  # the loader's own data builders overflow on purpose
        return {c.name: c for c in load_model_tests(kind="node")}


def case(name: str):
    """The built node test ``name`` (``onnx.backend.test.loader``'s TestCase)."""
    return cases()[name]


def computed_index() -> dict[str, CaseInfo]:
    """The index of the installed onnx's node tests, from the built tests."""
    return {
        c.name: CaseInfo(c.name, tuple(n.op_type for n in c.model.graph.node), type_names(c.model))
        for c in cases().values()
    }


def recorded() -> tuple[str, dict[str, CaseInfo]]:
    """(onnx version, index) as tests/data/onnx_node_cases.json holds them."""
    data = json.loads(RECORD.read_text(encoding="utf-8"))
    return data["onnx"], {
        name: CaseInfo(name, tuple(row["ops"]), tuple(row["types"])) for name, row in data["cases"].items()
    }


@cache
def index() -> dict[str, CaseInfo]:
    """The node tests' index: the record when it is for the installed onnx, else built."""
    version, record = recorded() if RECORD.exists() else (None, {})
    return record if version == onnx.__version__ else computed_index()


def write_record() -> None:
    """Write the installed onnx's index to :data:`RECORD`, one test per line."""
    rows = sorted(computed_index().values(), key=lambda c: c.name)
    lines = [
        f"  {json.dumps(c.name)}: {json.dumps({'ops': list(c.ops), 'types': list(c.types)})}" for c in rows
    ]
    text = f'{{"onnx": {json.dumps(onnx.__version__)}, "cases": {{\n' + ",\n".join(lines) + "\n}}\n"
    RECORD.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    write_record()
    print(f"wrote {RECORD} ({len(computed_index())} node tests of onnx {onnx.__version__})")
