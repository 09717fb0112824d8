"""A backend's ``probe:`` (spec/probe.py, runtime/probe.py): dtypes it takes only where
the machine computes them.

A small c_source backend whose probe says yes to float16 and no to bfloat16 checks the
mechanism on every machine: what partitioning gives it, that the probe is compiled only
for a graph that uses a probed dtype, the error for an explicit region of a dtype the
machine lacks, and malformed ``probe:`` keys. The dnnl tests check that dnnl's probe
agrees with oneDNN on this CPU: where it says yes, the 16-bit regions run and match the
reference; where it says no, partitioning leaves them to `fused` and an explicit region
is refused before anything is compiled.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import random_array, run_cli
from libraries import missing_library

import byoc
from byoc.api import backend_loader, evaluate, load_backend, load_catalog, parse
from byoc.building import partition_over
from byoc.cli.compare import DEFAULT_TOLERANCES
from byoc.cli.spec_commands import describe
from byoc.errors import BuildError, SpecError, UsageError
from byoc.ir import CALL_OP, Program
from byoc.runtime.probe import machine_computes
from byoc.spec import load_backend_file

PROBED = """\
version: 1
name: probed
kind: c_source
symbol_prefix: probed
dtypes: [float32, float16, bfloat16]
ranks: [1]
probe:
  doc: A test backend that computes float16 and not bfloat16.
  dtypes: [float16, bfloat16]
  source: |
    #include <string.h>
    int byoc_probe(const char* dtype) { return strcmp(dtype, "float16") == 0; }
compile:
  language: c
  flags: [-O1, -Wall, -Wextra, -Werror]
macros:
  ADD_1D:
    inputs: 2
    params:
      p_ID_: "${symbol}"
      p_N_: "${dim0}"
      p_T_: "${ctype}"
      p_LOAD_: "byoc_load_${dtype}"
      p_STORE_: "byoc_store_${dtype}"
    body: |
      static void p_ID_(const p_T_* a, const p_T_* b, p_T_* out) {
        for (int i = 0; i < p_N_; ++i) out[i] = p_STORE_(p_LOAD_(a[i]) + p_LOAD_(b[i]));
      }
ops:
  add: {macros: {1: ADD_1D}}
"""

MIXED = """\
graph main(a: float32[5], b: float16[5], c: bfloat16[5]) {
  x = add(a, a)
  y = add(b, b)
  z = add(c, c)
  return x, y, z
}
"""


def spec_dir(tmp_path: Path, text: str = PROBED) -> list[str]:
    (tmp_path / "probed.yaml").write_text(text)
    return [str(tmp_path)]


def region_backends(program: Program) -> dict[str, str | None]:
    """Each output of the main graph -> the backend of the region that makes it (None: host)."""
    fn = program.functions[0]
    made = {}
    for node in fn.nodes:
        backend = node.callee.backend if node.op == CALL_OP and node.callee is not None else None
        made.update((out, backend) for out in node.outputs)
    return {out: made[out] for out in fn.outputs}


def partitioned(tmp_path: Path, text: str, backends: list[str], spec_text: str = PROBED) -> Program:
    path = spec_dir(tmp_path, spec_text)
    catalog = load_catalog(spec_path=path)
    return partition_over(parse(text, "graph"), backends, backend_loader(path, catalog), catalog)


def test_partitioning_takes_only_the_dtypes_the_machine_computes(tmp_path):
    program = partitioned(tmp_path, MIXED, ["probed", "json"])
    assert list(region_backends(program).values()) == ["probed", "probed", "json"]


def test_a_probed_backend_runs_like_the_reference(tmp_path, rng):
    path = spec_dir(tmp_path)
    program = parse(MIXED, "graph")
    model = byoc.build(program, backends=["probed", "fused"], spec_path=path)
    assert {m.backend for m in model.manifest.modules} == {"probed", "fused"}
    fn = program.functions[0]
    inputs = {p.name: random_array(rng, p.type.shape, p.type.dtype) for p in fn.params}
    for got, want in zip(model(**inputs), evaluate(fn, inputs)):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)  # one float32 add, rounded once, as the reference


def test_the_probe_is_compiled_only_for_a_graph_of_a_probed_dtype(tmp_path):
    broken = PROBED.replace('return strcmp(dtype, "float16") == 0;', "return no_such_function(dtype);")
    assert broken != PROBED
    float32_only = "graph main(a: float32[5]) {\n  return add(a, a)\n}\n"
    program = partitioned(tmp_path, float32_only, ["probed"], broken)
    assert list(region_backends(program).values()) == ["probed"]
    with pytest.raises(BuildError, match="no_such_function"):
        partitioned(tmp_path, MIXED, ["probed"], broken)


def test_an_explicit_region_of_a_dtype_the_machine_lacks_is_refused(tmp_path):
    path = spec_dir(tmp_path)
    text = "graph main(c: bfloat16[5]) {\n  z = @probed {\n    return add(c, c)\n  }\n  return z\n}\n"
    with pytest.raises(UsageError) as info:
        byoc.build(parse(text, "graph", file="region.graph"), spec_path=path)
    err = info.value
    assert "backend probed does not compute bfloat16 on this machine" in err.message
    assert err.location is not None and (err.location.line, err.location.column) == (2, 7)
    assert "--backend probed --backend fused" in err.hint


def test_backends_describe_says_what_the_machine_computes(tmp_path):
    spec_dir(tmp_path)
    text = describe(load_backend_file(tmp_path / "probed.yaml"))
    assert "probed:        float16, bfloat16 where the machine computes them: float16 on this machine" in text


MALFORMED = [
    (
        "dtype_not_the_backends",
        "dtypes: [float16, bfloat16]\n  source",
        "dtypes: [float16, int8]\n  source",
        "probe: dtype 'int8' is not one of the backend's dtypes",
    ),
    (
        "dtype_twice",
        "dtypes: [float16, bfloat16]\n  source",
        "dtypes: [float16, float16]\n  source",
        "probe: dtype 'float16' is listed twice",
    ),
    (
        "no_dtypes",
        "dtypes: [float16, bfloat16]\n  source",
        "dtypes: []\n  source",
        "probe: dtypes must list at least one dtype",
    ),
    (
        "no_function",
        "int byoc_probe(const char* dtype) {",
        "int probe(const char* dtype) {",
        "probe: source does not define byoc_probe",
    ),
    (
        "empty_doc",
        "doc: A test backend that computes float16 and not bfloat16.",
        'doc: " "',
        "probe: doc must say why these dtypes depend on the machine",
    ),
    (
        "unknown_key",
        "  dtypes: [float16, bfloat16]\n",
        "  dtypes: [float16, bfloat16]\n  cpu: avx512\n",
        "cpu",
    ),
]


@pytest.mark.parametrize(("old", "new", "message"), [c[1:] for c in MALFORMED], ids=[c[0] for c in MALFORMED])
def test_a_malformed_probe_is_located(tmp_path, old, new, message):
    assert old in PROBED
    path = tmp_path / "probed.yaml"
    path.write_text(PROBED.replace(old, new, 1))
    with pytest.raises(SpecError) as info:
        load_backend_file(path)
    assert message in info.value.message
    assert info.value.location is not None and info.value.location.line >= 7


INLINE_SOURCE = """\
  source: |
    #include <string.h>
    int byoc_probe(const char* dtype) { return strcmp(dtype, "float16") == 0; }
"""


def probe_in_a_file(tmp_path: Path, c_text: str) -> Path:
    """PROBED with its probe's C in ``probed_probe.c`` beside it (``source: {file: ...}``)."""
    assert INLINE_SOURCE in PROBED
    (tmp_path / "probed_probe.c").write_text(c_text)
    path = tmp_path / "probed.yaml"
    path.write_text(PROBED.replace(INLINE_SOURCE, "  source: {file: probed_probe.c}\n"))
    return path


def test_a_probe_read_from_a_file_is_the_inline_one(tmp_path):
    (tmp_path / "inline").mkdir()
    (tmp_path / "file").mkdir()
    inline = load_backend_file(Path(spec_dir(tmp_path / "inline", PROBED)[0]) / "probed.yaml")
    c_text = INLINE_SOURCE.split("|\n", 1)[1].replace("    ", "")
    from_file = load_backend_file(probe_in_a_file(tmp_path / "file", c_text))
    assert from_file.probe.source == inline.probe.source
    assert from_file.probe.dtypes == inline.probe.dtypes


def test_a_missing_or_bad_probe_file_is_located(tmp_path, capsys):
    path = probe_in_a_file(tmp_path, "int byoc_probe(const char* dtype) { return dtype[0] == 'f' }\n")
    (tmp_path / "probed_probe.c").unlink()
    with pytest.raises(SpecError) as info:
        load_backend_file(path)
    assert "probed_probe.c" in info.value.message and info.value.location.file == str(path)
    # a file that loads but does not compile: `byoc check` compiles the probe and says where
    path = probe_in_a_file(tmp_path, "int byoc_probe(const char* dtype) { return dtype[0] == 'f' }\n")
    status, out, err = run_cli(capsys, "check", path)
    assert status == 2 and out == ""
    assert "error" in err and "byoc_probe" in err
    path = probe_in_a_file(tmp_path, "int byoc_probe(const char* dtype) { return dtype[0] == 'f'; }\n")
    status, out, _ = run_cli(capsys, "check", path)
    assert (status, out) == (0, f"{path}: ok, its probe compiled\n")


def test_an_interpreted_backend_has_no_probe(tmp_path):
    json_spec = (Path(load_backend("json").source)).read_text()
    path = tmp_path / "json.yaml"
    path.write_text(
        json_spec
        + "probe:\n  doc: x\n  dtypes: [float16]\n  source: int byoc_probe(const char* d) { return 1; }\n"
    )
    with pytest.raises(SpecError, match="probe"):
        load_backend_file(path)


# --------------------------------------------------------------------- dnnl's probe

HALF_MLP = """\
graph main(x: {t}[4, 16], w: {t}[8, 16], b: {t}[8], w2: {t}[3, 8], v: {t}[2, 3, 5]) {{
  h = relu(bias_add(dense(x, w), b, axis=1))
  return matmul(softmax(tanh(dense(h, w2)), axis=1), v)
}}
"""

needs_dnnl = pytest.mark.skipif(missing_library("dnnl") is not None, reason=str(missing_library("dnnl")))


def assert_half_close(got: np.ndarray, want: np.ndarray) -> None:
    rtol, atol = DEFAULT_TOLERANCES[str(want.dtype)]
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=rtol, atol=atol)


@needs_dnnl
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_dnnl_partitioning_follows_its_probe_and_runs_like_the_reference(dtype, rng):
    program = parse(HALF_MLP.format(t=dtype), "graph")
    model = byoc.build(program, backends=["dnnl", "fused"])
    computes = machine_computes(load_backend("dnnl"), dtype)
    assert ("dnnl" in {m.backend for m in model.manifest.modules}) == computes
    fn = program.functions[0]
    inputs = {p.name: random_array(rng, p.type.shape, p.type.dtype) for p in fn.params}
    (got,), (want,) = model(**inputs), evaluate(fn, inputs)
    assert_half_close(got, want)


@needs_dnnl
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_dnnl_explicit_half_region_runs_where_the_probe_says_yes_and_is_refused_elsewhere(dtype, rng):
    text = (
        f"graph main(x: {dtype}[4, 16], w: {dtype}[8, 16], b: {dtype}[8]) {{\n"
        "  r = @dnnl {\n"
        "    y = @dnnl.dense_bias_relu {\n"
        "      return relu(bias_add(dense(x, w), b, axis=1))\n"
        "    }\n"
        "    return softmax(sigmoid(y), axis=1)\n"
        "  }\n"
        "  return r\n"
        "}\n"
    )
    program = parse(text, "graph", file="half.graph")
    if not machine_computes(load_backend("dnnl"), dtype):
        with pytest.raises(UsageError, match=f"backend dnnl does not compute {dtype} on this machine"):
            byoc.build(program)
        return
    model = byoc.build(program)
    fn = program.functions[0]
    inputs = {p.name: random_array(rng, p.type.shape, p.type.dtype) for p in fn.params}
    (got,), (want,) = model(**inputs), evaluate(fn, inputs)
    assert_half_close(got, want)


def test_dnnl_float32_graphs_never_ask_the_probe(monkeypatch):
    import byoc.runtime.probe as probe

    def fail(spec):
        raise AssertionError("the probe ran for a float32 graph")

    monkeypatch.setattr(probe, "probe_function", fail)
    monkeypatch.setattr(probe, "_answers", {})
    program = parse(HALF_MLP.format(t="float32"), "graph")
    catalog = load_catalog()
    parted = partition_over(program, ["dnnl"], backend_loader(None, catalog), catalog)
    assert set(region_backends(parted).values()) == {"dnnl"}
