"""The ExampleJSON runtime module: the guide's ExampleJsonModule without its limits.
Both example files (examples/*.examplejson) run and match a numpy expression of
their inputs; random DAGs of ranks 1-4 (with broadcasting) match the reference
evaluator exactly; the module saves and loads back; corrupt data and bad calls raise
RuntimeFailure."""

from __future__ import annotations

import hashlib
import json
import shutil

import numpy as np
import pytest
from conftest import EXAMPLES, random_array
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from byoc.api import evaluate, parse
from byoc.errors import ByocError, GraphError, RuntimeFailure
from byoc.runtime.examplejson_module import HEADER, MAGIC, VERSION, ExampleJsonModule
from byoc.runtime.interface import call
from byoc.spec import SHIPPED_BACKENDS

SEEDS = {
    "guide_subgraph": ("subgraph_0",),
    "tvm_external_runtime": ("json_rt_0", "json_rt_1"),
}
SHAPE = (10, 10)


def seed_module(name: str) -> ExampleJsonModule:
    return ExampleJsonModule.from_file(EXAMPLES / f"{name}.examplejson")


def guide_inputs(rng) -> list[np.ndarray]:
    return [random_array(rng, SHAPE, "float32") for _ in range(4)]


# ----------------------------------------------------------------------------- example files


@pytest.mark.parametrize("name", sorted(SEEDS))
def test_seed_matches_numpy(name, rng):
    module = seed_module(name)
    assert module.kind == "examplejson"
    assert module.symbols() == SEEDS[name]
    for symbol in SEEDS[name]:
        x, w0, w1, w2 = guide_inputs(rng)
        out = np.empty(SHAPE, dtype="float32")
        assert module.get_function(symbol)(x, w0, w1, w2, out) is None  # destination passing
        np.testing.assert_array_equal(out, ((x + w0) - w1) * w2)
        assert module.signature(symbol).outputs[0].shape == SHAPE


@pytest.mark.parametrize("name", sorted(SEEDS))
def test_from_text_equals_from_file(name, rng):
    path = EXAMPLES / f"{name}.examplejson"
    by_text = ExampleJsonModule.from_text(path.read_text())
    by_bytes = ExampleJsonModule.from_text(path.read_bytes().replace(b"\n", b"\r\n"))
    args = guide_inputs(rng)
    for symbol in SEEDS[name]:
        want = call(seed_module(name), symbol, *args)
        for module in (by_text, by_bytes):
            np.testing.assert_array_equal(call(module, symbol, *args)[0], want[0])


def test_noncontiguous_inputs_are_read(rng):
    module = seed_module("guide_subgraph")
    x, w0, w1, w2 = (a.T for a in guide_inputs(rng))  # Fortran-ordered views
    (out,) = call(module, "subgraph_0", x, w0, w1, w2)
    np.testing.assert_array_equal(out, ((x + w0) - w1) * w2)


class DLPackOnly:
    """A tensor that is not a numpy array but speaks DLPack."""

    def __init__(self, array: np.ndarray) -> None:
        self.array = array

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def test_dlpack_arguments(rng):
    module = seed_module("guide_subgraph")
    x, w0, w1, w2 = guide_inputs(rng)
    out = np.zeros(SHAPE, dtype="float32")
    module.get_function("subgraph_0")(DLPackOnly(x), w0, DLPackOnly(w1), w2, DLPackOnly(out))
    np.testing.assert_array_equal(out, ((x + w0) - w1) * w2)


# ---------------------------------------------------------------------- random DAGs


@st.composite
def examplejson_dags(draw) -> str:
    """ExampleJSON text of 1-3 subgraphs: ranks 1-4, inputs broadcasting against each
    other (some extents 1), and ops reading any earlier id (a DAG, dead nodes too)."""
    text = []
    for k in range(draw(st.integers(1, 3))):
        rank = draw(st.integers(1, 4))
        base = draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank))
        n_inputs, n_ops = draw(st.integers(1, 4)), draw(st.integers(1, 8))
        ids = draw(
            st.lists(st.integers(0, 999), min_size=n_inputs + n_ops, max_size=n_inputs + n_ops, unique=True)
        )
        pad = draw(st.sampled_from(["", "  ", "\t"]))
        lines = [f"subgraph_{k}"]
        shapes: dict[int, tuple[int, ...]] = {}
        for i in ids[:n_inputs]:
            ones = draw(st.lists(st.booleans(), min_size=rank, max_size=rank))
            shapes[i] = tuple(1 if one else d for d, one in zip(base, ones))
            lines.append(f"{pad}input {i} {' '.join(map(str, shapes[i]))}")
        for i in ids[n_inputs:]:
            a, b = draw(st.sampled_from(sorted(shapes))), draw(st.sampled_from(sorted(shapes)))
            shapes[i] = tuple(np.broadcast_shapes(shapes[a], shapes[b]))
            token = draw(st.sampled_from(("add", "sub", "mul")))
            lines.append(f"{pad}{token} {i} inputs: {a} {b} shape: {' '.join(map(str, shapes[i]))}")
        text.append("\n".join(lines) + "\n")
    return "".join(text)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=examplejson_dags(), seed=st.integers(0, 2**32 - 1))
def test_random_dags_match_reference(text, seed):
    rng = np.random.default_rng(seed)
    module = ExampleJsonModule.from_text(text)
    program = parse(text, "examplejson")
    assert module.symbols() == tuple(fn.name for fn in program.functions)
    for fn in program.functions:
        args = [random_array(rng, p.type.shape, p.type.dtype) for p in fn.params]
        want = evaluate(fn, {p.name: a for p, a in zip(fn.params, args)})
        got = call(module, fn.name, *args)
        assert [(g.shape, g.dtype) for g in got] == [(w.shape, w.dtype) for w in want]
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)


def test_rank0_and_long_chain(rng):
    """Rank 0 (an empty `shape:`) and a 200-node chain in which every node reads the
    two before it."""
    lines = ["deep", "input 0", "input 1"] + [
        f"sub {i} inputs: {i - 1} {i - 2} shape:" for i in range(2, 200)
    ]
    module = ExampleJsonModule.from_text("\n".join(lines))
    a, b = random_array(rng, (), "float32"), random_array(rng, (), "float32")
    (out,) = call(module, "deep", a, b)
    values = [a, b]
    for _ in range(2, 200):
        values.append(values[-1] - values[-2])
    assert out.shape == () and out == values[-1]


# ------------------------------------------------------------------- token tables


def test_tokens_given_by_the_caller(rng):
    text = "g\n input 0 3\n input 1 3\n plus 2 inputs: 0 1 shape: 3\n times 3 inputs: 2 0 shape: 3\n"
    module = ExampleJsonModule.from_text(text, tokens={"plus": "add", "times": "multiply"})
    x, y = random_array(rng, (3,), "float32"), random_array(rng, (3,), "float32")
    np.testing.assert_array_equal(call(module, "g", x, y)[0], (x + y) * x)
    with pytest.raises(GraphError, match="unknown op token 'plus'"):
        ExampleJsonModule.from_text(text)


def test_tokens_from_a_spec_dir(tmp_path, rng):
    """Spec-only extensibility: divide's token renamed to `div` in a copy of the shipped
    YAML runs with no code change."""
    shipped = (SHIPPED_BACKENDS / "examplejson.yaml").read_text()
    spec = shipped.replace("  divide: {token: divide}\n", "  divide: {token: div}\n")
    assert spec != shipped
    (tmp_path / "examplejson.yaml").write_text(spec)
    text = "q\ninput 0 4\ninput 1 4\ndiv 2 inputs: 0 1 shape: 4\n"
    module = ExampleJsonModule.from_text(text, spec_path=tmp_path)
    x, y = random_array(rng, (4,), "float32"), random_array(rng, (4,), "float32")
    np.testing.assert_array_equal(call(module, "q", x, y)[0], x / y)
    assert module.tokens["div"] == "divide"


def test_bad_backend_for_tokens():
    with pytest.raises(RuntimeFailure, match="not an examplejson one"):
        ExampleJsonModule.from_text("g\ninput 0 1\nadd 1 inputs: 0 0 shape: 1\n", backend="json")
    with pytest.raises(RuntimeFailure, match="cannot read the op tokens"):
        ExampleJsonModule.from_text("g\ninput 0 1\nadd 1 inputs: 0 0 shape: 1\n", backend="nosuch")


def test_malformed_text_reports_line_and_column():
    with pytest.raises(ByocError) as info:
        ExampleJsonModule.from_text("g\ninput 0 2\nadd 1 inputs: 0 7 shape: 2\n", file="bad.examplejson")
    assert info.value.location is not None and info.value.location.line == 3


def test_missing_file(tmp_path):
    with pytest.raises(RuntimeFailure, match="cannot read"):
        ExampleJsonModule.from_file(tmp_path / "absent.examplejson")


# ------------------------------------------------------------------------ bad calls


@pytest.fixture
def guide():
    return seed_module("guide_subgraph")


def test_unknown_symbol(guide):
    with pytest.raises(RuntimeFailure, match="unknown subgraph 'subgraph_1'") as info:
        guide.get_function("subgraph_1")
    assert "subgraph_0" in info.value.hint
    with pytest.raises(RuntimeFailure):
        guide.signature("nope")


def bad_calls(rng):
    x = [random_array(rng, SHAPE, "float32") for _ in range(4)]
    out = np.zeros(SHAPE, dtype="float32")
    read_only = np.zeros(SHAPE, dtype="float32")
    read_only.flags.writeable = False
    return {
        "too few": ((*x,), "expected 5 arguments, got 4"),
        "too many": ((*x, out, out), "expected 5 arguments, got 6"),
        "dtype": ((x[0].astype("float64"), *x[1:], out), r"argument 0 \(input 'v0'\) is float64\[10, 10\]"),
        "shape": ((*x[:3], x[3][:5], out), r"argument 3 \(input 'v3'\) is float32\[5, 10\]"),
        "output dtype": ((*x, out.astype("int32")), r"argument 4 \(output 0\) is int32"),
        "not contiguous": ((*x, np.empty((10, 20), dtype="float32")[:, ::2]), "not C-contiguous"),
        "fortran output": ((*x, np.asfortranarray(out)), "not C-contiguous"),
        "read-only": ((*x, read_only), "read-only"),
        "not an array": (([[0.0] * 10] * 10, *x[1:], out), "must be an array"),
    }


@pytest.mark.parametrize(
    "case",
    [
        "too few",
        "too many",
        "dtype",
        "shape",
        "output dtype",
        "not contiguous",
        "fortran output",
        "read-only",
        "not an array",
    ],
)
def test_bad_calls_raise(guide, rng, case):
    args, message = bad_calls(rng)[case]
    with pytest.raises(RuntimeFailure, match=message) as info:
        guide.get_function("subgraph_0")(*args)
    assert "subgraph_0" in str(info.value)


# ------------------------------------------------------------------- save and load


@pytest.mark.parametrize("name", sorted(SEEDS))
def test_save_load_round_trip(name, rng):
    module = seed_module(name)
    data = module.save()
    assert data.startswith(MAGIC)
    again = ExampleJsonModule.load(data)
    assert again.symbols() == module.symbols() and again.tokens == module.tokens
    assert again.text == module.text and again.file == module.file
    assert again.save() == data
    args = guide_inputs(rng)
    for symbol in module.symbols():
        np.testing.assert_array_equal(
            call(again, symbol, *args)[0], ((args[0] + args[1]) - args[2]) * args[3]
        )


def test_load_keeps_custom_tokens(rng):
    text = "g\ninput 0 2\nplus 1 inputs: 0 0 shape: 2\n"
    module = ExampleJsonModule.load(ExampleJsonModule.from_text(text, tokens={"plus": "add"}).save())
    x = random_array(rng, (2,), "float32")
    np.testing.assert_array_equal(call(module, "g", x)[0], x + x)


def blob(payload: bytes, *, magic: bytes = MAGIC, version: int = VERSION, length: int | None = None) -> bytes:
    size = len(payload) if length is None else length
    return HEADER.pack(magic, version, size, hashlib.sha256(payload).digest()) + payload


def corrupt_blobs() -> dict[str, tuple[object, str]]:
    good = seed_module("guide_subgraph").save()
    payload = good[HEADER.size :]
    flipped = bytearray(good)
    flipped[-5] ^= 0x01
    fields = json.loads(payload)
    return {
        "empty": (b"", "truncated"),
        "header only": (good[: HEADER.size], "truncated"),
        "half": (good[: len(good) // 2], "truncated"),
        "one byte short": (good[:-1], "truncated"),
        "trailing bytes": (good + b"x", "corrupt"),
        "flipped byte": (bytes(flipped), "sha256"),
        "bad magic": (b"NOTEJSON" + good[8:], "bad magic"),
        "version 2": (blob(payload, version=2), "version 2 is not supported"),
        "version 0": (blob(payload, version=0), "version 0 is not supported"),
        "not json": (blob(b"\xff\xfe not json"), "not JSON"),
        "json list": (blob(b"[1, 2]"), "needs text, tokens and file"),
        "no tokens": (blob(json.dumps({"text": fields["text"], "file": None}).encode()), "needs text"),
        "bad token value": (
            blob(json.dumps({**fields, "tokens": {"add": 3}}).encode()),
            "needs text, tokens and file",
        ),
        "text does not parse": (
            blob(json.dumps({**fields, "text": "g\nadd 1 inputs: 0 shape: 1\n"}).encode()),
            "does not parse",
        ),
        "not bytes": ("a string", "from bytes, not str"),
    }


@pytest.mark.parametrize("case", sorted(corrupt_blobs()))
def test_corrupt_data_raises(case):
    data, message = corrupt_blobs()[case]
    with pytest.raises(RuntimeFailure, match=message):
        ExampleJsonModule.load(data)  # type: ignore[arg-type]


def test_every_truncation_is_caught():
    good = seed_module("tvm_external_runtime").save()
    for cut in range(0, len(good), 7):
        with pytest.raises(RuntimeFailure):
            ExampleJsonModule.load(good[:cut])


def test_loaded_from_copied_file(tmp_path, rng):
    path = tmp_path / "copy.examplejson"
    shutil.copy(EXAMPLES / "guide_subgraph.examplejson", path)
    module = ExampleJsonModule.load(ExampleJsonModule.from_file(path).save())
    assert module.file == str(path)
    args = guide_inputs(rng)
    np.testing.assert_array_equal(
        call(module, "subgraph_0", *args)[0], ((args[0] + args[1]) - args[2]) * args[3]
    )
