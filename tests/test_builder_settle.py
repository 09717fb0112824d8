"""``FunctionBuilder.settle`` types statements early, while they are in cache; it must
never change what ``finish`` returns or which error it reports.

Each test builds the same statements twice, once with ``settle`` switched off, and
compares the outcomes: equal functions with equal node locations, or the same error
(class, message, location and hint).
"""

from __future__ import annotations

from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from byoc.api import load_catalog, parse
from byoc.builder import FunctionBuilder
from byoc.errors import ByocError, Location
from byoc.ir import TensorType

CATALOG = load_catalog()
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

PARAMS = {
    "x": TensorType((2, 3), "float32"),
    "y": TensorType((3,), "float32"),
    "z": TensorType((4,), "float32"),
}
NODES = [f"v{i}" for i in range(10)]
CONSTANTS = ["k0", "k1"]
OPS = ["add", "subtract", "negative", "relu", "concatenate", "no_such_op"]


def _outcome(run):
    """What running ``run`` gives: the function and its node locations, or the error."""
    try:
        fn = run()
    except ByocError as exc:
        return ("error", type(exc).__name__, exc.message, exc.location, exc.hint)
    return ("ok", fn, [n.loc for n in fn.nodes])


def _without_settle(run):
    with mock.patch.object(FunctionBuilder, "settle", lambda self: None):
        return _outcome(run)


@st.composite
def statement_lists(draw):
    """Parameters, constants and nodes in a random order, each node with a flag for
    whether ``settle`` runs after it. Inputs mostly name something defined earlier,
    so that many lists type in source order; the rest use names defined later, names
    never defined, cycles, a duplicate, wrong declared types and bad arities."""
    steps = []
    defined = list(PARAMS)
    pending = list(CONSTANTS)
    for i in range(draw(st.integers(1, len(NODES)))):
        if pending and draw(st.booleans()):
            steps.append(("constant", pending.pop(), draw(st.sampled_from(list(PARAMS.values()))), False))
            defined.append(steps[-1][1])
        earlier = st.sampled_from(defined)
        anything = st.sampled_from([*defined, *NODES, *CONSTANTS, "missing"])
        inputs = draw(st.lists(st.one_of(earlier, earlier, earlier, anything), min_size=1, max_size=3))
        output = NODES[i] if draw(st.integers(0, 15)) else draw(st.sampled_from(NODES))
        declared = draw(st.one_of(st.none(), st.none(), st.sampled_from(list(PARAMS.values()))))
        op = draw(st.sampled_from(OPS))
        steps.append(("node", output, op, tuple(inputs), declared, draw(st.booleans())))
        defined.append(output)
    result = draw(st.sampled_from([s[1] for s in steps if s[0] == "node"] + ["missing"]))
    return steps, result


def _build(steps, result):
    fb = FunctionBuilder(CATALOG, "f", Location(None, 1, 1))
    for name, type_ in PARAMS.items():
        fb.add_param(name, type_, Location(None, 1, 2))
    for line, step in enumerate(steps, 2):
        loc = Location(None, line, 3)
        if step[0] == "constant":
            _, name, type_, _ = step
            fb.add_constant(name, type_, (0.0,) * type_.size, loc)
            continue
        _, output, op, inputs, declared, settle_after = step
        fb.add_node((output,), op, inputs, loc, declared=declared, locate=lambda i, loc=loc: _shift(loc, i))
        if settle_after:
            fb.settle()
    return fb.finish([(result, Location(None, len(steps) + 2, 10))])


def _shift(loc: Location, i: int) -> Location:
    return Location(loc.file, loc.line, loc.column + 10 + i)


@SETTINGS
@given(statement_lists())
def test_settle_never_changes_the_function_or_the_error(case):
    steps, result = case
    assert _outcome(lambda: _build(steps, result)) == _without_settle(lambda: _build(steps, result))


def test_settle_types_early_and_finish_resumes():
    """The fast case really is taken: settle types what it can, finish the rest."""
    fb = FunctionBuilder(CATALOG, "f", Location(None, 1, 1))
    fb.add_param("x", PARAMS["x"], None)
    fb.add_node(("a",), "relu", ("x",), Location(None, 2, 1))
    fb.add_node(("b",), "add", ("a", "k"), Location(None, 3, 1))  # k comes later
    fb.settle()
    assert [n.name for n in fb._nodes] == ["a"]
    fb.add_constant("k", PARAMS["y"], (1.0, 2.0, 3.0), Location(None, 4, 1))
    fn = fb.finish([("b", Location(None, 5, 1))])
    assert [n.name for n in fn.nodes] == ["a", "b"] and fn.output_types == (PARAMS["x"],)


def test_settle_defers_errors_to_finish():
    """An error met by settle is reported by finish, after finish's own earlier checks."""
    fb = FunctionBuilder(CATALOG, "f", Location(None, 1, 1))
    fb.add_param("z", PARAMS["z"], None)
    fb.add_node(("a",), "add", ("z", "z"), Location(None, 2, 1), declared=PARAMS["y"])
    fb.settle()  # meets the shape mismatch and keeps quiet
    fb.add_node(("b",), "relu", ("a",), Location(None, 3, 1))
    fb.settle()
    try:
        fb.finish([("nowhere", Location(None, 4, 8))])
    except ByocError as exc:
        assert "undefined name 'nowhere'" in exc.message and exc.location == Location(None, 4, 8)
    else:
        raise AssertionError("finish accepted an undefined output")


# ---------------------------------------------------------------- front ends


def _dsl(lines: int, fault: str, at: int) -> str:
    body = ["graph main(x: float32[4, 4], y: float32[4]) {"]
    for i in range(lines):
        prev = f"t{i - 1}" if i else "x"
        body.append(f"  t{i} = {'add' if i % 2 else 'multiply'}({prev}, y)")
    fault_lines = {
        "none": None,
        "forward": f"  u = add(t{lines - 1}, w)",
        "undefined": "  u = add(t0, nowhere)",
        "shape": "  u = add(t0, z)",
        "duplicate": "  t1 = relu(t0)",
        "op": "  u = no_such_op(t0)",
        "shadow": "  u = @ccompiler {\n    q = add(t0, y)\n    return negative(q)\n  }",
    }
    if fault_lines[fault]:
        body.insert(1 + at, fault_lines[fault])
    body.insert(1 + lines // 2, "  r = @ccompiler {\n    p = add(t1, y)\n    return relu(p)\n  }")
    body.insert(1 + lines // 3, "  z = concatenate(y, y)")
    body.insert(1 + 2 * lines // 3, "  w = negative(x)")
    if fault == "shadow":
        body.append("  q = relu(x)")  # defined after the region that also defines q
    body.append(f"  return t{lines - 1}, r")
    return "\n".join(body) + "\n}\n"


def _examplejson(lines: int, fault: str, at: int) -> str:
    out = ["subgraph_0", "  input 0 4 4", "  input 1 4 4"]
    for i in range(2, lines):
        out.append(f"  {'add' if i % 2 else 'mul'} {i} inputs: {i - 1} 1 shape: 4 4")
    fault_lines = {
        "none": None,
        "forward": f"  sub {lines + 5} inputs: 2 {lines + 6} shape: 4 4",
        "undefined": f"  sub {lines + 5} inputs: 2 {lines * 9} shape: 4 4",
        "shape": f"  sub {lines + 5} inputs: 2 3 shape: 4 5",
        "duplicate": "  sub 7 inputs: 2 3 shape: 4 4",
        "op": f"  div {lines + 5} inputs: 2 3 shape: 4 4",
        "shadow": None,
    }
    if fault_lines[fault]:
        out.insert(3 + at, fault_lines[fault])
    out.append(f"  add {lines + 6} inputs: 2 3 shape: 4 4")
    return "\n".join(out) + "\n"


FAULTS = ["none", "forward", "undefined", "shape", "duplicate", "op", "shadow"]


@settings(max_examples=40, deadline=None)
@given(
    st.sampled_from(["graph", "examplejson"]),
    st.integers(20, 700),
    st.sampled_from(FAULTS),
    st.floats(0, 1),
)
def test_front_ends_give_the_same_outcome_with_and_without_settle(language, lines, fault, where):
    """Texts long enough for several batches (the fast paths read up to 256 lines at
    a time), with one fault at a random line."""
    make = _dsl if language == "graph" else _examplejson
    text = make(lines, fault, int(where * (lines - 4)))
    assert _outcome(lambda: parse(text, language).functions[0]) == _without_settle(
        lambda: parse(text, language).functions[0]
    )
