"""spec/README.md's worked examples must validate as written."""

from __future__ import annotations

import re
from pathlib import Path

from byoc.spec import ENV_VAR, SHIPPED_BACKENDS, load_backend

README = SHIPPED_BACKENDS.parent / "README.md"
MARKER = "<!-- the block below is loaded and validated by tests/test_spec_readme.py -->"


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
