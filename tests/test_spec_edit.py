"""Spec-only extensibility: add `divide` to ccompiler by editing its YAML with ruamel.

The edit goes through ruamel's round-trip mode, as a tool or a person's script
would, into a temporary spec directory that shadows the shipped ccompiler. The
edited file must keep every comment and the key order, and must validate.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap
from ruamel.yaml.scalarstring import DoubleQuotedScalarString

from byoc.cli import main
from byoc.spec import ENV_VAR, SHIPPED_BACKENDS, load_backend

SHIPPED_CCOMPILER = SHIPPED_BACKENDS / "ccompiler.yaml"
NEW_OP_COMMENT = "divide: added by a script, spec only"


def flow_map(pairs) -> CommentedMap:
    m = CommentedMap(pairs)
    m.fa.set_flow_style()
    return m


def add_divide(source: Path, target: Path) -> None:
    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.width = 4096
    doc = yaml.load(source.read_text(encoding="utf-8"))
    macros = flow_map(
        [(1, "CSOURCE_BINARY_OP_1D"), (2, "CSOURCE_BINARY_OP_2D"), ("default", "CSOURCE_BINARY_OP_ND")]
    )
    doc["ops"]["divide"] = CommentedMap(
        [("macros", macros), ("vars", flow_map([("operator", DoubleQuotedScalarString("/"))]))]
    )
    doc["ops"].yaml_set_comment_before_after_key("divide", before=NEW_OP_COMMENT, indent=2)
    out = io.StringIO()
    yaml.dump(doc, out)
    target.write_text(out.getvalue(), encoding="utf-8")


@pytest.fixture
def edited(tmp_path, monkeypatch) -> Path:
    monkeypatch.delenv(ENV_VAR, raising=False)
    path = tmp_path / "ccompiler.yaml"
    add_divide(SHIPPED_CCOMPILER, path)
    return path


def comments(text: str) -> list[str]:
    return [
        line.split("#", 1)[1].strip() for line in text.splitlines() if "#" in line and "#include" not in line
    ]


def test_edit_keeps_every_comment_and_line(edited):
    before = SHIPPED_CCOMPILER.read_text(encoding="utf-8")
    after = edited.read_text(encoding="utf-8")
    assert comments(after) == comments(before) + [NEW_OP_COMMENT]
    # the edit only appends the new op: the shipped text is an exact prefix
    assert after.startswith(before)
    added = after[len(before) :].splitlines()
    assert added == [
        f"  # {NEW_OP_COMMENT}",
        "  divide:",
        "    macros: {1: CSOURCE_BINARY_OP_1D, 2: CSOURCE_BINARY_OP_2D, default: CSOURCE_BINARY_OP_ND}",
        '    vars: {operator: "/"}',
    ]


def test_edit_keeps_key_order(edited):
    yaml = YAML(typ="rt")
    before = yaml.load(SHIPPED_CCOMPILER.read_text(encoding="utf-8"))
    after = yaml.load(edited.read_text(encoding="utf-8"))
    assert list(after) == list(before)
    assert list(after["ops"]) == [*before["ops"], "divide"]
    assert list(after["macros"]) == list(before["macros"])
    assert list(after["macros"]["CSOURCE_BINARY_OP_2D"]["params"]) == [
        "p_ID_",
        "p_OP_",
        "p_DIM1_",
        "p_DIM2_",
        "p_DTYPE_",
    ]


def test_edited_spec_validates_and_shadows_the_shipped_one(edited):
    spec = load_backend("ccompiler", spec_path=[edited.parent])
    assert Path(spec.source) == edited
    divide = spec.ops["divide"]
    assert divide.vars == {"operator": "/"}
    assert [divide.construct(r) for r in (1, 2, 5)] == [
        "CSOURCE_BINARY_OP_1D",
        "CSOURCE_BINARY_OP_2D",
        "CSOURCE_BINARY_OP_ND",
    ]
    assert spec.supports("divide", "float32", 2)
    assert "divide" not in load_backend("ccompiler").ops


def test_edited_spec_passes_byoc_check(edited, capsys):
    assert main(["check", str(edited)]) == 0
    assert capsys.readouterr().out == f"{edited}: ok\n"


def test_edited_spec_is_listed_with_divide(edited, capsys):
    assert main(["--spec-path", str(edited.parent), "backends"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("ccompiler"))
    assert "add, subtract, multiply, " in row and row.endswith(", divide")
