"""End to end: graphs go through parse, generate, compile, load and run on every
backend, through the Python API (``byoc.build``, ``byoc.runtime.load``) and the
command line (``byoc build``, ``byoc run``), and every result is checked against
numpy computed here from the inputs, or against the numpy reference evaluator."""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from conftest import EXAMPLES, GUIDE_WHOLE_GRAPH
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

import byoc
import byoc.runtime
from byoc import cli
from byoc.api import evaluate, parse
from byoc.building import build
from byoc.runtime.executor import GraphExecutor

ROOT = Path(__file__).resolve().parent.parent
SHIPPED_SPECS = ROOT / "spec" / "backends"
BACKENDS = ("ccompiler", "engine", "examplejson", "json")
EXAMPLEJSON_FILES = ("guide_subgraph.examplejson", "tvm_external_runtime.examplejson")
WEIGHTS = tuple(f"w{k}" for k in range(8))
TABLE_HEADER = ("output", "shape", "dtype", "max abs error", "status")


@pytest.fixture(scope="module", autouse=True)
def cache_dir(tmp_path_factory):
    """A private compile cache for this module (inherited by subprocesses)."""
    root = tmp_path_factory.mktemp("byoc-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("BYOC_CACHE_DIR", str(root))
        yield root


@pytest.fixture(scope="module")
def guide_files(tmp_path_factory) -> dict[str, Path]:
    """The guide's whole graph, offloaded to each backend."""
    out = tmp_path_factory.mktemp("guide")
    text = GUIDE_WHOLE_GRAPH.read_text()
    assert text.count("@ccompiler") == 2
    files = {"ccompiler": GUIDE_WHOLE_GRAPH}
    for backend in BACKENDS[1:]:
        path = out / f"guide_{backend}.graph"
        path.write_text(text.replace("@ccompiler", f"@{backend}"))
        files[backend] = path
    return files


@pytest.fixture(scope="module")
def bundles(guide_files, tmp_path_factory) -> dict[str, Path]:
    """One bundle per backend, written by ``byoc build``."""
    out = tmp_path_factory.mktemp("bundles")
    paths = {}
    for backend, source in guide_files.items():
        path = out / f"guide_{backend}.byoc"
        assert cli.main(["build", str(source), "-o", str(path)]) == 0
        paths[backend] = path
    return paths


def guide_inputs(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {name: rng.uniform(-3, 3, size=(10, 10)).astype(np.float32) for name in ("x", *WEIGHTS)}


def guide_expected(inputs: dict[str, np.ndarray]) -> np.ndarray:
    x = inputs["x"]
    w0, w1, w2, w3, w4, w5, w6, w7 = (inputs[w] for w in WEIGHTS)
    return np.concatenate((((x + w0) - w1) * w2, ((x + w3) - w4) * w5, (x + w6) - w7), axis=0)


def assert_guide_output(outputs, inputs) -> None:
    assert isinstance(outputs, tuple) and len(outputs) == 1
    (out,) = outputs
    assert out.shape == (30, 10) and out.dtype == np.float32
    np.testing.assert_allclose(out, guide_expected(inputs), rtol=1e-6, atol=1e-6)


@pytest.fixture
def calls(monkeypatch) -> list[tuple[dict[str, np.ndarray], tuple[np.ndarray, ...]]]:
    """Every (inputs, outputs) a GraphExecutor call sees, e.g. inside ``byoc run``."""
    seen = []
    original = GraphExecutor.__call__

    def recording(self, **inputs):
        outputs = original(self, **inputs)
        seen.append(({k: np.array(v) for k, v in inputs.items()}, outputs))
        return outputs

    monkeypatch.setattr(GraphExecutor, "__call__", recording)
    return seen


def table_rows(stdout: str) -> list[list[str]]:
    """The rows of every result table in ``byoc run`` output (header excluded)."""
    rows = []
    lines = stdout.splitlines()
    for k, line in enumerate(lines):
        if line.split() == ["output", "shape", "dtype", "max", "abs", "error", "status"]:
            for row in lines[k + 1 :]:
                if not row.startswith("  "):
                    break
                rows.append(re.split(r"\s{2,}", row.strip()))
    return rows


def assert_run_ok(rc: int, out: str, err: str, n_rows: int = 1) -> None:
    assert rc == 0, out + err
    assert "Traceback" not in err and err == ""
    assert all(word in out for word in TABLE_HEADER)
    rows = table_rows(out)
    assert len(rows) == n_rows
    for row in rows:
        assert row[-1] == "ok", row
    stages = next(line for line in out.splitlines() if line.startswith("stages: "))
    assert " run " in stages and " reference " in stages
    assert "result: every output matches the numpy reference" in out


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = cli.main([str(a) for a in argv])
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


# ------------------------------------------------------------------ the guide's whole graph


@pytest.mark.parametrize("backend", BACKENDS)
def test_guide_whole_graph_api(backend, guide_files):
    model = build(guide_files[backend])
    assert model.graph_names == ("main",)
    assert [m["backend"] for m in model.manifest["modules"]] == [backend]
    for seed in (0, 1):
        inputs = guide_inputs(seed)
        assert_guide_output(model(**inputs), inputs)
        assert_guide_output(model.run("main", **inputs), inputs)
    # the executor API gives the same
    inputs = guide_inputs(2)
    ex = model.executor("main")
    for name, value in inputs.items():
        ex.set_input(name, value)
    ex.run()
    assert_guide_output((ex.get_output(0),), inputs)
    # an explicit --backend that agrees with the regions is fine
    assert_guide_output(build(guide_files[backend], backends=[backend])(**inputs), inputs)


def test_build_from_a_parsed_program(guide_files):
    program = byoc.parse_file(str(guide_files["json"]))
    inputs = guide_inputs(3)
    assert_guide_output(byoc.build(program)(**inputs), inputs)


@pytest.mark.parametrize("backend", BACKENDS)
def test_guide_whole_graph_cli(backend, guide_files, capsys, calls):
    rc, out, err = run_cli(capsys, "run", guide_files[backend])
    assert_run_ok(rc, out, err)
    assert f"(backends: {backend})" in out
    assert "graph main: 9 input(s), 1 output(s)" in out
    (row,) = table_rows(out)
    assert row[:3] == ["0", "[30, 10]", "float32"] and row[4] == "ok"
    assert float(row[3]) <= 1e-5
    # the outputs the CLI computed are numpy's, from the inputs it drew
    ((inputs, outputs),) = calls
    assert sorted(inputs) == sorted(["x", *WEIGHTS])
    assert_guide_output(outputs, inputs)


def test_guide_whole_graph_subprocess(guide_files):
    proc = subprocess.run(
        [sys.executable, "-m", "byoc", "run", str(guide_files["ccompiler"])],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert_run_ok(proc.returncode, proc.stdout, proc.stderr)


# ------------------------------------------------------------------ bundles


@pytest.mark.parametrize("backend", BACKENDS)
def test_guide_whole_graph_from_a_bundle(backend, bundles, capsys, calls):
    path = bundles[backend]
    assert path.stat().st_size > 0
    rc, out, err = run_cli(capsys, "run", path)
    assert_run_ok(rc, out, err)
    ((inputs, outputs),) = calls
    assert_guide_output(outputs, inputs)
    model = byoc.runtime.load(path)
    assert model.graph_names == ("main",)
    inputs = guide_inputs(4)
    assert_guide_output(model(**inputs), inputs)
    assert_guide_output(byoc.runtime.load(str(path)).run("main", **inputs), inputs)


def test_build_prints_a_summary(guide_files, tmp_path, capsys):
    path = tmp_path / "model.byoc"
    rc, out, err = run_cli(capsys, "build", guide_files["ccompiler"], "-o", path)
    assert rc == 0 and err == ""
    assert f"wrote {path}" in out and "graphs: main" in out and "ccompiler (library)" in out


def test_bundle_rejects_backend_and_options(bundles, capsys):
    rc, out, err = run_cli(capsys, "run", bundles["json"], "--backend", "json")
    assert rc == 2 and "do not apply to a built bundle" in err and "Traceback" not in err


LOAD_WITHOUT_GENERATOR = """
import json, sys
import numpy as np
import byoc.runtime

results = {}
for path in sys.argv[1:]:
    model = byoc.runtime.load(path)
    rng = np.random.default_rng(5)
    inputs = {n: rng.uniform(-3, 3, size=(10, 10)).astype(np.float32)
              for n in ["x"] + ["w%d" % k for k in range(8)]}
    (out,) = model(**inputs)
    x = inputs["x"]
    w = [inputs["w%d" % k] for k in range(8)]
    want = np.concatenate((((x + w[0]) - w[1]) * w[2], ((x + w[3]) - w[4]) * w[5], (x + w[6]) - w[7]), axis=0)
    results[path] = bool(out.shape == want.shape and np.allclose(out, want, rtol=1e-6, atol=1e-6))
generator = sorted(m for m in sys.modules if m == "byoc.generator" or m.startswith("byoc.generator."))
print(json.dumps({"results": results, "generator": generator}))
"""


def test_load_does_not_import_the_generator(bundles):
    paths = [str(bundles[b]) for b in BACKENDS]
    proc = subprocess.run(
        [sys.executable, "-c", LOAD_WITHOUT_GENERATOR, *paths], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["generator"] == []
    assert report["results"] == dict.fromkeys(paths, True)


# ------------------------------------------------------------------ ExampleJSON texts


def _ejson_expected(inputs: dict[str, np.ndarray]) -> np.ndarray:
    return ((inputs["v0"] + inputs["v1"]) - inputs["v2"]) * inputs["v3"]


@pytest.mark.parametrize("backend", [None, "ccompiler", "json", "engine"])
@pytest.mark.parametrize("name", EXAMPLEJSON_FILES)
def test_examplejson_texts_run(name, backend, capsys, calls):
    argv = ["run", EXAMPLES / name] + (["--backend", backend] if backend else [])
    rc, out, err = run_cli(capsys, *argv)
    graphs = ["subgraph_0"] if name.startswith("guide") else ["json_rt_0", "json_rt_1"]
    assert_run_ok(rc, out, err, n_rows=len(graphs))
    assert f"(backends: {backend or 'examplejson'})" in out
    for graph in graphs:
        assert f"graph {graph}: 4 input(s), 1 output(s)" in out
    assert len(calls) == len(graphs)
    for inputs, (got,) in calls:
        assert got.shape == (10, 10) and got.dtype == np.float32
        np.testing.assert_allclose(got, _ejson_expected(inputs), rtol=1e-6, atol=1e-6)


def test_examplejson_api_runs_every_subgraph():
    model = build(EXAMPLES / "tvm_external_runtime.examplejson", backends=["json"])
    assert model.graph_names == ("json_rt_0", "json_rt_1")
    rng = np.random.default_rng(1)
    inputs = {f"v{k}": rng.uniform(-3, 3, (10, 10)).astype(np.float32) for k in range(4)}
    for graph in model.graph_names:
        (got,) = model.run(graph, **inputs)
        np.testing.assert_allclose(got, _ejson_expected(inputs), rtol=1e-6)


# ------------------------------------------------------------------ spec-only extensibility


def edited_ccompiler(directory: Path, edit) -> Path:
    """A copy of ccompiler.yaml in ``directory``, changed by ``edit(data)`` with a
    round-trip load and dump (comments and order kept)."""
    yaml = YAML()
    data = yaml.load(SHIPPED_SPECS / "ccompiler.yaml")
    edit(data)
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / "ccompiler.yaml", "w") as handle:
        yaml.dump(data, handle)
    return directory


def _add_divide(data) -> None:
    divide = copy.deepcopy(data["ops"]["add"])
    divide["vars"]["operator"] = "/"
    data["ops"]["divide"] = divide


DIVIDE_GRAPH = """\
graph main(a: float32[5], b: float32[5], x: float32[3, 4], y: float32[3, 4],
           p: float64[2, 2, 3], q: float64[2, 2, 3]) {
  r1, r2 = @ccompiler {
    return divide(add(a, b), b), divide(x, subtract(y, x))
  }
  r3 = @ccompiler { return divide(p, q) }
  return r1, r2, r3
}
"""


def _divide_inputs(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)

    def away_from_zero(shape, dtype):
        v = rng.uniform(0.5, 3, size=shape) * rng.choice([-1, 1], size=shape)
        return v.astype(dtype)

    x = away_from_zero((3, 4), np.float32)
    return {
        "a": away_from_zero(5, np.float32),
        "b": away_from_zero(5, np.float32),
        "x": x,
        "y": x + np.float32(1.5),  # y - x stays away from zero
        "p": away_from_zero((2, 2, 3), np.float64),
        "q": away_from_zero((2, 2, 3), np.float64),
    }


def test_spec_only_extensibility(tmp_path, capsys, calls):
    specs = edited_ccompiler(tmp_path / "specs", _add_divide)
    text = (specs / "ccompiler.yaml").read_text()
    assert "divide:" in text and "# ccompiler: the C codegen" in text  # comments kept
    graph = tmp_path / "divide.graph"
    graph.write_text(DIVIDE_GRAPH)

    # the shipped spec has no divide
    rc, out, err = run_cli(capsys, "run", graph)
    assert rc == 2 and "divide" in err and "Traceback" not in err

    rc, out, err = run_cli(capsys, "run", graph, "--spec-path", specs)
    assert_run_ok(rc, out, err, n_rows=3)
    ((inputs, (r1, r2, r3)),) = calls
    np.testing.assert_allclose(r1, (inputs["a"] + inputs["b"]) / inputs["b"], rtol=1e-6)
    np.testing.assert_allclose(r2, inputs["x"] / (inputs["y"] - inputs["x"]), rtol=1e-6)
    np.testing.assert_allclose(r3, inputs["p"] / inputs["q"], rtol=1e-14)

    model = build(graph, spec_path=[str(specs)])
    inputs = _divide_inputs(0)
    r1, r2, r3 = model(**inputs)
    np.testing.assert_allclose(r1, (inputs["a"] + inputs["b"]) / inputs["b"], rtol=1e-6)
    np.testing.assert_allclose(r2, inputs["x"] / (inputs["y"] - inputs["x"]), rtol=1e-6)
    np.testing.assert_allclose(r3, inputs["p"] / inputs["q"], rtol=1e-14)
    assert (r1.dtype, r2.dtype, r3.dtype) == (np.float32, np.float32, np.float64)
    # the generated C uses the new op's operator
    assert "/" in model.members["ccompiler.c"].decode()


def test_wrong_backend_result_exits_1(tmp_path, capsys, guide_files):
    def add_is_minus(data):
        data["ops"]["add"]["vars"]["operator"] = "-"

    specs = edited_ccompiler(tmp_path / "specs", add_is_minus)
    rc, out, err = run_cli(capsys, "run", guide_files["ccompiler"], "--spec-path", specs)
    assert rc == 1, out + err
    assert "MISMATCH" in out and "Traceback" not in err
    assert "result: 1 output(s) differ from the numpy reference" in out


# ------------------------------------------------------------------ --inputs and --seed


@pytest.fixture
def npz_inputs(tmp_path):
    def write(name="data.npz", **arrays):
        path = tmp_path / name
        np.savez(path, **arrays)
        return path

    return write


def test_inputs_npz_are_used(guide_files, npz_inputs, capsys, calls):
    inputs = guide_inputs(11)
    path = npz_inputs(**inputs)
    rc, out, err = run_cli(capsys, "run", guide_files["ccompiler"], "--inputs", path)
    assert_run_ok(rc, out, err)
    ((seen, outputs),) = calls
    assert seen.keys() == inputs.keys()
    for name in inputs:
        np.testing.assert_array_equal(seen[name], inputs[name])
    assert_guide_output(outputs, inputs)


def test_inputs_npz_for_several_graphs(npz_inputs, capsys, calls):
    rng = np.random.default_rng(3)
    arrays = {
        f"{g}/v{k}": rng.uniform(-1, 1, (10, 10)).astype(np.float32)
        for g in ("json_rt_0", "json_rt_1")
        for k in range(4)
    }
    path = npz_inputs(**arrays)
    rc, out, err = run_cli(capsys, "run", EXAMPLES / "tvm_external_runtime.examplejson", "--inputs", path)
    assert_run_ok(rc, out, err, n_rows=2)
    for (seen, (got,)), graph in zip(calls, ("json_rt_0", "json_rt_1")):
        for k in range(4):
            np.testing.assert_array_equal(seen[f"v{k}"], arrays[f"{graph}/v{k}"])
        np.testing.assert_allclose(got, _ejson_expected(seen), rtol=1e-6)


def _bad_inputs_cases():
    good = guide_inputs(0)
    renamed = dict(good)
    renamed["W7"] = renamed.pop("w7")
    missing = {k: v for k, v in good.items() if k != "w3"}
    shape = dict(good, x=good["x"][:, :9].copy())
    dtype = dict(good, w1=good["w1"].astype(np.float64))
    extra = dict(good, w8=good["w0"])
    return [
        ("renamed", renamed, ["'w7'"]),
        ("missing", missing, ["no array 'w3'"]),
        ("shape", shape, ["'x'", "float32[10, 9]", "float32[10, 10]"]),
        ("dtype", dtype, ["'w1'", "float64", "float32[10, 10]"]),
        ("extra", extra, ["'w8'"]),
    ]


BAD_INPUTS = _bad_inputs_cases()


@pytest.mark.parametrize("arrays,words", [c[1:] for c in BAD_INPUTS], ids=[c[0] for c in BAD_INPUTS])
def test_bad_inputs_arrays(arrays, words, guide_files, npz_inputs, capsys):
    path = npz_inputs(**arrays)
    rc, out, err = run_cli(capsys, "run", guide_files["ccompiler"], "--inputs", path)
    assert rc == 2, out + err
    assert "Traceback" not in err and err.startswith("usage error: --inputs")
    for word in words:
        assert word in err


def test_bad_inputs_files(guide_files, tmp_path, capsys):
    inputs = guide_inputs(0)
    pickled = tmp_path / "pickled.npz"
    objects = np.empty(2, dtype=object)
    objects[0], objects[1] = {"a": 1}, [1, 2]
    np.savez(pickled, **inputs, extra=objects)
    text = tmp_path / "data.npz"
    text.write_text("x = 1, 2, 3\n")
    single = tmp_path / "single.npy"
    np.save(single, inputs["x"])
    truncated = tmp_path / "truncated.npz"
    np.savez(truncated, **inputs)
    truncated.write_bytes(truncated.read_bytes()[:500])
    empty = tmp_path / "empty.npz"
    empty.write_bytes(b"")
    cases = [
        (pickled, "unpickles"),
        (text, "--inputs"),
        (single, "single array"),
        (truncated, "--inputs"),
        (empty, "--inputs"),
        (tmp_path / "absent.npz", "absent.npz"),
    ]
    for path, word in cases:
        rc, out, err = run_cli(capsys, "run", guide_files["ccompiler"], "--inputs", path)
        assert rc == 2, (path, out, err)
        assert "Traceback" not in err and word in err and str(path) in err, (path, err)


def test_seed_changes_inputs_deterministically(guide_files, capsys, calls):
    tables = []
    for seed in (1, 1, 2):
        rc, out, err = run_cli(capsys, "run", guide_files["json"], "--seed", str(seed))
        assert_run_ok(rc, out, err)
        tables.append(table_rows(out))
    assert tables[0] == tables[1]
    (in1, out1), (in1b, out1b), (in2, out2) = calls
    for name in in1:
        np.testing.assert_array_equal(in1[name], in1b[name])
    assert any(not np.array_equal(in1[name], in2[name]) for name in in1)
    np.testing.assert_array_equal(out1[0], out1b[0])
    assert not np.array_equal(out1[0], out2[0])
    for inputs, outputs in calls:
        assert_guide_output(outputs, inputs)


def test_seeded_integer_inputs(tmp_path, capsys, calls):
    graph = tmp_path / "ints.graph"
    graph.write_text(
        "graph main(a: int32[3, 2], b: int64[4]) {\n"
        "  r = @ccompiler { return multiply(a, subtract(a, a)) }\n"
        "  s = @json { return maximum(b, negative(b)) }\n"
        "  return r, s\n}\n"
    )
    rc, out, err = run_cli(capsys, "run", graph, "--seed", "9")
    assert_run_ok(rc, out, err, n_rows=2)
    ((inputs, (r, s)),) = calls
    assert inputs["a"].dtype == np.int32 and inputs["b"].dtype == np.int64
    np.testing.assert_array_equal(r, np.zeros((3, 2), np.int32))
    np.testing.assert_array_equal(s, np.abs(inputs["b"]))


# ------------------------------------------------------------------ random graphs


class Caps:
    """What one backend runs: dtypes, ranks and ops, whether its regions may hold
    constants, how many results a region may return, and its opt_level for tests."""

    def __init__(self, dtypes, ranks, ops, *, constants=True, outputs=3, opt=None):
        self.dtypes, self.ranks, self.ops = dtypes, ranks, ops
        self.constants, self.outputs, self.opt = constants, outputs, opt


ALL_DTYPES = ("float32", "float64", "int32", "int64")
ARITH = ("add", "subtract", "multiply")
UNARY = ("negative", "relu", "copy")
CAPS = {
    "ccompiler": Caps(ALL_DTYPES, (1, 2, 3, 4), ARITH),
    "json": Caps(ALL_DTYPES, (1, 2, 3, 4), (*ARITH, "maximum", "minimum", *UNARY)),
    "examplejson": Caps(("float32",), (1, 2, 3, 4), ARITH, constants=False, outputs=1),
    "engine": Caps(("float32",), (2,), ARITH, opt="0"),  # -O0: a C++ compile per example
}
# How many random graphs each test runs (one C or C++ compile per new graph).
RANDOM_EXAMPLES = {"ccompiler": 60, "json": 80, "examplejson": 40, "engine": 8, "ccompiler+json": 25}
LIMIT = 2**20  # bound on every value's magnitude, so that integers never overflow
HOST_OPS = ("add", "subtract", "maximum", "negative")


@st.composite
def random_graphs(draw, backends: tuple[str, ...]):
    """(DSL text, inputs) of a random graph with one to three regions, each on one of
    ``backends``: one dtype and shape throughout (the C macros do not broadcast),
    DAGs inside the regions, optional constants and host ops between and after them,
    several region results where the backend allows them."""
    dtype = draw(st.sampled_from([d for d in ALL_DTYPES if all(d in CAPS[b].dtypes for b in backends)]))
    rank = draw(st.sampled_from([r for r in range(1, 5) if all(r in CAPS[b].ranks for b in backends)]))
    shape = tuple(draw(st.lists(st.integers(1, 3), min_size=rank, max_size=rank)))
    type_text = f"{dtype}[{', '.join(map(str, shape))}]"
    size = int(np.prod(shape))
    params = [f"p{k}" for k in range(draw(st.integers(1, 3)))]
    outer = {p: 9 for p in params}  # name -> bound on |value|
    regions: list[str] = []
    counter = iter(range(1000))
    lines = []

    def binary_op(ops, a_bound, b_bound):
        op = draw(st.sampled_from([o for o in ops if o not in UNARY]))
        if op == "multiply" and a_bound * b_bound > LIMIT:
            op = "subtract"
        return op, (a_bound * b_bound if op == "multiply" else a_bound + b_bound)

    for _ in range(draw(st.integers(1, 3))):
        backend = draw(st.sampled_from(backends))
        caps = CAPS[backend]
        scope = dict(outer)
        body = []
        if caps.constants and draw(st.booleans()):
            name = f"k{next(counter)}"
            values = draw(st.lists(st.integers(-6, 6), min_size=size, max_size=size))
            texts = [f"{v / 2}" for v in values] if dtype.startswith("float") else map(str, values)
            body.append(f"{name} = const {type_text} [{', '.join(texts)}]")
            scope[name] = 6
        defined = []
        unary = [o for o in caps.ops if o in UNARY]
        for _ in range(draw(st.integers(1, 5))):
            names = sorted(scope)
            a, b = draw(st.sampled_from(names)), draw(st.sampled_from(names))
            name = f"t{next(counter)}"
            if unary and draw(st.integers(0, 3)) == 0:
                body.append(f"{name} = {draw(st.sampled_from(unary))}({a})")
                scope[name] = scope[a]
            else:
                op, scope[name] = binary_op(caps.ops, scope[a], scope[b])
                body.append(f"{name} = {op}({a}, {b})")
            defined.append(name)
        # results: the last value, then (where allowed) any values of the region
        results = [defined[-1]]
        if caps.outputs > 1:
            candidates = defined + [n for n in scope if n.startswith("k")]
            results += draw(st.lists(st.sampled_from(candidates), max_size=caps.outputs - 1))
        targets = [f"r{next(counter)}" for _ in results]
        regions += targets
        lines.append(f"  {', '.join(targets)} = @{backend} {{")
        lines += [f"    {line}" for line in body]
        lines.append(f"    return {', '.join(results)}")
        lines.append("  }")
        for target, result in zip(targets, results):
            outer[target] = scope[result]
        if draw(st.booleans()):  # a host op between or after regions
            a, b = draw(st.sampled_from(sorted(outer))), draw(st.sampled_from(sorted(outer)))
            op = draw(st.sampled_from(HOST_OPS))
            name = f"h{next(counter)}"
            if op == "negative":
                lines.append(f"  {name} = negative({a})")
                outer[name] = outer[a]
            else:
                lines.append(f"  {name} = {op}({a}, {b})")
                outer[name] = outer[a] + outer[b]
    returned = draw(st.lists(st.sampled_from(sorted(outer)), min_size=1, max_size=3))
    if not set(returned) & set(regions):
        returned.insert(0, regions[-1])
    head = ", ".join(f"{p}: {type_text}" for p in params)
    text = f"graph main({head}) {{\n" + "\n".join(lines) + f"\n  return {', '.join(returned)}\n}}\n"

    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if dtype.startswith("int"):
        inputs = {p: rng.integers(-9, 10, size=shape).astype(dtype) for p in params}
    else:
        inputs = {p: rng.uniform(-9, 9, size=shape).astype(dtype) for p in params}
    return text, inputs


def _check_random_graph(text: str, inputs: dict[str, np.ndarray], bundle_dir: Path) -> None:
    program = parse(text, "graph")
    options = {"engine.opt_level": CAPS["engine"].opt} if "@engine" in text else None
    model = build(program, options=options)
    want = evaluate(program.functions[0], inputs)
    got = model(**inputs)
    bundle = bundle_dir / "random.byoc"
    model.save(bundle)
    again = byoc.runtime.load(bundle)(**inputs)
    assert len(got) == len(want) == len(again)
    for g, w, a in zip(got, want, again):
        assert g.dtype == w.dtype and g.shape == w.shape, text
        np.testing.assert_array_equal(g, a)
        if g.dtype.kind == "i":
            np.testing.assert_array_equal(g, w, err_msg=text)
        else:
            rtol = 1e-6 if g.dtype == np.float32 else 1e-14
            np.testing.assert_allclose(g, w, rtol=rtol, atol=1e-6, err_msg=text)


@pytest.fixture(scope="module")
def bundle_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("random-bundles")


def _random_graph_test(key: str):
    @settings(
        max_examples=RANDOM_EXAMPLES[key],
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(case=random_graphs(tuple(key.split("+"))))
    def test(case, bundle_dir):
        text, inputs = case
        _check_random_graph(text, inputs, bundle_dir)

    test.__name__ = test.__qualname__ = f"test_random_graphs_{key.replace('+', '_')}"
    return test


test_random_graphs_ccompiler = _random_graph_test("ccompiler")
test_random_graphs_json = _random_graph_test("json")
test_random_graphs_examplejson = _random_graph_test("examplejson")
test_random_graphs_engine = _random_graph_test("engine")
test_random_graphs_ccompiler_json = _random_graph_test("ccompiler+json")


def test_random_graph_examples_total():
    assert sum(RANDOM_EXAMPLES.values()) >= 100


@pytest.mark.parametrize("backend", ["ccompiler", "engine", "json"])
def test_unused_values_in_a_region(backend, tmp_path):
    """A constant and a node that nothing uses (found by the random graphs: an
    unused constant was an unused static C array, which -Werror refused)."""
    graph = tmp_path / "unused.graph"
    graph.write_text(
        f"graph main(x: float32[2, 2]) {{\n  s = @{backend} {{\n"
        "    k = const float32[2, 2] [1, 2, 3, 4]\n    t = multiply(x, x)\n    return add(x, x)\n  }\n"
        "  return s\n}\n"
    )
    x = np.arange(4, dtype=np.float32).reshape(2, 2)
    (s,) = build(graph, options={"engine.opt_level": "0"} if backend == "engine" else None)(x=x)
    np.testing.assert_array_equal(s, x + x)


@pytest.mark.parametrize("backend", BACKENDS)
def test_empty_tensors(backend, tmp_path):
    graph = tmp_path / "empty.graph"
    graph.write_text(
        f"graph main(x: float32[0, 3], y: float32[0, 3]) {{\n"
        f"  s = @{backend} {{ return multiply(add(x, y), y) }}\n  return s, concatenate(s, x, axis=1)\n}}\n"
    )
    x = y = np.empty((0, 3), np.float32)
    s, c = build(graph, options={"engine.opt_level": "0"} if backend == "engine" else None)(x=x, y=y)
    assert s.shape == (0, 3) and c.shape == (0, 6) and s.dtype == c.dtype == np.float32


def test_mixed_backends_in_one_graph(capsys, tmp_path):
    graph = tmp_path / "mixed.graph"
    graph.write_text(
        textwrap.dedent(
            """\
            graph main(x: float32[4, 3], y: float32[4, 3]) {
              a = @ccompiler { return add(x, y) }
              b = @json { return relu(subtract(a, y)) }
              c = @engine { return multiply(a, b) }
              d = @examplejson { return subtract(c, x) }
              return concatenate(a, b, c, d, axis=1)
            }
            """
        )
    )
    rc, out, err = run_cli(capsys, "run", graph)
    assert_run_ok(rc, out, err)
    model = build(graph)
    assert sorted(m["backend"] for m in model.manifest["modules"]) == sorted(BACKENDS)
    rng = np.random.default_rng(0)
    x, y = (rng.uniform(-2, 2, (4, 3)).astype(np.float32) for _ in range(2))
    a = x + y
    b = np.maximum(a - y, 0)
    c = a * b
    (got,) = model(x=x, y=y)
    np.testing.assert_allclose(got, np.concatenate((a, b, c, c - x), axis=1), rtol=1e-6)
