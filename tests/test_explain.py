"""``byoc partition --explain`` and ``byoc run --explain`` (byoc/generator/explain.py):
where each op went, why every backend before it did not take it, and the patterns
that matched by their ops but were not taken. The text is golden; its claims are
checked against the partitioning itself."""

from __future__ import annotations

import re
from pathlib import Path

import onnx
import pytest
from conftest import EXAMPLES, run_cli
from test_shape_conditions import GRAPH, readme_spec

from byoc.api import backend_loader, load_backend, load_catalog, parse, parse_file
from byoc.building import explain_over, partition_over
from byoc.generator.explain import explain
from byoc.generator.partition import partition
from byoc.generator.placement import placement, placement_summary
from byoc.spec import ENV_VAR, SHIPPED_BACKENDS

SPEC_README = SHIPPED_BACKENDS.parent / "README.md"
README_MARKER = (
    "<!-- each line of the block below is checked against the explanation by tests/test_explain.py -->"
)
LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
SQUEEZENET = LIGHT / "light_squeezenet.onnx"
ENTRY = re.compile(r"^  (?P<names>.+?) = (?P<ops>.+?)\s+-> (?P<where>[^ ]+(?: host)?)(?: \((?P<how>.*)\))?$")


def entries(text: str) -> list[tuple[dict[str, str], list[str]]]:
    """Each op entry of an explanation, with the reason lines under it."""
    out: list[tuple[dict[str, str], list[str]]] = []
    for line in text.splitlines():
        m = ENTRY.match(line)
        if m is not None:
            out.append((m.groupdict(), []))
        elif line.startswith("      ") and out:
            out[-1][1].append(line.strip())
    return out


@pytest.fixture
def npu_dir(tmp_path, monkeypatch) -> Path:
    monkeypatch.delenv(ENV_VAR, raising=False)
    (tmp_path / "npu.yaml").write_text(readme_spec(), encoding="utf-8")
    return tmp_path


def test_squeezenet_over_dnnl_and_fused_says_why_dnnl_left_each_op(capsys, golden):
    rc, out, err = run_cli(capsys, "partition", SQUEEZENET, "--backend", "dnnl,fused", "--explain")
    assert rc == 0 and err == ""
    assert out == golden("txt")
    found = entries(out)
    on_fused = [(e, reasons) for e, reasons in found if e["where"] == "fused"]
    assert on_fused, "the light SqueezeNet has ops dnnl does not map"
    for entry, reasons in on_fused:  # every op left to fused: why dnnl did not take it
        assert [r for r in reasons if r.startswith("dnnl: ")], entry
    assert all(not reasons for e, reasons in found if e["where"] == "dnnl")  # the first backend: no reasons


def test_the_explanation_agrees_with_the_partitioning():
    """Its placement line is the one ``byoc run`` prints for the partitioned program."""
    catalog = load_catalog()
    program = parse_file(SQUEEZENET, "onnx", catalog=catalog)
    loader = backend_loader(None, catalog)
    text = explain_over(program, ["dnnl", "fused"], loader, catalog)
    counts = placement(partition_over(program, ["dnnl", "fused"], loader, catalog))
    assert text.rstrip().splitlines()[-1] == placement_summary(counts)
    assert sum(counts.values()) == sum(len(fn.nodes) for fn in program.functions)


def test_conditions_and_near_misses_are_named_with_their_values(npu_dir, golden):
    program = parse(GRAPH, "graph")
    specs = [load_backend(name, spec_path=[npu_dir]) for name in ("npu", "fused")]
    text = explain(program, specs, load_catalog())
    assert text == golden("txt")
    types = program.functions[0].types()
    by_name = {e["names"]: (e, reasons) for e, reasons in entries(text)}
    (entry, reasons) = by_name["b"]  # a conv of 5x5 weights: refused by the mapping's condition
    assert entry["where"] == "fused"
    extent = types["w5"].shape[2]
    assert f"npu: when: in1.shape[2] <= 3 is false (in1.shape[2] = {extent})" in reasons
    (entry, reasons) = by_name["f"]  # an add of matrices: the mapping takes vectors
    assert entry["where"] == "fused" and "npu: when: in1.rank == 1 is false (in1.rank = 2)" in reasons
    (entry, _) = by_name["c"]
    assert entry["where"] == "npu" and entry["how"] == "pattern conv_relu"
    (entry, reasons) = by_name["d"]  # relu of a 5x5 conv: the pattern's ops match, its condition does not
    assert entry["where"] == "fused"
    assert any(r.startswith("npu pattern conv_relu: when: ") for r in reasons), reasons
    summary = text.rstrip().splitlines()[-1]
    assert summary == placement_summary(placement(partition(program, specs)))
    readme = SPEC_README.read_text(encoding="utf-8")
    shown = readme[readme.index(README_MARKER) :].split("```")[1].strip("\n").splitlines()
    assert shown and all(line in text.splitlines() for line in shown)  # spec/README.md shows it as it is


GROUPED = """\
graph main(x: float32[1, 4, 6, 6], w: float32[4, 2, 3, 3], s: float32[4], b: float32[4]) {
  m = const float32[4] 0.5
  v = const float32[4] 2
  return relu(batch_norm(conv(x, w, groups=2), s, b, m, v))
}
"""


def test_a_pattern_whose_ops_match_but_whose_condition_fails_is_named(tmp_path, capsys):
    path = tmp_path / "grouped.graph"
    path.write_text(GROUPED)
    rc, out, _ = run_cli(capsys, "partition", path, "--backend", "ccompiler,fused", "--explain")
    assert rc == 0
    reasons = [r for _, rs in entries(out) for r in rs]
    assert "ccompiler pattern conv_bn_relu: when: conv.groups == 1 is false (conv.groups = 2)" in reasons
    assert not any("conv_bias_relu" in r for r in reasons)  # its ops are not there: not a near miss


def test_run_explain_prints_the_explanation_then_runs(capsys):
    rc, out, _ = run_cli(capsys, "run", EXAMPLES / "mlp.graph", "--backend", "ccompiler,fused", "--explain")
    assert rc == 0 and "every output matches" in out
    assert out.index("explain: partitioning over ccompiler, fused") < out.index("byoc run ")
    summaries = [line for line in out.splitlines() if line.startswith("placement: ")]
    assert len(summaries) == 2 and summaries[0] == summaries[1]  # the explanation's and the run's


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["run", EXAMPLES / "mlp.graph", "--explain"], "--explain needs --backend"),
        (["partition", EXAMPLES / "mlp.graph", "--explain"], "name at least one --backend"),
    ],
)
def test_explain_without_backends_is_a_usage_error(capsys, argv, message):
    rc, out, err = run_cli(capsys, *argv)
    assert rc == 2 and message in err and "Traceback" not in err and out == ""
