"""The shipped backend specs, the spec model, and the spec search path."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import byoc
from byoc.api import examplejson_tokens, parse
from byoc.errors import GraphError, UsageError
from byoc.spec import (
    ENV_VAR,
    KINDS,
    SHIPPED_BACKENDS,
    find_backends,
    list_backends,
    load_backend,
    load_backend_file,
    spec_dirs,
)
from byoc.spec.template import TemplateSyntaxError, placeholder_names, render

SHIPPED = ("cblas", "ccompiler", "dnnl", "engine", "examplejson", "fused", "json")
GUIDE_MACRO_2D = """\
static void p_ID_(const p_DTYPE_* a, const p_DTYPE_* b, p_DTYPE_* out) {
  for (int64_t i = 0; i < p_DIM1_; ++i) {
    for (int64_t j = 0; j < p_DIM2_; ++j) {
      int64_t k = i * p_DIM2_ + j;
      out[k] = a[k] p_OP_ b[k];
    }
  }
}
"""


@pytest.fixture(autouse=True)
def _no_user_spec_path(monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_spec_loads(name):
    spec = load_backend(name)
    assert spec.name == name
    assert spec.kind is KINDS[spec.kind.name]
    folder = SHIPPED_BACKENDS / name  # a backend with support C files has a folder
    assert Path(spec.source) == (folder if folder.is_dir() else SHIPPED_BACKENDS) / f"{name}.yaml"
    assert spec.dtypes and spec.ranks and spec.ops and spec.options
    assert spec.description


def test_the_shipped_backends_are_exactly_these():
    assert [s.name for s in list_backends()] == list(SHIPPED)
    specs = [*SHIPPED_BACKENDS.glob("*.yaml"), *SHIPPED_BACKENDS.glob("*/*.yaml")]
    assert sorted(p.name for p in specs) == [f"{n}.yaml" for n in SHIPPED]


def test_ccompiler_holds_the_guides_macros():
    spec = load_backend("ccompiler")
    assert spec.kind.name == "c_source"
    assert list(spec.macros)[:3] == ["CSOURCE_BINARY_OP_1D", "CSOURCE_BINARY_OP_2D", "CSOURCE_BINARY_OP_ND"]
    m2 = spec.macros["CSOURCE_BINARY_OP_2D"]
    assert list(m2.params) == ["p_ID_", "p_OP_", "p_DIM1_", "p_DIM2_", "p_DTYPE_"]
    assert m2.body == GUIDE_MACRO_2D
    assert {op: b.vars["operator"] for op, b in spec.ops.items() if "operator" in b.vars} == {
        "add": "+",
        "subtract": "-",
        "multiply": "*",
        # issue 29: the comparisons' macro and the logical ops on the guide's binary macros
        "equal": "==",
        "not_equal": "!=",
        "less": "<",
        "less_equal": "<=",
        "greater": ">",
        "greater_equal": ">=",
        "logical_and": "&&",
        "logical_or": "||",
        "logical_xor": "!=",
    }


def test_ccompiler_selects_the_macro_by_rank():
    add = load_backend("ccompiler").ops["add"]
    assert add.construct(1) == "CSOURCE_BINARY_OP_1D"
    assert add.construct(2) == "CSOURCE_BINARY_OP_2D"
    assert add.construct(3) == "CSOURCE_BINARY_OP_ND"


def test_ccompiler_macro_arguments_render():
    spec = load_backend("ccompiler")
    binding = spec.ops["multiply"]
    macro = spec.macros[binding.construct(2)]
    values = {
        "symbol": "ccompiler_0_0",
        "ctype": spec.ctype("float32"),
        "dim0": 10,
        "dim1": 10,
        **binding.vars,
    }
    assert macro.arguments(values) == ("ccompiler_0_0", "*", "10", "10", "float")


def test_ccompiler_compile_settings_and_options():
    spec = load_backend("ccompiler")
    assert (spec.compile.compiler, spec.compile.language, spec.compile.std) == ("cc", "c", "c99")
    values = spec.template_values(spec.option_values({"opt_level": "3", "fast_math": "yes"}))
    assert spec.compile.render_flags(values) == (
        "-O3", "-Wall", "-Wextra", "-Werror",
        "-fno-math-errno", "-fno-trapping-math", "-fno-signed-zeros", "-fassociative-math", "-freciprocal-math",
    )  # fmt: skip
    assert spec.compile.render_flags(spec.template_values())[0] == "-O2"


def test_option_values_reject_unknown_and_bad_values():
    spec = load_backend("ccompiler")
    with pytest.raises(UsageError, match="no option 'unroll'"):
        spec.option_values({"unroll": "4"})
    with pytest.raises(UsageError, match="not an integer"):
        spec.option_values({"opt_level": "fast"})
    with pytest.raises(UsageError, match="not one of 0, 1, 2, 3"):
        spec.option_values({"opt_level": "7"})
    with pytest.raises(UsageError, match="not a boolean"):
        spec.option_values({"fast_math": "maybe"})
    assert spec.option_values({"opt_level": 1})["opt_level"] == 1


def test_engine_holds_layers_and_engine_code():
    spec = load_backend("engine")
    assert spec.kind.name == "engine" and spec.dtypes == ("float32",) and spec.ranks == tuple(range(9))
    assert list(spec.layers)[:3] == ["add_2d", "sub_2d", "mul_2d"]
    assert {op: b.construct(2) for op, b in list(spec.ops.items())[:3]} == {
        "add": "add_2d",
        "subtract": "sub_2d",
        "multiply": "mul_2d",
    }
    # every other rank: one rank-generic layer per elementwise op (the first nine)
    for rank in (0, 1, 3, 8):
        assert {op: b.construct(rank) for op, b in list(spec.ops.items())[:9]} == {
            "add": "add_nd",
            "subtract": "sub_nd",
            "multiply": "mul_nd",
            "divide": "div_nd",
            "maximum": "max_nd",
            "minimum": "min_nd",
            "negative": "neg_nd",
            "relu": "relu_nd",
            "copy": "copy_nd",
        }
    assert spec.layers["add_nd"].ranks == spec.ranks and spec.layers["add_2d"].ranks == (2,)
    assert spec.header == "gcc_engine.h"
    assert "class Engine" in spec.templates["engine"]
    assert "${layer_table}" in spec.templates["engine"]
    assert (spec.compile.language, spec.compile.std) == ("c++", "c++17")


def test_examplejson_tokens_are_the_guides():
    spec = load_backend("examplejson")
    names = spec.op_names()
    guide = {"add": "add", "sub": "subtract", "mul": "multiply"}
    assert {token: names[token] for token in guide} == guide
    # every other op is offered under its catalog name
    assert all(token == op for token, op in names.items() if token not in guide)
    assert len(names) > len(guide)
    assert not spec.compile.compiled


def test_json_kernel_names():
    spec = load_backend("json")
    assert spec.ops["relu"].name == "nn.relu"
    assert spec.ops["add"].name == "add"
    assert spec.supports("divide", "float64", 3)
    assert not spec.supports("divide", "complex64")  # a dtype the spec does not list


def test_supports_checks_op_dtype_and_rank():
    spec = load_backend("ccompiler")
    assert spec.supports("add", "float32", 2)
    assert not spec.supports("divide", "float32", 2)
    assert not spec.supports("add", "float32", 9)
    engine = load_backend("engine")
    assert engine.supports("add", "float32", 1) and engine.supports("relu", "float32", 0)
    assert not engine.supports("add", "float32", 9)
    assert not engine.supports("add", "int32", 1)
    assert not engine.supports("concatenate", "float32", 1)


def test_spec_model_is_frozen():
    spec = load_backend("json")
    with pytest.raises(AttributeError):
        spec.name = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        spec.ops["add"] = None  # type: ignore[index]


def test_template_syntax():
    assert placeholder_names("a ${x} $$ ${y} ${x}") == ("x", "y")
    # a bool is C's 1 or 0 (issue 31: every option value reaches C as a literal of its type)
    assert render("-O${n} $$ORIGIN ${flag}", {"n": 2, "flag": True}) == "-O2 $ORIGIN 1"
    assert render("${off}", {"off": False}) == "0"
    with pytest.raises(TemplateSyntaxError):
        placeholder_names("${unclosed")
    with pytest.raises(TemplateSyntaxError):
        placeholder_names("${9bad}")


# --------------------------------------------------------------------- search path


def user_backend(directory: Path, name: str = "mine", token: str = "plus") -> Path:
    """A user's examplejson-kind backend named ``name`` in ``directory``."""
    text = (SHIPPED_BACKENDS / "examplejson.yaml").read_text(encoding="utf-8")
    text = text.replace("name: examplejson ", f"name: {name} ").replace(
        "add: {token: add}", f"add: {{token: {token}}}"
    )
    path = directory / f"{name}.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_spec_path_finds_a_user_backend(tmp_path):
    user_backend(tmp_path)
    assert "mine" not in find_backends()
    spec = load_backend("mine", spec_path=[tmp_path])
    assert spec.op_names()["plus"] == "add"
    assert list(find_backends(tmp_path)) == [*SHIPPED, "mine"]


def test_env_var_finds_a_user_backend(tmp_path, monkeypatch):
    other = tmp_path / "other"
    other.mkdir()
    user_backend(other, "theirs")
    monkeypatch.setenv(ENV_VAR, f"{tmp_path}{os.pathsep}{other}")
    assert load_backend("theirs").name == "theirs"
    assert spec_dirs()[:2] == [tmp_path.resolve(), other.resolve()]


def test_spec_path_comes_before_env_var_and_shipped(tmp_path, monkeypatch):
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    user_backend(first, "examplejson", token="plus")
    user_backend(second, "examplejson", token="addition")
    monkeypatch.setenv(ENV_VAR, str(second))
    assert "addition" in load_backend("examplejson").op_names()
    assert "plus" in load_backend("examplejson", spec_path=first).op_names()
    monkeypatch.delenv(ENV_VAR)
    assert "add" in load_backend("examplejson").op_names()


def test_missing_spec_dir_and_unknown_backend_are_usage_errors(tmp_path, monkeypatch):
    with pytest.raises(UsageError, match="does not exist"):
        load_backend("ccompiler", spec_path=tmp_path / "absent")
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "absent"))
    with pytest.raises(UsageError, match=ENV_VAR):
        find_backends()
    monkeypatch.delenv(ENV_VAR)
    with pytest.raises(UsageError, match="unknown backend 'nope'") as info:
        load_backend("nope")
    assert "ccompiler" in info.value.hint


def test_edited_spec_is_reloaded(tmp_path):
    path = user_backend(tmp_path, "mine", token="plus")
    assert "plus" in load_backend("mine", spec_path=tmp_path).op_names()
    path.write_text(path.read_text().replace("{token: plus}", "{token: plus2}") + "\n# edited\n")
    assert "plus2" in load_backend("mine", spec_path=tmp_path).op_names()


def test_public_api_exposes_backends(tmp_path):
    user_backend(tmp_path)
    assert byoc.load_backend("mine", spec_path=tmp_path).kind.name == "examplejson"
    assert [s.name for s in byoc.list_backends(tmp_path)][-1] == "mine"


# ------------------------------------------------- ExampleJSON tokens from the spec

EJSON = "subgraph_0\n  input 0 2 2\n  input 1 2 2\n  plus 2 inputs: 0 1 shape: 2 2\n"


def test_examplejson_parser_takes_tokens_from_the_spec(tmp_path):
    with pytest.raises(GraphError, match="unknown op token 'plus'"):
        parse(EJSON, "examplejson")
    user_backend(tmp_path, "examplejson", token="plus")
    program = parse(EJSON, "examplejson", spec_path=[tmp_path])
    assert program.functions[0].nodes[-1].op == "add"


def test_examplejson_backend_can_be_chosen(tmp_path):
    user_backend(tmp_path, "mine")
    program = parse(EJSON, "examplejson", spec_path=tmp_path, examplejson_backend="mine")
    assert program.functions[0].nodes[-1].op == "add"
    assert examplejson_tokens(tmp_path, "mine")["plus"] == "add"
    with pytest.raises(UsageError, match="c_source backend"):
        examplejson_tokens(None, "ccompiler")


def test_printer_uses_the_spec_tokens(tmp_path):
    user_backend(tmp_path, "mine")
    program = parse(EJSON, "examplejson", spec_path=tmp_path, examplejson_backend="mine")
    assert "plus 2 inputs: 0 1" in byoc.api.print_program(
        program, "examplejson", spec_path=tmp_path, examplejson_backend="mine"
    )


def test_grammar_does_not_import_the_spec_package():
    grammar = Path(byoc.__file__).resolve().parent.parent / "grammar"
    for source in grammar.glob("*.py"):
        text = source.read_text(encoding="utf-8")
        assert "byoc.spec" not in text and "from ..spec" not in text, source.name


def test_load_backend_file_with_explicit_catalog(tmp_path):
    from byoc.spec import load_catalog

    spec = load_backend_file(SHIPPED_BACKENDS / "json.yaml", load_catalog())
    assert spec.name == "json"
