"""The graph DSL: the guide's whole graph, regions, constants, attributes, printing."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import GUIDE_WHOLE_GRAPH, parse_graph_text, roundtrip

from byoc.api import parse_file, print_program
from byoc.errors import ParseError
from byoc.grammar.graph_statements import KEYWORDS
from byoc.ir import ANON_PREFIX, CALL_OP, TensorType
from byoc.validate import validate_program

F32_10x10 = TensorType((10, 10), "float32")


def _anon(name: str) -> bool:
    return name.startswith(ANON_PREFIX)


# ------------------------------------------------------------------ the guide


@pytest.fixture(scope="module")
def guide():
    return parse_file(GUIDE_WHOLE_GRAPH)


def test_guide_whole_graph_signature(guide):
    assert len(guide.functions) == 1
    main = guide.functions[0]
    assert main.name == "main"
    assert main.backend is None
    assert [p.name for p in main.params] == ["x"] + [f"w{i}" for i in range(8)]
    assert all(p.type == F32_10x10 for p in main.params)
    assert main.constants == ()
    assert len(main.outputs) == 1
    assert main.output_types == (TensorType((30, 10), "float32"),)


@pytest.mark.parametrize(
    ("index", "name", "weights"), [(0, "s0", ("w0", "w1", "w2")), (1, "s1", ("w3", "w4", "w5"))]
)
def test_guide_regions(guide, index, name, weights):
    main = guide.functions[0]
    calls = [n for n in main.nodes if n.op == CALL_OP]
    assert [n.outputs for n in calls] == [("s0",), ("s1",)]
    node = calls[index]
    assert node.name == name
    assert node.types == (F32_10x10,)
    callee = node.callee
    assert callee is not None and callee is main.regions()[index]
    assert callee.backend == "ccompiler"
    assert callee.name is None
    # The callee's params are the captured names, in order of first use.
    assert tuple(p.name for p in callee.params) == ("x", *weights)
    assert node.inputs == ("x", *weights)
    assert all(p.type == F32_10x10 for p in callee.params)
    ops = [(n.op, n.inputs) for n in callee.nodes]
    first = callee.nodes[0].name
    assert _anon(first)
    assert ops == [
        ("add", ("x", weights[0])),
        ("subtract", (first, weights[1])),
        ("multiply", ("t", weights[2])),
    ]
    assert callee.nodes[1].name == "t"
    assert callee.outputs == (callee.nodes[2].name,)
    assert _anon(callee.outputs[0])
    assert callee.output_types == (F32_10x10,)


def test_guide_host_part(guide):
    main = guide.functions[0]
    host = [n for n in main.nodes if n.op != CALL_OP]
    assert [n.op for n in host] == ["add", "subtract", "concatenate"]
    add, sub, cat = host
    assert add.inputs == ("x", "w6") and _anon(add.name)
    assert sub.name == "h" and sub.inputs == (add.name, "w7")
    assert cat.inputs == ("s0", "s1", "h")
    assert cat.attrs == (("axis", 0),)
    assert cat.type == TensorType((30, 10), "float32")
    assert main.outputs == (cat.name,)
    # Nodes are in topological order: every input is defined before use.
    seen = {p.name for p in main.params}
    for node in main.nodes:
        assert set(node.inputs) <= seen
        seen.update(node.outputs)


def test_guide_locations(guide):
    main = guide.functions[0]
    assert main.loc.file == str(GUIDE_WHOLE_GRAPH)
    assert (main.loc.line, main.loc.column) == (4, 7)
    s0 = main.nodes[0]
    assert (s0.loc.line, s0.loc.column) == (8, 3)
    assert (s0.callee.params[0].loc.line, s0.callee.params[0].loc.column) == (9, 22)  # the x in `add(x, w0)`


def test_guide_is_valid_ir(guide, catalog):
    validate_program(guide, catalog)


def test_guide_round_trips_and_prints_nested_calls(guide):
    text = print_program(guide, "graph")
    assert "t = subtract(add(x, w0), w1)" in text
    assert "return concatenate(s0, s1, h, axis=0)" in text
    assert "@ccompiler {" in text
    again = parse_graph_text(text)
    assert again == guide
    assert print_program(again, "graph") == text


# ------------------------------------------------------------------ regions


def test_capture_order_is_first_use_not_parameter_order():
    program = parse_graph_text(
        """graph main(x: float32[4], y: float32[4], w: float32[4], z: float32[4]) {
          s, r = @ccompiler {
            t = add(negative(w), x)
            u = multiply(t, y)
            return u, z
          }
          return s
        }"""
    )
    node = program.functions[0].nodes[0]
    assert node.outputs == ("s", "r")
    assert tuple(p.name for p in node.callee.params) == ("w", "x", "y", "z")
    assert node.inputs == ("w", "x", "y", "z")
    assert node.callee.outputs == ("u", "z")


def test_multi_output_region():
    program = parse_graph_text(
        """graph main(x: float32[2, 3], y: float32[3]) {
          a, b = @engine {
            p = add(x, y)
            q = multiply(y, x)
            return p, negative(q)
          }
          return concatenate(a, b, axis=1), b
        }"""
    )
    main = program.functions[0]
    call = main.nodes[0]
    assert call.op == CALL_OP
    assert call.outputs == ("a", "b")
    assert call.types == (TensorType((2, 3), "float32"),) * 2
    assert call.callee.backend == "engine"
    assert call.callee.outputs[0] == "p"
    assert _anon(call.callee.outputs[1])
    assert main.output_types == (TensorType((2, 6), "float32"), TensorType((2, 3), "float32"))
    assert roundtrip(program, "graph") == program


def test_region_symbol_name():
    program = parse_graph_text(
        """graph main(x: float32[4]) {
          s = @ccompiler as my_sym { return add(x, x) }
          t = @ccompiler { return add(s, x) }
          return t
        }"""
    )
    named, unnamed = program.functions[0].regions()
    assert named.name == "my_sym" and named.backend == "ccompiler"
    assert unnamed.name is None
    text = print_program(program, "graph")
    assert "@ccompiler as my_sym {" in text
    assert roundtrip(program, "graph") == program


def test_a_region_lists_its_parameters_in_the_order_a_caller_needs():
    """`@b as name(w, x)`: the region's parameters in the listed order, not the order
    of first use; the printer writes the list only where the order differs from it."""
    program = parse_graph_text(
        """graph main(x: float32[4], w: float32[4], b: float32[4]) {
          s = @ccompiler as blk(b, w, x) { return add(subtract(x, w), b) }
          t = @ccompiler(x, w) { return multiply(x, w) }
          u = @ccompiler() {
            k = const float32[4] [1, -2, 3, -4]
            return relu(k)
          }
          return s, t, u
        }"""
    )
    listed, in_use_order, no_inputs = program.functions[0].regions()
    assert [p.name for p in listed.params] == ["b", "w", "x"]
    call = program.functions[0].nodes[0]
    assert call.inputs == ("b", "w", "x")
    assert [p.name for p in in_use_order.params] == ["x", "w"] and no_inputs.params == ()
    text = print_program(program, "graph")
    assert "@ccompiler as blk(b, w, x) {" in text
    assert "@ccompiler {" in text and "@ccompiler(" not in text  # the same order as first use
    assert roundtrip(program, "graph") == program


def test_region_returning_captured_names_and_nested_regions():
    program = parse_graph_text(
        """graph main(x: float32[4], k: float32[4]) {
          s, t = @outer {
            r = @inner { return negative(x) }
            return r, k
          }
          return s, t
        }"""
    )
    outer = program.functions[0].nodes[0].callee
    assert outer.backend == "outer"
    assert [p.name for p in outer.params] == ["x", "k"]
    inner = outer.nodes[0].callee
    assert inner.backend == "inner" and [p.name for p in inner.params] == ["x"]
    assert outer.outputs == ("r", "k")
    assert roundtrip(program, "graph") == program


def test_same_local_name_in_two_regions():
    program = parse_graph_text(
        """graph main(x: float32[4]) {
          a = @cc { t = add(x, x)  return t }
          b = @cc { t = multiply(x, x)  return t }
          return add(a, b)
        }"""
    )
    a, b = program.functions[0].regions()
    assert a.nodes[0].name == b.nodes[0].name == "t"
    assert (a.nodes[0].op, b.nodes[0].op) == ("add", "multiply")


# ---------------------------------------------------------------- constants


def test_constants_list_fill_scalar_and_ints():
    program = parse_graph_text(
        """graph main(x: float32[3]) {
          k = const float32[3] [0.5, 1, -2e3]
          f = const int32[2, 2] 7
          g = const float64[] 2.5
          e = const int64[0] []
          n = const int64[2] [-3, +4]
          return add(x, k), f, g, e, n
        }"""
    )
    consts = {c.name: c for c in program.functions[0].constants}
    assert list(consts) == ["k", "f", "g", "e", "n"]
    assert consts["k"].type == TensorType((3,), "float32")
    # values are flat, read-only arrays of the constant's dtype
    assert consts["k"].values.dtype == np.float32 and consts["k"].values.tolist() == [0.5, 1.0, -2000.0]
    assert consts["f"].values.dtype == np.int32 and consts["f"].values.tolist() == [7, 7, 7, 7]
    assert consts["f"].array.shape == (2, 2)
    assert consts["g"].type == TensorType((), "float64") and consts["g"].values.tolist() == [2.5]
    assert consts["e"].values.shape == (0,) and consts["e"].values.dtype == np.int64
    assert consts["n"].values.tolist() == [-3, 4]
    assert not any(c.values.flags.writeable for c in consts.values())
    assert roundtrip(program, "graph") == program


def test_constants_used_by_nodes_and_regions():
    program = parse_graph_text(
        """graph main(x: float32[2, 2]) {
          k = const float32[2] [1, 2]
          s = @ccompiler { return multiply(x, k) }
          return s
        }"""
    )
    callee = program.functions[0].regions()[0]
    assert [p.name for p in callee.params] == ["x", "k"]
    assert callee.params[1].type == TensorType((2,), "float32")


# ---------------------------------------------------------------- attributes


@pytest.mark.parametrize(
    ("call", "axis", "shape"),
    [
        ("concatenate(x, y)", 0, (4, 3)),
        ("concatenate(x, y, axis=0)", 0, (4, 3)),
        ("concatenate(x, y, axis=1,)", 1, (2, 6)),
        ("concatenate(x, y, axis = -1)", -1, (2, 6)),
        ("concatenate(x, y, axis=+1)", 1, (2, 6)),
    ],
)
def test_keyword_attributes(call, axis, shape):
    program = parse_graph_text(
        f"graph main(x: float32[2, 3], y: float32[2, 3]) {{\n  c = {call}\n  return c\n}}\n"
    )
    node = program.functions[0].nodes[0]
    assert node.attrs == (("axis", axis),)
    assert node.attr("axis") == axis
    assert node.type == TensorType(shape, "float32")
    assert roundtrip(program, "graph") == program


def test_ops_without_attributes_have_none():
    node = parse_graph_text("graph g(x: int32[2]) { y = relu(x) return y }").functions[0].nodes[0]
    assert node.attrs == ()
    with pytest.raises(KeyError):
        node.attr("axis")


# ---------------------------------------------------------------- layout


def test_comments_and_free_layout():
    commented = parse_graph_text(
        """# leading comment
        graph main(   # the parameters
            x: float32[4],   # first
            y: float32[4],   # trailing comma next
        ) {   # body
          # a full-line comment, with symbols $ @ { } ( ) = inside
          z = add(x,y)#no spaces
          return z # done
        }
        # trailing comment without newline"""
    )
    plain = parse_graph_text("graph main(x: float32[4], y: float32[4]) {\n  z = add(x, y)\n  return z\n}\n")
    assert commented == plain


def test_crlf_and_tabs():
    text = "graph main(x: float32[4]) {\n\tz = negative(x)\n\treturn z\n}\n"
    assert parse_graph_text(text.replace("\n", "\r\n")) == parse_graph_text(text)


def test_several_graphs_in_one_file():
    program = parse_graph_text(
        "graph a(x: float32[4]) { return negative(x) }\ngraph b(x: int64[2, 2]) { return x }\n"
    )
    assert [fn.name for fn in program.functions] == ["a", "b"]
    assert program.function("b").nodes == ()
    assert program.function("b").outputs == ("x",)
    assert roundtrip(program, "graph") == program


def test_use_before_definition_is_ordered_and_round_trips():
    program = parse_graph_text(
        """graph main(x: float32[4]) {
          a = add(negative(b), c)
          b = add(negative(x), x)
          c = multiply(b, x)
          return a
        }"""
    )
    fn = program.functions[0]
    named = [n.name for n in fn.nodes if not _anon(n.name)]
    assert named == ["b", "c", "a"]
    assert roundtrip(program, "graph") == program


def test_printed_text_is_a_fixed_point(guide):
    text = print_program(guide, "graph")
    assert print_program(parse_graph_text(text), "graph") == text
    assert text.endswith("}\n")


@pytest.mark.parametrize("word", KEYWORDS)
@pytest.mark.parametrize(
    "text",
    [
        "graph main(x: float32[2]) {{\n  {w} = add(x, x)\n  return {w}\n}}\n",
        "graph main(x: float32[2]) {{\n  {w} = add(x, x, )\n  return {w}\n}}\n",
        "graph main(x: float32[2]) {{\n  a, {w} = @ccompiler {{\n    return x, x\n  }}\n  return a\n}}\n",
        "graph main(x: float32[2]) {{\n  {w} = const float32[2] 1\n  return x\n}}\n",
    ],
    ids=["fast-path statement", "word-level statement", "region output", "constant"],
)
def test_keywords_cannot_be_assigned(word, text):
    """No statement binds a keyword; a longer name that starts with one is an ordinary name."""
    with pytest.raises(ParseError):
        parse_graph_text(text.format(w=word))
    parse_graph_text(text.format(w=f"{word}_1"))
