"""``byoc run`` options end to end: --spec-path with edited specs, --inputs .npz files and --seed."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest
from conftest import EXAMPLES, run_cli
from e2e_support import (
    assert_guide_output,
    assert_run_ok,
    ejson_expected,
    guide_inputs,
    make_guide_files,
    record_calls,
    table_rows,
)
from ruamel.yaml import YAML

from byoc.building import build

ROOT = Path(__file__).resolve().parent.parent
SHIPPED_SPECS = ROOT / "spec" / "backends"


@pytest.fixture(scope="module")
def guide_files(tmp_path_factory) -> dict[str, Path]:
    """The guide's whole graph, offloaded to each backend."""
    return make_guide_files(tmp_path_factory)


@pytest.fixture
def calls(monkeypatch) -> list[tuple[dict[str, np.ndarray], tuple[np.ndarray, ...]]]:
    """Every (inputs, outputs) a GraphExecutor call sees, e.g. inside ``byoc run``."""
    return record_calls(monkeypatch)


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
        np.testing.assert_allclose(got, ejson_expected(seen), rtol=1e-6)


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


def test_run_says_where_the_ops_went(capsys):
    """The placement line counts every op once: each region's for its backend (a
    composite's ops each), the rest for the host, adding up to the graph's ops."""
    from byoc.api import parse_file

    fn = parse_file(EXAMPLES / "resnet_basic_block.graph").functions[0]
    rc, out, err = run_cli(
        capsys, "run", EXAMPLES / "resnet_basic_block.graph", "--backend", "ccompiler,json"
    )
    assert rc == 0, out + err
    line = next(ln for ln in out.splitlines() if ln.startswith("placement: "))
    offloaded, total = (int(w) for w in line.split()[1:4:2])
    assert total == len(fn.nodes) and offloaded == total  # json takes what ccompiler leaves
    counts = dict(part.split() for part in line[line.index("(") + 1 : line.index(")")].split(", "))
    assert sum(map(int, counts.values())) == total and set(counts) <= {"ccompiler", "json"}
    assert line.endswith(", 0 on the host")
