"""spec/README.md's worked examples must validate, and run, as written."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from conftest import run_cli
from ruamel.yaml import YAML
from shipped_fused import FUSED_YAML, write_fused_copy

from byoc.spec import ENV_VAR, SHIPPED_BACKENDS, load_backend

README = SHIPPED_BACKENDS.parent / "README.md"
MARKER = "<!-- the block below is loaded and validated by tests/test_spec_readme.py -->"
OWN_OP_MARKER = "<!-- the blocks below are run by tests/test_spec_readme.py -->"


def yaml_blocks(text: str) -> list[str]:
    return re.findall(r"```yaml\n(.*?)```", text, flags=re.S)


def test_new_backend_example_validates(tmp_path, monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    text = README.read_text(encoding="utf-8")
    block = yaml_blocks(text[text.index(MARKER) :])[0]
    (tmp_path / "mynpu.yaml").write_text(block, encoding="utf-8")
    spec = load_backend("mynpu", spec_path=tmp_path)
    assert spec.kind.name == "c_source"
    assert spec.supports("relu", "float64", 4)
    assert spec.ops["multiply"].vars == {"operator": "*"}


def test_add_op_example_validates(tmp_path, monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    blocks = yaml_blocks(README.read_text(encoding="utf-8"))
    divide = next(b for b in blocks if b.startswith("  divide:"))
    maximum = next(b for b in blocks if "CSOURCE_MAX_ND:" in b)
    macro, op = maximum.split("ops:\n")
    text = (SHIPPED_BACKENDS / "ccompiler.yaml").read_text(encoding="utf-8")
    text = text.replace(
        "\n# Catalog op -> macros.", "\n" + macro.split("macros:\n", 1)[1] + "\n# Catalog op -> macros."
    )
    (tmp_path / "ccompiler.yaml").write_text(text + divide + op, encoding="utf-8")
    spec = load_backend("ccompiler", spec_path=[Path(tmp_path)])
    assert list(spec.ops)[:3] == ["add", "subtract", "multiply"]
    assert list(spec.ops)[-2:] == ["divide", "maximum"]
    assert spec.ops["maximum"].construct(3) == "CSOURCE_MAX_ND"


def own_op_example(tmp_path: Path) -> tuple[Path, Path]:
    """The "op of your own" example's files, as its commands make them: ``my_specs/`` with
    the README's ``ops.yaml`` and a copy of the shipped fused.yaml with ``cube: {}`` and
    ``scaled_clip: {}`` under its ``ops:``, and ``cube.graph``."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index(OWN_OP_MARKER) : text.index("## Worked example: adding a backend")]
    catalog = yaml_blocks(section)[0]
    graph = re.findall(r"```\n(graph .*?)```", section, flags=re.S)[0]
    specs = tmp_path / "my_specs"
    specs.mkdir()
    (specs / "ops.yaml").write_text(catalog, encoding="utf-8")
    yaml = YAML(typ="rt")
    fused = yaml.load(FUSED_YAML)
    fused["ops"]["cube"] = {}
    fused["ops"]["scaled_clip"] = {}
    with write_fused_copy(specs).open("w", encoding="utf-8") as out:
        yaml.dump(fused, out)
    (tmp_path / "cube.graph").write_text(graph, encoding="utf-8")
    return specs, tmp_path / "cube.graph"


def test_own_op_example_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv(ENV_VAR, raising=False)
    monkeypatch.chdir(tmp_path)
    specs, graph = own_op_example(tmp_path)

    status, out, err = run_cli(capsys, "check", specs)
    assert (status, err) == (0, "")
    assert out.splitlines() == [f"{specs / 'fused.yaml'}: ok", f"{specs / 'ops.yaml'}: ok"]

    status, out, _ = run_cli(capsys, "--spec-path", specs, "ops")
    assert status == 0
    rows = {line.split()[0]: line for line in out.splitlines()}
    assert "from" in rows["op"].split()
    assert "my_specs/ops.yaml" in rows["cube"] and "byoc" not in rows["cube"]
    assert "byoc; doc: my_specs/ops.yaml" in rows["relu"]
    assert "byoc" in rows["add"] and "my_specs" not in rows["add"]

    status, out, _ = run_cli(capsys, "--spec-path", specs, "ops", "cube", "scaled_clip", "relu")
    assert status == 0
    assert "doc:        The cube of each element, x0 * x0 * x0." in out
    assert "attributes: scale: float = 1.0, low: float, high: float" in out
    assert "on our NPU the activation unit clamps it" in out

    status, out, _ = run_cli(capsys, "gen", graph, "--spec-path", specs, "--backend", "fused")
    assert status == 0  # one region: the catalog's C expressions, fused between subtract and relu
    assert "= cube(...) at" in out
    assert "= scaled_clip(...) at" in out
    assert "= relu(...) at" in out

    status, out, _ = run_cli(capsys, "run", graph, "--spec-path", specs, "--backend", "fused")
    assert status == 0, out
    assert "(backends: fused)" in out
    assert "result: every output matches the numpy reference" in out

    missing = tmp_path / "missing.graph"  # the op's declaration is what the DSL checks a call against
    missing.write_text(graph.read_text().replace(", high=4.0", ""), encoding="utf-8")
    status, _, err = run_cli(capsys, "gen", missing, "--spec-path", specs, "--backend", "fused")
    assert status != 0
    assert "missing.graph:2:" in err and "high" in err

    bundle = tmp_path / "cube.byoc"
    status, _, _ = run_cli(capsys, "build", graph, "--spec-path", specs, "--backend", "fused", "-o", bundle)
    assert status == 0
    shutil.rmtree(specs)  # the bundle carries the catalog it was built with
    status, out, _ = run_cli(capsys, "run", bundle)
    assert status == 0, out
    assert "result: every output matches the numpy reference" in out


PATTERN_MARKER = "<!-- the blocks below are run by tests/test_spec_readme.py (composite pattern) -->"


def test_composite_pattern_example_runs(tmp_path, monkeypatch, capsys):
    """The macro and the pattern go into a copy of ccompiler.yaml; the graph's first
    output becomes the composite, the second (a slope the condition refuses) does not."""
    monkeypatch.delenv(ENV_VAR, raising=False)
    monkeypatch.chdir(tmp_path)
    text = README.read_text(encoding="utf-8")
    section = text[text.index(PATTERN_MARKER) : text.index("## Worked example: adding a backend")]
    macro, pattern = yaml_blocks(section)
    graph = re.findall(r"```\n(graph .*?)```", section, flags=re.S)[0]
    spec = (SHIPPED_BACKENDS / "ccompiler.yaml").read_text(encoding="utf-8")
    spec = spec.replace("\n# Catalog op -> macros.", "\n" + macro + "\n# Catalog op -> macros.")
    specs = tmp_path / "my_specs"
    specs.mkdir()
    spec = spec.replace("\npatterns:\n", "\npatterns:\n" + pattern)
    (specs / "ccompiler.yaml").write_text(spec, encoding="utf-8")
    (tmp_path / "leaky.graph").write_text(graph, encoding="utf-8")

    status, out, err = run_cli(capsys, "check", specs / "ccompiler.yaml")
    assert (status, err) == (0, "")
    status, out, _ = run_cli(
        capsys, "partition", "leaky.graph", "--spec-path", specs, "--backend", "ccompiler"
    )
    assert status == 0
    assert re.findall(r"@ccompiler\.(\w+)", out) == ["add_leaky_relu"]
    assert "leaky_relu(add_0, alpha=0.3)" in out or re.search(r"= leaky_relu\(\w+, alpha=0\.3\)", out)
    status, out, _ = run_cli(capsys, "run", "leaky.graph", "--spec-path", specs, "--backend", "ccompiler")
    assert status == 0, out
    assert "result: every output matches the numpy reference" in out
