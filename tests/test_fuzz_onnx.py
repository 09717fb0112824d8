"""Fuzzing the ONNX importer (budgets and the long mode: tests/fuzz_strategies.py).

Seeds are ONNX's own test models: the node tests that ``onnx.backend.test`` builds
in memory (tests/onnx_node_cases.py indexes them; built once, when a test first
draws one) and the small ``model.onnx`` files shipped in the onnx wheel
(``simple``, ``pytorch-operator``, ``pytorch-converted``).

* **onnx-bytes**: byte-level mutations of a serialized model (bit flips, cuts,
  splices, insertions, duplications).
* **onnx-structure**: mutations through the protobuf API: dimensions made 0, -1 or
  huge, inputs and initializers dropped or duplicated, attributes of another type or
  value, element types, opset versions and domains, op types, values renamed to
  collide, cycles, ``raw_data`` of the wrong size, functions and subgraphs added.

Whatever a mutant is, importing it may raise only a ByocError. A mutant that imports
is generated for the json backend; when its inputs are small enough to draw, it is
built for json and run, and its outputs must equal the numpy reference's
(:func:`byoc.evaluate` on the same program).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np
import pytest
from fuzz_strategies import CI_EXAMPLES, fuzz_settings
from hypothesis import event, given
from hypothesis import strategies as st

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402
from onnx_node_cases import case, index  # noqa: E402

import byoc  # noqa: E402
from byoc.api import backend_loader, load_catalog  # noqa: E402
from byoc.building import build, offload  # noqa: E402
from byoc.errors import ByocError  # noqa: E402
from byoc.generator.pipeline import generate  # noqa: E402
from byoc.onnx.model_import import import_program  # noqa: E402
from byoc.onnx.ops import onnx_ops  # noqa: E402

CATALOG = load_catalog()
LOADER = backend_loader(None, CATALOG)
WHERE = "fuzz.onnx"
MAX_RUN_ELEMENTS = 1 << 12
"""A mutant whose inputs hold more elements than this is generated, not run."""

DATA = Path(onnx.__file__).parent / "backend" / "test" / "data"
SHIPPED = [
    p.read_bytes()
    for kind in ("simple", "pytorch-operator", "pytorch-converted")
    for p in sorted((DATA / kind).glob("*/model.onnx"))
    if p.stat().st_size < 20_000
]
"""The small models the onnx wheel ships (bytes): real exporters' output."""
SUPPORTED = set(onnx_ops()) | {"Constant", "Shape", "Identity"}
NODE_TESTS = sorted(
    name for name, info in index().items() if set(info.ops) <= SUPPORTED and "STRING" not in info.types
)
"""Node tests of the ops byoc imports (by name; built when first drawn)."""
OTHER_NODE_TESTS = sorted(set(index()) - set(NODE_TESTS))[::25]
"""A sample of the rest: ops byoc refuses, which must still fail cleanly."""


@cache
def node_model(name: str) -> bytes:
    return case(name).model.SerializeToString()


@st.composite
def seeds(draw) -> bytes:
    """The serialized bytes of one seed model."""
    kind = draw(st.integers(0, 9))
    if kind < 6:
        return node_model(draw(st.sampled_from(NODE_TESTS)))
    if kind < 7:
        return node_model(draw(st.sampled_from(OTHER_NODE_TESTS)))
    return draw(st.sampled_from(SHIPPED))


def only_byoc_errors(action):
    """``action()``, or None when it raised a ByocError (rendered and checked)."""
    try:
        with np.errstate(all="ignore"):
            return action()
    except ByocError as exc:
        assert exc.message
        text = exc.render()
        assert "<fuzz.onnx imported>" not in text, text  # errors name the model, never the text
        if exc.location is not None:
            assert exc.location.line >= 1 and exc.location.column >= 1
        return None


def check_mutant(data: bytes, seed: int) -> None:
    """Import ``data``; generate and run what imports (see the module doc)."""
    program = only_byoc_errors(lambda: import_program(data, where=WHERE))
    if program is None:
        return
    event("imported")
    offloaded = only_byoc_errors(lambda: offload(program, "onnx", ["json"], LOADER, CATALOG))
    if offloaded is None:
        return
    if only_byoc_errors(lambda: generate(offloaded, CATALOG, LOADER)) is None:
        return
    event("generated for json")
    fn = program.functions[0]
    if sum(p.type.size for p in fn.params) > MAX_RUN_ELEMENTS:
        return
    if sum(t.size for t in fn.output_types) > MAX_RUN_ELEMENTS:
        return
    rng = np.random.default_rng(seed)
    inputs = {p.name: _draw_array(rng, p.type.dtype, p.type.shape) for p in fn.params}
    with np.errstate(all="ignore"):
        try:
            want = byoc.evaluate(fn, inputs)
        except (ByocError, ValueError):  # the reference refuses these inputs (a Gather index out of range)
            want = None  # the run must still end cleanly
    model = only_byoc_errors(lambda: build(program, backends=["json"], catalog=CATALOG))
    if model is None:
        return
    got = only_byoc_errors(lambda: model(**inputs))
    if got is None:
        return
    event("ran on json")
    if want is None:
        return
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape
        if g.dtype.kind in "iub":
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(
                g.astype(np.float64), w.astype(np.float64), rtol=1e-5, atol=1e-6, equal_nan=True
            )


def _draw_array(rng, dtype: str, shape) -> np.ndarray:
    if dtype == "bool":
        return rng.integers(0, 2, size=shape).astype(bool)
    if np.dtype(dtype).kind in "iu":
        return rng.integers(0, 5, size=shape).astype(dtype)
    return rng.uniform(-2, 2, size=shape).astype(dtype)


# ------------------------------------------------------------------ byte-level

PROTOBUF_BYTES = [b"\x00", b"\xff", b"\x80", b"\xff\xff\xff\xff\x0f", b"\x08\x01", b"\x0a\x00", b"\x12\x7f"]
"""Insertions that mean something to protobuf: a zero, a dangling varint, a huge length."""


@st.composite
def mutated(draw, data: bytes) -> bytes:
    """``data`` with one mutation (mostly: a model mutated further seldom parses) or a
    few: a bit flip, a byte set, a cut, an insertion, a duplicated or spliced run."""
    data = bytearray(data)
    for _ in range(1 if draw(st.integers(0, 3)) else draw(st.integers(2, 4))):
        pos = draw(st.integers(0, max(0, len(data) - 1)))
        action = draw(
            st.sampled_from(("flip", "flip", "flip", "byte", "delete", "insert", "duplicate", "cut"))
        )
        if action == "flip" and data:
            data[pos] ^= 1 << draw(st.integers(0, 7))
        elif action == "byte" and data:
            data[pos] = draw(st.sampled_from([0, 1, 0x7F, 0x80, 0xFF]))
        elif action == "delete":
            del data[pos : pos + draw(st.integers(1, 8))]
        elif action == "insert":
            data[pos:pos] = draw(st.sampled_from(PROTOBUF_BYTES))
        elif action == "duplicate":
            end = min(len(data), pos + draw(st.integers(1, 40)))
            data[end:end] = data[pos:end]
        elif action == "cut":
            data = data[:pos]
    return bytes(data)


@fuzz_settings(CI_EXAMPLES["onnx-bytes"])
@given(data=st.data())
def test_fuzz_onnx_bytes(data):
    seed = data.draw(seeds())
    check_mutant(data.draw(mutated(seed)), data.draw(st.integers(0, 2**32 - 1)))


# ------------------------------------------------------------------ structural

DIMS = [0, -1, 1, 7, 2**31, 2**40, 2**62, -(2**62)]
INTS = [0, -1, 1, 2, 5, -5, 2**31, 2**62, -(2**63)]
FLOATS = [0.0, -1.0, 1e30, float("nan"), float("inf")]
STRINGS = [b"", b"SAME_UPPER", b"NOTSET", b"wrap", b"\xff\xfe", b"x" * 300]
ELEM_TYPES = [0, 1, 2, 3, 6, 7, 9, 10, 11, 14, 16, 17, 23, 77]
OPSETS = [-1, 0, 1, 5, 6, 7, 9, 11, 13, 17, 18, 21, 99, 2**40]
DOMAINS = ["", "ai.onnx", "com.example", "ai.onnx.ml", "\n"]
OP_TYPES = [
    "Relu",
    "Add",
    "Conv",
    "MaxPool",
    "Reshape",
    "Gemm",
    "MatMul",
    "Concat",
    "Split",
    "Slice",
    "Gather",
    "Transpose",
    "Softmax",
    "Cast",
    "Pad",
    "Expand",
    "Clip",
    "ReduceSum",
    "BatchNormalization",
    "If",
    "Loop",
    "Scan",
    "Hardmax",
    "NoSuchOp",
    "",
]


def _values(graph) -> list:
    return [*graph.input, *graph.output, *graph.value_info]


def _names(graph) -> list[str]:
    names = [v.name for v in _values(graph)] + [t.name for t in graph.initializer]
    for node in graph.node:
        names += [*node.input, *node.output]
    return names or ["x"]


def _dims(draw, model) -> None:
    graph = model.graph
    typed = [v for v in _values(graph) if v.type.HasField("tensor_type")]
    targets = [v.type.tensor_type.shape.dim for v in typed if v.type.tensor_type.HasField("shape")]
    if draw(st.booleans()) and graph.initializer:
        tensor = graph.initializer[draw(st.integers(0, len(graph.initializer) - 1))]
        if tensor.dims:
            tensor.dims[draw(st.integers(0, len(tensor.dims) - 1))] = draw(st.sampled_from(DIMS))
        else:
            tensor.dims.append(draw(st.sampled_from(DIMS)))
        return
    if not targets:
        return
    dims = targets[draw(st.integers(0, len(targets) - 1))]
    action = draw(st.sampled_from(("value", "param", "drop", "add")))
    if action == "add" or not dims:
        dims.add().dim_value = draw(st.sampled_from(DIMS))
    elif action == "drop":
        del dims[draw(st.integers(0, len(dims) - 1))]
    else:
        d = dims[draw(st.integers(0, len(dims) - 1))]
        if action == "param":
            d.dim_param = draw(st.sampled_from(["N", "", "x" * 40]))
        else:
            d.dim_value = draw(st.sampled_from(DIMS))


def _repeated(draw, model) -> None:
    """Drop or duplicate a graph input, output, initializer or node input/output."""
    graph = model.graph
    fields = [graph.input, graph.output, graph.initializer, graph.node]
    fields += [n.input for n in graph.node] + [n.output for n in graph.node]
    fields = [f for f in fields if len(f)]
    if not fields:
        return
    field = fields[draw(st.integers(0, len(fields) - 1))]
    k = draw(st.integers(0, len(field) - 1))
    if draw(st.booleans()):
        del field[k]
    elif isinstance(field[k], str):
        field.append(field[k])
    else:
        field.add().CopyFrom(field[k])


def _attribute(draw, model) -> None:
    nodes = [n for n in model.graph.node]
    if not nodes:
        return
    node = nodes[draw(st.integers(0, len(nodes) - 1))]
    if not node.attribute or draw(st.integers(0, 3)) == 0:
        a = node.attribute.add()
        a.name = draw(st.sampled_from(["axis", "perm", "kernel_shape", "pads", "strides", "to", "mode", "x"]))
    else:
        a = node.attribute[draw(st.integers(0, len(node.attribute) - 1))]
    kind = draw(st.sampled_from(("int", "ints", "float", "floats", "string", "tensor", "graph", "type")))
    keep = a.name
    if kind != "type":
        a.Clear()
        a.name = keep
    if kind == "int":
        a.type, a.i = onnx.AttributeProto.INT, draw(st.sampled_from(INTS))
    elif kind == "ints":
        a.type = onnx.AttributeProto.INTS
        a.ints.extend(draw(st.lists(st.sampled_from(INTS), max_size=6)))
    elif kind == "float":
        a.type, a.f = onnx.AttributeProto.FLOAT, draw(st.sampled_from(FLOATS))
    elif kind == "floats":
        a.type = onnx.AttributeProto.FLOATS
        a.floats.extend(draw(st.lists(st.sampled_from(FLOATS), max_size=4)))
    elif kind == "string":
        a.type, a.s = onnx.AttributeProto.STRING, draw(st.sampled_from(STRINGS))
    elif kind == "tensor":
        a.type = onnx.AttributeProto.TENSOR
        a.t.CopyFrom(helper.make_tensor("t", TensorProto.FLOAT, [2], [1.0, 2.0]))
    elif kind == "graph":
        a.type = onnx.AttributeProto.GRAPH
        a.g.CopyFrom(_small_graph())
    else:  # the declared type no longer says which field holds the value
        a.type = draw(st.sampled_from(list(onnx.AttributeProto.AttributeType.values())))


def _small_graph():
    return helper.make_graph(
        [helper.make_node("Identity", ["a"], ["b"])],
        "sub",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("b", TensorProto.FLOAT, [1])],
    )


def _elem_type(draw, model) -> None:
    graph = model.graph
    typed = [v.type.tensor_type for v in _values(graph) if v.type.HasField("tensor_type")]
    if graph.initializer and (not typed or draw(st.booleans())):
        graph.initializer[draw(st.integers(0, len(graph.initializer) - 1))].data_type = draw(
            st.sampled_from(ELEM_TYPES)
        )
    elif typed:
        typed[draw(st.integers(0, len(typed) - 1))].elem_type = draw(st.sampled_from(ELEM_TYPES))


def _opset(draw, model) -> None:
    if not model.opset_import or draw(st.integers(0, 3)) == 0:
        o = model.opset_import.add()
        o.domain, o.version = draw(st.sampled_from(DOMAINS)), draw(st.sampled_from(OPSETS))
        return
    o = model.opset_import[draw(st.integers(0, len(model.opset_import) - 1))]
    if draw(st.booleans()):
        o.version = draw(st.sampled_from(OPSETS))
    else:
        o.domain = draw(st.sampled_from(DOMAINS))
    if draw(st.integers(0, 3)) == 0 and model.graph.node:
        model.graph.node[0].domain = draw(st.sampled_from(DOMAINS))


def _op_type(draw, model) -> None:
    if model.graph.node:
        model.graph.node[draw(st.integers(0, len(model.graph.node) - 1))].op_type = draw(
            st.sampled_from(OP_TYPES)
        )


def _rename(draw, model) -> None:
    """Give a value, a node output or an initializer another value's name."""
    graph = model.graph
    name = draw(st.sampled_from(_names(graph)))
    targets = [*_values(graph), *graph.initializer]
    if graph.node and draw(st.booleans()):
        node = graph.node[draw(st.integers(0, len(graph.node) - 1))]
        field = node.output if node.output and draw(st.booleans()) else node.input
        if field:
            field[draw(st.integers(0, len(field) - 1))] = name
            return
    if targets:
        targets[draw(st.integers(0, len(targets) - 1))].name = name


def _cycle(draw, model) -> None:
    """Feed a node the output of itself or of a later node."""
    nodes = model.graph.node
    if not nodes:
        return
    i = draw(st.integers(0, len(nodes) - 1))
    j = draw(st.integers(i, len(nodes) - 1))
    if nodes[j].output:
        if nodes[i].input:
            nodes[i].input[draw(st.integers(0, len(nodes[i].input) - 1))] = nodes[j].output[0]
        else:
            nodes[i].input.append(nodes[j].output[0])


def _raw_data(draw, model) -> None:
    tensors = list(model.graph.initializer)
    tensors += [a.t for n in model.graph.node for a in n.attribute if a.HasField("t")]
    if not tensors:
        return
    t = tensors[draw(st.integers(0, len(tensors) - 1))]
    try:
        raw = t.raw_data or onnx.numpy_helper.to_array(t).tobytes()
    except Exception:  # noqa: BLE001 - an earlier mutation broke the tensor already
        raw = bytes(t.raw_data)
    action = draw(st.sampled_from(("cut", "grow", "empty", "odd")))
    for name in ("float_data", "int32_data", "int64_data", "double_data", "uint64_data"):
        t.ClearField(name)
    if action == "cut":
        t.raw_data = raw[: draw(st.integers(0, max(0, len(raw) - 1)))]
    elif action == "grow":
        t.raw_data = raw + bytes(draw(st.integers(1, 64)))
    elif action == "empty":
        t.raw_data = b""
    else:
        t.raw_data = raw + b"\x01"


def _function(draw, model) -> None:
    """Add a model-local function, and maybe call it from a node."""
    f = model.functions.add()
    f.name, f.domain = "local", draw(st.sampled_from(["custom", ""]))
    f.input.append("a")
    f.output.append("b")
    f.node.add().CopyFrom(helper.make_node("Relu", ["a"], ["b"]))
    f.opset_import.add().CopyFrom(helper.make_opsetid("", 13))
    if model.graph.node and draw(st.booleans()):
        node = model.graph.node[draw(st.integers(0, len(model.graph.node) - 1))]
        node.op_type, node.domain = f.name, f.domain
        if f.domain and not any(o.domain == f.domain for o in model.opset_import):
            model.opset_import.add().CopyFrom(helper.make_opsetid(f.domain, 1))


STRUCTURAL = [
    _dims,
    _repeated,
    _attribute,
    _elem_type,
    _opset,
    _op_type,
    _rename,
    _cycle,
    _raw_data,
    _function,
]


@st.composite
def structurally_mutated(draw) -> bytes:
    model = onnx.ModelProto()
    try:
        model.ParseFromString(draw(seeds()))
    except Exception:  # noqa: BLE001 - every seed parses; keep the strategy total anyway
        return b""
    for _ in range(draw(st.integers(1, 3))):
        draw(st.sampled_from(STRUCTURAL))(draw, model)
    return model.SerializeToString()


@fuzz_settings(CI_EXAMPLES["onnx-structure"])
@given(model=structurally_mutated(), seed=st.integers(0, 2**32 - 1))
def test_fuzz_onnx_structure(model, seed):
    check_mutant(model, seed)


def test_seeds_import():
    """The seeds are worth mutating: most node-test seeds import as they are."""
    imported = 0
    for name in NODE_TESTS[::10]:
        if only_byoc_errors(lambda: import_program(node_model(name), where=WHERE)) is not None:  # noqa: B023
            imported += 1
    assert imported >= len(NODE_TESTS[::10]) // 2, (imported, len(NODE_TESTS[::10]))
    assert len(SHIPPED) >= 50
