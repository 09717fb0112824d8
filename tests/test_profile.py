"""Profiling (``byoc.build(..., profile=True)``, ``Model.profile``, ``byoc run --profile``).

The generated text of a build with profiling is today's text plus the profiling lines
(stripped here, it equals the golden file), and compiles warning-free; a profiled run
has one kernel event per timed kernel call of the generated code, each within its
region's span, and the regions add up to the run; the CLI prints the table and writes
a Chrome trace that ``json.load`` reads.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import gen_c_source_support as c_source_cases
import gen_engine_support as engine_cases
import numpy as np
import pytest
import test_gen_cblas as cblas_cases
import test_gen_dnnl as dnnl_cases
import test_gen_fused as fused_cases
from compile_util import compile_library
from conftest import run_cli
from golden import GOLDEN_DIR
from libraries import missing_library

import byoc
from byoc.api import load_backend, load_catalog, parse
from byoc.errors import UsageError
from byoc.generator import generator_for
from byoc.generator.c import profile as c_profile
from byoc.generator.c_source.body import PART_CALLS
from byoc.generator.lowering import lower
from byoc.runtime import load

SITE = re.compile(r"/\* profiling: site (\d+), ")
SUPPORT = re.compile(
    r"/\* ---- Profiling \(byoc generator/c/profile\.py\).*?byoc_profile_site\(int64_t site\) \{\n.*?\n\}\n\n",
    re.DOTALL,
)
BLOCK_OPEN = re.compile(r"  \{ /\* profiling: site \d+, .*\*/")
FLAT_START = re.compile(
    r"  const int64_t byoc_started = byoc_profile_now\(\);  /\* profiling: site \d+, .*\*/"
)
RECORD = re.compile(r" *byoc_profile_record\(\d+, byoc_started\);")


def strip_profiling(text: str) -> str:
    """``text`` without what c_profile adds: the feature macro, <time.h>, the support
    block, and each timed block (its inner lines back at their indentation) or flat
    timing (engine)."""
    text = text.replace(c_profile.POSIX + "\n", "", 1).replace(c_profile.INCLUDE, "", 1)
    text, removed = SUPPORT.subn("", text, count=1)
    assert removed == 1
    out: list[str] = []
    in_block = closing = False
    for line in text.split("\n"):
        if BLOCK_OPEN.fullmatch(line):
            in_block = True
        elif FLAT_START.fullmatch(line) or (RECORD.fullmatch(line) and not in_block):
            pass
        elif in_block and line == "    const int64_t byoc_started = byoc_profile_now();":
            pass
        elif in_block and RECORD.fullmatch(line):
            closing = True
        elif closing and line == "  }":
            in_block = closing = False
        else:
            out.append(line[2:] if in_block and line else line)
    return "\n".join(out)


def _externals(module, case: str, backend: str):
    program = module.program_of(case)
    return lower(program, load_backend, load_catalog()).externals_for(backend)


CASES = {
    # id: (externals, backend, golden file)
    "ccompiler-dag": (
        lambda: c_source_cases.externals_of("dag"),
        "ccompiler",
        "test_gen_c_source/test_golden[dag].c",
    ),
    "ccompiler-net_mlp": (
        lambda: c_source_cases.externals_of("net_mlp"),
        "ccompiler",
        "test_gen_c_source/test_golden[net_mlp].c",
    ),
    "ccompiler-edge": (
        lambda: c_source_cases.externals_of("edge"),
        "ccompiler",
        "test_gen_c_source/test_golden[edge].c",
    ),
    "fused-dag": (lambda: fused_cases.externals_of("dag"), "fused", "test_gen_fused/test_golden[dag].c"),
    "fused-broadcast_mix": (
        lambda: fused_cases.externals_of("broadcast_mix"),
        "fused",
        "test_gen_fused/test_golden[broadcast_mix].c",
    ),
    "fused-resnet_basic_block": (
        lambda: fused_cases.externals_of("resnet_basic_block"),
        "fused",
        "test_gen_fused/test_golden[resnet_basic_block].c",
    ),
    "dnnl-net_resnet_block": (
        lambda: _externals(dnnl_cases, "net_resnet_block", "dnnl"),
        "dnnl",
        "test_gen_dnnl/test_golden[net_resnet_block].c",
    ),
    "cblas-gemms": (
        lambda: _externals(cblas_cases, "gemms", "cblas"),
        "cblas",
        "test_gen_cblas/test_golden[gemms].c",
    ),
    "engine-dag": (
        lambda: lower(engine_cases.graph_program("dag"), load_backend, load_catalog()).externals_for(
            "engine"
        ),
        "engine",
        "test_gen_engine/test_graph[dag].cc",
    ),
}


def generated(externals, backend: str, *, profile: bool):
    """The artifacts of backend ``backend``'s module, as the pipeline asks for them."""
    spec = load_backend(backend)
    timed = {"profile": True} if profile else {}
    return generator_for(spec.kind)(externals, spec, load_catalog(), spec.option_values({}), **timed)


def module_texts(externals, backend: str) -> tuple[str, str]:
    """The module's text without and with profiling."""
    texts = []
    for profile in (False, True):
        (module,) = [a for a in generated(externals, backend, profile=profile) if a.role == "module"]
        texts.append(module.text)
    return texts[0], texts[1]


@pytest.mark.parametrize("case", CASES)
def test_the_profiled_text_is_the_golden_text_plus_profiling_lines(case):
    make, backend, golden = CASES[case]
    externals = make()
    plain, profiled = module_texts(externals, backend)
    assert plain == (GOLDEN_DIR / golden).read_text()  # a build without profiling: today's text
    assert "byoc_profile" not in plain
    assert profiled != plain
    assert strip_profiling(profiled) == plain
    sites = [int(k) for k in SITE.findall(profiled)]
    assert sites == list(range(len(sites)))  # numbered in order, each once
    assert f"#define BYOC_PROFILE_SITES {len(sites)}\n" in profiled
    if load_backend(backend).kind.name == "c_source":  # one site per kernel call: per node
        assert len(sites) == sum(len(fn.nodes) for fn in externals)
    if backend == "engine":  # one per run of a layer graph: per function
        assert len(sites) == len(externals)


@pytest.mark.parametrize("case", ["ccompiler-edge", "fused-resnet_basic_block", "engine-dag"])
def test_the_profiled_text_compiles_warning_free(case, tmp_path):
    make, backend, _ = CASES[case]
    artifacts = generated(make(), backend, profile=True)
    (module,) = [a for a in artifacts if a.role == "module"]
    files = {a.name: a.text for a in artifacts if a.role in ("module", "header")}
    compile_library(files, module.name, tmp_path, cplusplus=backend == "engine", link=False)


# ------------------------------------------------------------------- profiled runs

GRAPH = """\
graph main(x: float32[128, 384], y: float32[128, 384], w: float32[384, 384], b: float32[384]) {
  d = @ccompiler {
    t = add(x, y)
    u = multiply(t, y)
    return dense(u, w)
  }
  f = @fused {
    r = relu(bias_add(d, b, axis=-1))
    return softmax(r, axis=-1)
  }
  return negative(f)
}
"""
"""Regions on ccompiler and fused and a host op; the dense takes nearly all the time,
so that the clock's noise is small beside a region."""


@pytest.fixture(scope="module")
def graph_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("profile") / "g.graph"
    path.write_text(GRAPH)
    return path


@pytest.fixture(scope="module")
def model(graph_file):
    return byoc.build(graph_file, profile=True)


def inputs_of(model) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    ex = model.executor()
    return {n: rng.uniform(-1, 1, ex.input_type(n).shape).astype(np.float32) for n in ex.input_names}


def expected_kernel_events(model) -> dict[str, int]:
    """Per library, the timed kernel calls of its generated code (each region runs once)."""
    return {
        m.backend: len(SITE.findall(model.text(next(s for s in m.sources if s.endswith((".c", ".cc"))))))
        for m in model.manifest.modules
    }


def check_profile(profile, counts: dict[str, int]) -> None:
    """One kernel event per timed call, each within a call of its region, kernels of a
    region in sequence, and the regions adding up to the run (within 10%)."""
    kernels = profile.of_kind("kernel")
    for backend, count in counts.items():
        assert sum(1 for k in kernels if k.backend == backend) == count
    regions = profile.of_kind("region")
    run = profile.run
    for k in kernels:
        assert any(r.name == k.args["region"] and r.start <= k.start <= k.end <= r.end for r in regions), k
    for r in regions:
        mine = sorted((k for k in kernels if k.args["region"] == r.name), key=lambda k: k.start)
        assert all(a.end <= b.start for a, b in zip(mine, mine[1:]))
    assert all(run.start <= e.start <= e.end <= run.end for e in profile.events)
    total = sum(r.duration for r in regions)
    assert 0.9 * run.duration <= total <= run.duration


def test_a_profiled_run_times_every_region_kernel_and_host_op(model):
    inputs = inputs_of(model)
    (expected,) = model(**inputs)
    counts = expected_kernel_events(model)
    ops = sum(
        len(n.callee.nodes)
        for n in parse(GRAPH, "graph").functions[0].nodes
        if n.callee and n.callee.backend == "ccompiler"
    )
    assert counts["ccompiler"] == ops  # a kernel call per op of the region
    for _ in range(3):  # a run can be slowed down by the machine; one in three is enough
        profile = model.profile(**inputs)
        try:
            check_profile(profile, counts)
            break
        except AssertionError:
            continue
    else:
        check_profile(profile, counts)
    (out,) = profile.outputs
    np.testing.assert_array_equal(out, expected)
    assert {r.name for r in profile.of_kind("region")} == {"ccompiler_0", "fused_0"}
    (host,) = profile.of_kind("host op")
    assert host.backend is None and "negative" in host.name
    table = profile.table()
    for e in profile.events:
        if e.kind != "run":
            assert e.name in table
    assert table.splitlines()[1].split()[:8] == [
        "name",
        "kind",
        "backend",
        "calls",
        "total",
        "per",
        "call",
        "share",
    ]
    rows = profile.rows()
    assert [r.name for r in rows if r.depth == 0] == [
        r.name for r in sorted((r for r in rows if r.depth == 0), key=lambda r: -r.total)
    ]


def test_the_chrome_trace_has_a_complete_event_per_span(model, tmp_path):
    profile = model.profile(**inputs_of(model))
    path = profile.to_chrome_trace(tmp_path / "trace.json")
    data = json.loads(path.read_text())
    events = data["traceEvents"]
    assert len(events) == len(profile.events)
    assert {e["cat"] for e in events} == {"run", "region", "kernel", "host op"}
    for e in events:
        assert e["ph"] == "X" and set(e) == {"name", "cat", "ph", "ts", "dur", "pid", "tid", "args"}
        assert e["ts"] >= 0 and e["dur"] >= 0
    run = next(e for e in events if e["cat"] == "run")
    for e in events:
        assert e["ts"] + e["dur"] <= run["ts"] + run["dur"] + 1e-3
    assert sum(e["cat"] == "kernel" for e in events) == sum(expected_kernel_events(model).values())


def test_earlier_calls_are_not_in_the_profile(model):
    inputs = inputs_of(model)
    for _ in range(3):
        model(**inputs)  # a profiled library records these too; profile() forgets them
    profile = model.profile(**inputs)
    assert len(profile.of_kind("kernel")) == sum(expected_kernel_events(model).values())
    assert profile.dropped == 0


def test_a_long_body_in_parts_times_every_kernel_call():
    n = PART_CALLS + 10
    lines = [f"    t{k + 1} = relu(t{k})" for k in range(n)]
    text = "graph main(x: float32[8]) {\n  y = @ccompiler {\n    t0 = add(x, x)\n" + "\n".join(lines)
    text += f"\n    return t{n}\n  }}\n  return y\n}}\n"
    model = byoc.build(parse(text, "graph"), profile=True)
    profile = model.profile(x=np.ones(8, np.float32))
    assert len(profile.of_kind("kernel")) == n + 1
    (region,) = profile.of_kind("region")
    assert all(region.start <= k.start <= k.end <= region.end for k in profile.of_kind("kernel"))


def test_a_model_built_without_profiling_says_how_to_profile(graph_file):
    model = byoc.build(graph_file)
    assert not model.profiling
    with pytest.raises(UsageError, match="not built with profiling") as caught:
        model.profile(**inputs_of(model))
    assert "profile=True" in caught.value.hint
    assert "byoc_profile" not in model.text("ccompiler.c")


def test_a_bundle_keeps_its_profiling(model, graph_file, tmp_path):
    model.save(tmp_path / "p.byoc")
    loaded = load(tmp_path / "p.byoc")
    assert loaded.profiling
    assert len(loaded.profile(**inputs_of(loaded)).of_kind("kernel")) == sum(
        expected_kernel_events(model).values()
    )
    byoc.build(graph_file).save(tmp_path / "plain.byoc")
    assert not load(tmp_path / "plain.byoc").profiling


def test_cli_profile_prints_the_table_and_writes_the_trace(graph_file, tmp_path, capsys):
    trace = tmp_path / "out" / "trace.json"
    trace.parent.mkdir()
    rc, out, _ = run_cli(capsys, "run", graph_file, "--profile-trace", trace)
    assert rc == 0, out
    result = out.index("result: every output matches")
    table = out.index("profile of graph main: run ")
    assert result < table
    assert re.search(r"\n *name +kind +backend +calls +total +per call +share\n", out)
    assert re.search(r"\nccompiler_0 +region +ccompiler +1 ", out)
    assert re.search(r"\n  ccompiler_0_\d dense .* kernel +ccompiler +1 ", out)
    assert re.search(r"\nhost_\d+_negative +host op +host +1 ", out)
    data = json.loads(trace.read_text())
    kernels = [e for e in data["traceEvents"] if e["cat"] == "kernel"]
    assert len(kernels) == sum(len(SITE.findall(t)) for t in _sources(tmp_path, graph_file, capsys))
    rc, out, _ = run_cli(capsys, "run", graph_file, "--profile")
    assert rc == 0 and "profile of graph main" in out and "wrote" not in out


def _sources(tmp_path: Path, graph_file: Path, capsys) -> list[str]:
    """The modules `byoc build --profile` generates for the graph."""
    bundle = tmp_path / "b.byoc"
    rc, out, _ = run_cli(capsys, "build", graph_file, "--profile", "-o", bundle)
    assert rc == 0, out
    loaded = load(bundle)
    return [loaded.text(s) for m in loaded.manifest.modules for s in m.sources if s.endswith((".c", ".cc"))]


def test_cli_profile_of_a_bundle_built_without_it_is_a_usage_error(graph_file, tmp_path, capsys):
    bundle = tmp_path / "plain.byoc"
    assert run_cli(capsys, "build", graph_file, "-o", bundle)[0] == 0
    rc, out, err = run_cli(capsys, "run", bundle, "--profile")
    assert rc == 2
    assert "not built with profiling" in err and "byoc build --profile" in err
    assert "graph main:" not in out  # refused before running anything


# --------------------------------------------------------------------------- acceptance


@pytest.mark.skipif(missing_library("dnnl") is not None, reason=f"{missing_library('dnnl')}")
def test_light_resnet50_on_dnnl_and_fused(tmp_path, capsys):
    """The issue's acceptance: ``byoc run --profile`` on the light ResNet-50 with
    ``--backend dnnl,fused`` writes a trace with one event per kernel call whose regions
    add up to the run."""
    onnx = pytest.importorskip("onnx")
    model_file = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light" / "light_resnet50.onnx"
    if not model_file.exists():
        pytest.skip(f"{model_file} is not in this onnx wheel")
    trace = tmp_path / "resnet50.json"
    rc, out, _ = run_cli(capsys, "run", model_file, "--backend", "dnnl,fused", "--profile-trace", trace)
    assert rc == 0, out
    assert "profile of graph" in out
    events = json.loads(trace.read_text())["traceEvents"]
    built = byoc.build(model_file, backends=("dnnl", "fused"), profile=True)  # compiled: from the cache
    sites = expected_kernel_events(built)
    assert set(sites) == {"dnnl", "fused"}
    for backend, count in sites.items():
        assert sum(1 for e in events if e["cat"] == "kernel" and e["args"]["backend"] == backend) == count
    (run,) = [e for e in events if e["cat"] == "run"]
    regions = [e for e in events if e["cat"] == "region"]
    total = sum(e["dur"] for e in regions)
    assert 0.9 * run["dur"] <= total <= run["dur"]
    for k in (e for e in events if e["cat"] == "kernel"):
        assert any(
            r["name"] == k["args"]["region"]
            and r["ts"] <= k["ts"]
            and k["ts"] + k["dur"] <= r["ts"] + r["dur"] + 1e-3
            for r in regions
        )
