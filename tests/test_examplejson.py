"""ExampleJSON: the BYOC guide's and TVM's texts, layout tolerance, printing."""

from __future__ import annotations

import pytest
from conftest import GUIDE_SUBGRAPH, TVM_EXTERNAL_RUNTIME, parse_ejson_text, parse_graph_text, roundtrip

from byoc.api import examplejson_tokens, parse_file, print_program
from byoc.errors import GraphError
from byoc.grammar.examplejson_parser import parse_examplejson
from byoc.ir import Program, TensorType

F32_10x10 = TensorType((10, 10), "float32")

GUIDE_TEXT = GUIDE_SUBGRAPH.read_text(encoding="utf-8")
TVM_TEXT = TVM_EXTERNAL_RUNTIME.read_text(encoding="utf-8")


def _check_guide_function(fn, name: str) -> None:
    assert fn.name == name
    assert fn.backend is None
    assert fn.constants == ()
    assert [p.name for p in fn.params] == ["v0", "v1", "v2", "v3"]
    assert all(p.type == F32_10x10 for p in fn.params)
    assert [(n.name, n.op, n.inputs) for n in fn.nodes] == [
        ("v4", "add", ("v0", "v1")),
        ("v5", "subtract", ("v4", "v2")),
        ("v6", "multiply", ("v5", "v3")),
    ]
    assert all(n.types == (F32_10x10,) for n in fn.nodes)
    assert all(n.attrs == () and n.callee is None for n in fn.nodes)
    assert fn.outputs == ("v6",)
    assert fn.output_types == (F32_10x10,)


def test_seed_files_are_the_reference_texts():
    assert GUIDE_TEXT.startswith("subgraph_0\n  input 0 10 10\n")
    assert GUIDE_TEXT.endswith("  mul 6 inputs: 5 3 shape: 10 10\n")
    assert TVM_TEXT.startswith("json_rt_0\ninput 0 10 10\n")
    assert not TVM_TEXT.endswith("\n"), "TVM's text has no trailing newline"
    assert TVM_TEXT.endswith("mul 6 inputs: 5 3 shape: 10 10")


def test_guide_subgraph_parses():
    program = parse_ejson_text(GUIDE_TEXT)
    assert len(program.functions) == 1
    _check_guide_function(program.functions[0], "subgraph_0")


def test_tvm_external_runtime_parses():
    program = parse_ejson_text(TVM_TEXT)
    assert [fn.name for fn in program.functions] == ["json_rt_0", "json_rt_1"]
    for fn in program.functions:
        _check_guide_function(fn, fn.name)
    assert program.function("json_rt_1") == program.functions[1]


def test_parse_file_uses_extension_and_records_locations():
    program = parse_file(GUIDE_SUBGRAPH)
    fn = program.functions[0]
    assert fn.loc is not None and fn.loc.file == str(GUIDE_SUBGRAPH)
    assert (fn.loc.line, fn.loc.column) == (1, 1)
    assert [(p.loc.line, p.loc.column) for p in fn.params] == [(2, 3), (3, 3), (4, 3), (5, 3)]
    assert [(n.loc.line, n.loc.column) for n in fn.nodes] == [(6, 3), (7, 3), (8, 3)]


def test_bytes_and_str_give_the_same_program():
    assert parse_ejson_text(GUIDE_TEXT.encode("utf-8")) == parse_ejson_text(GUIDE_TEXT)


def _variants(clean: str) -> dict[str, str]:
    lines = clean.splitlines()
    return {
        "crlf": "\r\n".join(lines) + "\r\n",
        "crlf-no-final-newline": "\r\n".join(lines),
        "blank-lines": "\n\n" + "\n\n\n".join(lines) + "\n\n",
        "blank-lines-with-spaces": "  \n" + "\n \t \n".join(lines) + "\n   \n",
        "trailing-spaces": "\n".join(line + "   " for line in lines) + "\n",
        "trailing-tabs": "\n".join(line + "\t \t" for line in lines) + "\n",
        "tab-indent": "\n".join("\t" + line.strip() for line in lines) + "\n",
        "tabs-between-words": "\n".join(line.replace(" ", "\t") for line in lines) + "\n",
        "deep-indent": "\n".join("        " + line.strip() for line in lines) + "\n",
        "unindented": "\n".join(line.strip() for line in lines),
        "wide-spacing": "\n".join(line.replace(" ", "    ") for line in lines) + "\n",
        "no-space-after-colons": clean.replace("inputs: ", "inputs:").replace("shape: ", "shape:"),
        "one-odd-line": clean.replace("sub 5 inputs: 4 2", "sub 5 inputs:4  2"),
        "leading-zero-ids": clean.replace("inputs: 5 3", "inputs: 005 03"),
        "everything": "\r\n \r\n"
        + "\r\n\r\n".join("\t " + line.strip().replace("inputs: ", "inputs:") + " \t" for line in lines)
        + "\r\n\t\r\n",
    }


@pytest.mark.parametrize("source", ["guide", "tvm"])
@pytest.mark.parametrize("variant", sorted(_variants(GUIDE_TEXT)))
def test_layout_variants_give_the_same_ir(source: str, variant: str):
    clean = GUIDE_TEXT if source == "guide" else TVM_TEXT
    expected = parse_ejson_text(clean)
    text = _variants(clean)[variant]
    if source == "guide":
        assert text != clean
    assert parse_ejson_text(text) == expected


def test_locations_in_a_crlf_text_match_the_lf_text():
    lf = parse_ejson_text(GUIDE_TEXT).functions[0]
    crlf = parse_ejson_text(GUIDE_TEXT.replace("\n", "\r\n")).functions[0]
    assert [n.loc for n in crlf.nodes] == [n.loc for n in lf.nodes]
    assert [p.loc for p in crlf.params] == [p.loc for p in lf.params]


def test_out_of_order_lines_are_sorted_topologically():
    text = "sg\n  input 0 4\n  add 2 inputs: 1 0 shape: 4\n  mul 1 inputs: 0 0 shape: 4\n  sub 3 inputs: 2 1 shape: 4\n"
    fn = parse_ejson_text(text).functions[0]
    assert [n.name for n in fn.nodes] == ["v1", "v2", "v3"]
    assert fn.outputs == ("v3",)
    assert roundtrip(parse_ejson_text(text), "examplejson") == parse_ejson_text(text)


def test_dag_and_broadcasting_shapes():
    text = (
        "dag\n"
        "  input 0 4 3\n"
        "  input 1 3\n"
        "  add 2 inputs: 0 1 shape: 4 3\n"
        "  mul 3 inputs: 2 2 shape: 4 3\n"
        "  sub 4 inputs: 3 0 shape: 4 3\n"
    )
    fn = parse_ejson_text(text).functions[0]
    assert fn.params[1].type == TensorType((3,), "float32")
    assert fn.nodes[1].inputs == ("v2", "v2")
    assert fn.output_types == (TensorType((4, 3), "float32"),)


def test_scalar_inputs_and_nodes_have_rank_zero():
    fn = parse_ejson_text("s\n  input 0\n  add 1 inputs: 0 0 shape:\n").functions[0]
    assert fn.params[0].type == TensorType((), "float32")
    assert fn.nodes[0].type == TensorType((), "float32")


def test_custom_op_tokens(catalog):
    text = "sg\n  input 0 4\n  plus 1 inputs: 0 0 shape: 4\n  relu 2 inputs: 1 shape: 4\n"
    program = parse_examplejson(text, catalog, tokens={"plus": "add", "relu": "relu"})
    assert [n.op for n in program.functions[0].nodes] == ["add", "relu"]
    with pytest.raises(GraphError, match="unknown op token 'plus'"):
        parse_examplejson(text, catalog, tokens=examplejson_tokens())


def test_printer_reproduces_the_guide_text_exactly():
    assert print_program(parse_ejson_text(GUIDE_TEXT), "examplejson") == GUIDE_TEXT


def test_printer_indents_tvm_text_in_guide_layout():
    printed = print_program(parse_ejson_text(TVM_TEXT), "examplejson")
    assert printed.splitlines() == [
        line if not line.strip() or line.startswith("json_rt") else "  " + line
        for line in TVM_TEXT.replace("\n\n", "\n").splitlines()
    ]


@pytest.mark.parametrize("text", [GUIDE_TEXT, TVM_TEXT], ids=["guide", "tvm"])
def test_print_parse_round_trip(text: str):
    program = parse_ejson_text(text)
    again = roundtrip(program, "examplejson")
    assert again == program
    assert print_program(again, "examplejson") == print_program(program, "examplejson")


@pytest.mark.parametrize("text", [GUIDE_TEXT, TVM_TEXT], ids=["guide", "tvm"])
def test_examplejson_converts_to_graph_and_back(text: str):
    program = parse_ejson_text(text)
    as_graph = print_program(program, "graph")
    from_graph = parse_graph_text(as_graph)
    assert isinstance(from_graph, Program)
    assert from_graph == program
    assert print_program(from_graph, "examplejson") == print_program(program, "examplejson")
