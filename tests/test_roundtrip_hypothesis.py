"""Property tests: random valid programs round-trip through print and parse in
both languages, and no input text makes a parser raise anything but ByocError."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from conftest import GUIDE_SUBGRAPH, GUIDE_WHOLE_GRAPH, TVM_EXTERNAL_RUNTIME
from fuzz_strategies import fuzz_settings
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import byoc.spec
from byoc.api import parse, print_program
from byoc.errors import ByocError
from byoc.grammar.graph_statements import KEYWORDS
from byoc.ir import Program, TensorType, is_integer
from byoc.validate import validate_program

CATALOG = byoc.spec.load_catalog()

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FUZZ_SETTINGS = fuzz_settings(300)  # BYOC_FUZZ_EXAMPLES=N runs N (tests/fuzz_strategies.py)

DTYPES = ("float32", "float64", "int32", "int64", "float16", "bfloat16", "int16")
"""The dtypes of random graphs: each takes every op of UNARY, BINARY and concatenate."""
UNARY = ("negative", "relu", "copy")
BINARY = ("add", "subtract", "multiply", "maximum", "minimum")
FLOAT_ONLY_BINARY = ("divide",)
NAME_PREFIXES = ("v", "t", "_x", "Tmp", "a_b", "add", "graph_", "return_", "x")


def _type_text(t: TensorType) -> str:
    return f"{t.dtype}[{', '.join(map(str, t.shape))}]"


@dataclass
class _Scope:
    """Values visible at one point of a body: (text, type, is a plain name)."""

    values: list[tuple[str, TensorType]] = field(default_factory=list)


class _Names:
    def __init__(self, draw) -> None:
        self.draw = draw
        self.count = 0

    def fresh(self) -> str:
        self.count += 1
        return f"{self.draw(st.sampled_from(NAME_PREFIXES))}{self.count}"


shapes = st.lists(st.integers(0, 3), min_size=0, max_size=4).map(tuple)
nonzero_shapes = st.lists(st.integers(1, 3), min_size=0, max_size=4).map(tuple)
tensor_types = st.builds(TensorType, st.one_of(nonzero_shapes, shapes), st.sampled_from(DTYPES))


def _number_text(draw, dtype: str) -> str:
    if is_integer(dtype):
        bound = int(np.iinfo(dtype).max)
        value = draw(st.one_of(st.integers(-1000, 1000), st.integers(-bound - 1, bound)))
        return draw(st.sampled_from([str(value), f"+{value}" if value >= 0 else str(value)]))
    limit = 60000 if dtype == "float16" else 10**6  # float16 ends at 65504
    if draw(st.booleans()):
        return str(draw(st.integers(-limit, limit)))
    value = draw(st.floats(-limit, limit, allow_nan=False, allow_infinity=False))
    forms = [repr(value), f"{value:.3e}", f"{value:.6f}"]
    return draw(st.sampled_from(forms))


def _expr(draw, scope: _Scope, names: _Names, depth: int) -> tuple[str, TensorType]:
    """An expression over the scope: a name, or a (possibly nested) op call, and its type."""
    text, t = draw(st.sampled_from(scope.values))
    if depth <= 0:
        return text, t
    kind = draw(st.sampled_from(("name", "unary", "binary", "concat")))
    if kind == "name":
        return text, t
    text, t = _expr(draw, scope, names, depth - 1)
    if kind == "unary":
        return f"{draw(st.sampled_from(UNARY))}({text})", t
    if kind == "binary" or t.rank == 0:
        ops = BINARY + (FLOAT_ONLY_BINARY if not is_integer(t.dtype) else ())
        right = _same_typed(draw, scope, t, text, depth - 1)
        args = [text, right] if draw(st.booleans()) else [right, text]
        return f"{draw(st.sampled_from(ops))}({', '.join(args)})", t
    parts = [text] + [_same_typed(draw, scope, t, text, depth - 1) for _ in range(draw(st.integers(0, 2)))]
    axis = draw(st.integers(-t.rank, t.rank - 1))
    shape = list(t.shape)
    shape[axis] *= len(parts)
    attr = draw(st.sampled_from([f", axis={axis}", f", axis = {axis}", f",axis={axis},"]))
    if axis == 0 and draw(st.booleans()):
        attr = ""
    return f"concatenate({', '.join(parts)}{attr})", TensorType(tuple(shape), t.dtype)


def _same_typed(draw, scope: _Scope, t: TensorType, fallback: str, depth: int) -> str:
    """An expression of exactly type ``t``: a name of that type, ``fallback``, or an op of them."""
    text = draw(st.sampled_from([x for x, u in scope.values if u == t] + [fallback]))
    if depth <= 0 or draw(st.booleans()):
        return text
    if draw(st.booleans()):
        return f"{draw(st.sampled_from(UNARY))}({text})"
    ops = BINARY + (FLOAT_ONLY_BINARY if not is_integer(t.dtype) else ())
    other = _same_typed(draw, scope, t, fallback, depth - 1)
    return f"{draw(st.sampled_from(ops))}({text}, {other})"


def _body(draw, scope: _Scope, names: _Names, indent: str, depth: int, n_outputs: int) -> list[str]:
    lines: list[str] = []
    for _ in range(draw(st.integers(0, 5))):
        kind = draw(st.sampled_from(("node", "node", "node", "const", "region", "split")))
        if kind == "split":
            lines.append(indent + _split(draw, scope, names))
        elif kind == "const":
            t = draw(tensor_types)
            name = names.fresh()
            if t.size != 1 and draw(st.booleans()):
                values = _number_text(draw, t.dtype)
            else:
                values = "[" + ", ".join(_number_text(draw, t.dtype) for _ in range(t.size)) + "]"
            lines.append(f"{indent}{name} = const {_type_text(t)} {values}")
            scope.values.append((name, t))
        elif kind == "region" and depth > 0:
            inner = _Scope(list(scope.values))
            k = draw(st.integers(1, 3))
            targets = [names.fresh() for _ in range(k)]
            backend = draw(st.sampled_from(("ccompiler", "engine", "json")))  # names only: none builds
            symbol = f" as {names.fresh()}" if draw(st.booleans()) else ""
            lines.append(f"{indent}{', '.join(targets)} = @{backend}{symbol} {{")
            body = _body(draw, inner, names, indent + "  ", depth - 1, k)
            lines.extend(body[:-1])
            returned = body[-1]
            lines.append(returned.text)
            lines.append(f"{indent}}}")
            scope.values.extend(zip(targets, returned.types))
        else:
            text, t = _expr(draw, scope, names, 3)
            if text in {x for x, _ in scope.values}:
                text = f"copy({text})"
            name = names.fresh()
            lines.append(f"{indent}{name} = {text}")
            scope.values.append((name, t))
    outputs = [_expr(draw, scope, names, 2) for _ in range(n_outputs)]
    lines.append(_Return(f"{indent}return {', '.join(x for x, _ in outputs)}", [t for _, t in outputs]))
    return lines


def _split(draw, scope: _Scope, names: _Names) -> str:
    """``a, b, ... = split(expr, ...)``: given sizes, or equal parts from the target count."""
    text, t = _expr(draw, scope, names, 1)
    if t.rank == 0:
        text, t = f"unsqueeze({text}, axes=[0])", TensorType((1,), t.dtype)
    axis = draw(st.integers(-t.rank, t.rank - 1))
    size = t.shape[axis]
    if size and draw(st.booleans()):
        count = draw(st.integers(1, size).filter(lambda n: (n - 1) * -(-size // n) < size))
        chunk = -(-size // count)
        sizes = [chunk] * (count - 1) + [size - chunk * (count - 1)]
        attrs = f", axis={axis}"
    else:
        sizes = draw(st.lists(st.integers(0, size), min_size=1, max_size=3).filter(lambda v: sum(v) <= size))
        sizes[-1] += size - sum(sizes)
        attrs = f", axis={axis}, sizes=[{', '.join(map(str, sizes))}]"
    targets = [names.fresh() for _ in sizes]
    for name, part in zip(targets, sizes):
        shape = list(t.shape)
        shape[axis] = part
        scope.values.append((name, TensorType(tuple(shape), t.dtype)))
    return f"{', '.join(targets)} = split({text}{attrs})"


class _Return(str):
    def __new__(cls, text: str, types: list[TensorType]):
        obj = super().__new__(cls, text)
        obj.text = text
        obj.types = types
        return obj


@st.composite
def dsl_programs(draw) -> str:
    names = _Names(draw)
    graphs = []
    for _ in range(draw(st.integers(1, 2))):
        params = [(names.fresh(), draw(tensor_types)) for _ in range(draw(st.integers(1, 4)))]
        scope = _Scope(list(params))
        body = _body(draw, scope, names, "  ", 2, draw(st.integers(1, 3)))
        head = ", ".join(f"{n}: {_type_text(t)}" for n, t in params)
        graphs.append(f"graph {names.fresh()}({head}) {{\n" + "\n".join(body) + "\n}\n")
    return "\n".join(graphs)


@st.composite
def examplejson_programs(draw) -> str:
    subgraphs = []
    for k in range(draw(st.integers(1, 3))):
        shape = draw(st.lists(st.integers(1, 4), min_size=0, max_size=3))
        n_inputs = draw(st.integers(1, 4))
        n_ops = draw(st.integers(1, 6))
        ids = draw(
            st.lists(st.integers(0, 999), min_size=n_inputs + n_ops, max_size=n_inputs + n_ops, unique=True)
        )
        pad = draw(st.sampled_from(["", "  ", "\t", "    "]))
        dims = "".join(f" {d}" for d in shape)
        lines = [draw(st.sampled_from([f"subgraph_{k}", f"json_rt_{k}", f"Sg{k}_x"]))]
        defined = []
        for i in ids[:n_inputs]:
            lines.append(f"{pad}input {i}{dims}")
            defined.append(i)
        for i in ids[n_inputs:]:
            token = draw(st.sampled_from(("add", "sub", "mul")))
            a, b = draw(st.sampled_from(defined)), draw(st.sampled_from(defined))
            lines.append(f"{pad}{token} {i} inputs: {a} {b} shape:{dims}")
            defined.append(i)
        newline = draw(st.sampled_from(["\n", "\r\n"]))
        subgraphs.append(newline.join(lines) + newline)
    return "".join(subgraphs)


def _check_round_trip(program: Program, language: str) -> None:
    validate_program(program, CATALOG)
    text = print_program(program, language)
    again = parse(text, language)
    assert again == program
    assert print_program(again, language) == text


@SETTINGS
@given(dsl_programs())
def test_dsl_round_trip(text: str):
    program = parse(text, "graph")
    _check_round_trip(program, "graph")


FINITE = st.floats(allow_nan=False, allow_infinity=False)
HUGE_INTS = st.integers(-(2**62), 2**62)


def _float_text(draw, value: float) -> str:
    """``value`` as the DSL may spell it: repr, exponent or fixed forms, an explicit +."""
    forms = [repr(value), f"{value:.6f}", f"{value:+.2f}"]
    if abs(value) < 1e300:  # rounding 1.7976931348623157e+308 to 1.798e+308 overflows to inf
        forms.append(f"{value:.3e}")
    if value == int(value) and abs(value) < 1e15:
        forms.append(str(int(value)))  # an int literal for a float attribute
    return draw(st.sampled_from(forms))


def _ints_text(values: list[int]) -> str:
    return "[" + ", ".join(map(str, values)) + "]"


@st.composite
def attribute_programs(draw) -> str:
    """One graph whose ops take every attribute form: negative ints, int lists (empty,
    negative, 19-digit), floats in any finite magnitude and spelling, booleans, strings."""
    lines = [
        f"  a = leaky_relu(x, alpha={_float_text(draw, draw(FINITE))})",
        f"  b = clip(a, min={_float_text(draw, draw(FINITE))}, max={_float_text(draw, draw(FINITE))})",
        f"  c = concatenate(b, x, axis={draw(st.sampled_from(['-1', '-2', '0', '+1']))})",
        f"  d = sum(c, axes={_ints_text(draw(st.lists(st.sampled_from([0, 1, -1, -2]), unique_by=lambda a: a % 2)))}, "
        f"keepdims={draw(st.sampled_from(['true', 'false']))})",
        f"  e = slice(x, starts={_ints_text([draw(HUGE_INTS)])}, ends={_ints_text([draw(HUGE_INTS)])}, "
        f"axes=[{draw(st.sampled_from(['-1', '0', '1']))}], steps=[{draw(st.integers(1, 3))}])",
        f'  f = pad(x, pads=[1, 0, 1, 0], mode="{draw(st.sampled_from(["constant", "reflect", "edge"]))}", '
        f"value={_float_text(draw, draw(FINITE))})",
        f"  g = reshape(x, newshape={draw(st.sampled_from(['[-1]', '[3, -1]', '[0, 4]', '[-1, 2, 2]']))})",
        f"  h = transpose(x, perm={draw(st.sampled_from(['[]', '[1, 0]', '[0, 1]']))})",
    ]
    order = draw(st.permutations(lines))
    return "graph main(x: float64[3, 4]) {\n" + "\n".join(order) + "\n  return d, e, f, g, h\n}\n"


@SETTINGS
@given(attribute_programs())
def test_dsl_attribute_forms_round_trip(text: str):
    program = parse(text, "graph")
    _check_round_trip(program, "graph")
    nodes = {n.op: n for n in program.functions[0].nodes}
    assert isinstance(nodes["sum"].attr("keepdims"), bool)
    assert all(isinstance(v, float) for v in (nodes["clip"].attr("min"), nodes["pad"].attr("value")))
    assert isinstance(nodes["slice"].attr("starts"), tuple)


@SETTINGS
@given(examplejson_programs())
def test_examplejson_round_trip(text: str):
    program = parse(text, "examplejson")
    _check_round_trip(program, "examplejson")
    # ExampleJSON is a subset of the DSL: the same IR prints and parses as a graph.
    assert parse(print_program(program, "graph"), "graph") == program


@SETTINGS
@given(examplejson_programs(), st.randoms(use_true_random=False))
def test_examplejson_evaluates_like_numpy(text: str, random):
    program = parse(text, "examplejson")
    rng = np.random.default_rng(random.getrandbits(32))
    ops = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply}
    for fn in program.functions:
        env = {p.name: rng.standard_normal(p.type.shape).astype(np.float32) for p in fn.params}
        (out,) = byoc.evaluate(fn, dict(env))
        for node in fn.nodes:
            env[node.name] = ops[node.op](*(env[n] for n in node.inputs)).astype(np.float32)
        np.testing.assert_array_equal(out, env[fn.outputs[0]])


def _shuffle_statements(text: str, draw_permutation) -> str:
    """Reorder each graph's top-level statements (a region is one block); keep return last."""
    out: list[str] = []
    blocks: list[list[str]] = []
    lines = iter(text.splitlines())
    for line in lines:
        if line.startswith("  return "):
            for block in draw_permutation(blocks):
                out.extend(block)
            blocks = []
            out.append(line)
        elif line.startswith("  ") and not line.startswith("   "):
            block = [line]
            if line.endswith("{"):
                for inner in lines:
                    block.append(inner)
                    if inner == "  }":
                        break
            blocks.append(block)
        else:
            out.append(line)
    return "\n".join(out) + "\n"


@SETTINGS
@given(dsl_programs(), st.data())
def test_dsl_use_before_definition(text: str, data):
    """Statements in any order give the same results, and the result still round-trips."""
    program = parse(text, "graph")
    shuffled = _shuffle_statements(
        print_program(program, "graph"), lambda blocks: data.draw(st.permutations(blocks))
    )
    reordered = parse(shuffled, "graph")
    _check_round_trip(reordered, "graph")
    rng = np.random.default_rng(0)
    for fn, fn2 in zip(program.functions, reordered.functions):
        assert fn.params == fn2.params and fn.output_types == fn2.output_types
        assert sorted(n.op for n in fn.nodes) == sorted(n.op for n in fn2.nodes)
        inputs = {p.name: _random(rng, p.type) for p in fn.params}
        with np.errstate(all="ignore"):
            expected, actual = byoc.evaluate(fn, inputs), byoc.evaluate(fn2, inputs)
        for a, b in zip(expected, actual):
            np.testing.assert_array_equal(_comparable(a), _comparable(b))


def _comparable(a: np.ndarray) -> np.ndarray:
    """``a`` as numpy's testing compares it: bfloat16 as float64 (its NaNs are not NaN to
    ``np.testing``)."""
    return a.astype(np.float64) if str(a.dtype) == "bfloat16" else a


def _random(rng: np.random.Generator, t: TensorType) -> np.ndarray:
    if is_integer(t.dtype):
        return rng.integers(-9, 10, size=t.shape).astype(t.dtype)
    return rng.standard_normal(t.shape).astype(t.dtype)


# ---------------------------------------------------------------------- fuzz

SEEDS = {
    "graph": [
        GUIDE_WHOLE_GRAPH.read_text(encoding="utf-8"),
        "graph main(x: float32[2, 3], y: float32[3]) {  # c\n"
        "  k = const float32[3] [0.5, 1, -2e3]\n"
        "  a, b = @engine as sym {\n    p = add(x, y)\n    return p, negative(p)\n  }\n"
        "  return concatenate(a, b, axis=-1), add(y, k)\n}\n",
    ],
    "examplejson": [
        GUIDE_SUBGRAPH.read_text(encoding="utf-8"),
        TVM_EXTERNAL_RUNTIME.read_text(encoding="utf-8"),
    ],
}

PIECES = st.sampled_from(
    list('abcdefgilmnoprstuvx_019 \t\n\r()[]{},:=@#.+-eE"\\$%é')
    + [*KEYWORDS, "input", "inputs:", "shape:", "add", "sub", "float32", "\n  "]
)
FRAGMENTS = st.lists(PIECES, max_size=40).map("".join)
"""Random text made of characters and words that both grammars use."""


def _parses_or_fails_cleanly(text: str | bytes, language: str) -> None:
    try:
        program = parse(text, language)
    except ByocError as exc:
        assert exc.location is not None
        assert exc.location.line >= 1 and exc.location.column >= 1
        exc.render()
        return
    validate_program(program, CATALOG)
    try:
        printed = print_program(program, language)
    except ByocError:
        return  # e.g. an ExampleJSON subgraph whose last line is not its sink
    assert parse(printed, language) == program


@st.composite
def mutations(draw, language: str):
    seed = draw(
        st.sampled_from(
            SEEDS[language] + [draw(dsl_programs() if language == "graph" else examplejson_programs())]
        )
    )
    text = seed
    for _ in range(draw(st.integers(1, 4))):
        pos = draw(st.integers(0, len(text)))
        action = draw(st.sampled_from(("delete", "insert", "replace", "duplicate")))
        piece = draw(st.lists(PIECES, min_size=1, max_size=3).map("".join))
        if action == "delete":
            end = min(len(text), pos + draw(st.integers(1, 5)))
            text = text[:pos] + text[end:]
        elif action == "insert":
            text = text[:pos] + piece + text[pos:]
        elif action == "replace":
            text = text[:pos] + piece + text[pos + len(piece) :]
        else:
            end = min(len(text), pos + draw(st.integers(1, 20)))
            text = text[:end] + text[pos:end] + text[end:]
    assume(text != seed)
    return text


@FUZZ_SETTINGS
@given(FRAGMENTS)
def test_fuzz_dsl_random_text(text: str):
    _parses_or_fails_cleanly(text, "graph")
    _parses_or_fails_cleanly("graph main(x: float32[4]) {\n" + text, "graph")


@FUZZ_SETTINGS
@given(FRAGMENTS)
def test_fuzz_examplejson_random_text(text: str):
    _parses_or_fails_cleanly(text, "examplejson")
    _parses_or_fails_cleanly("sg\n  input 0 4\n" + text, "examplejson")


@FUZZ_SETTINGS
@given(st.binary(max_size=60), st.sampled_from(["graph", "examplejson"]))
def test_fuzz_random_bytes(data: bytes, language: str):
    _parses_or_fails_cleanly(data, language)


@FUZZ_SETTINGS
@given(mutations("graph"))
def test_fuzz_dsl_mutations(text: str):
    _parses_or_fails_cleanly(text, "graph")


@FUZZ_SETTINGS
@given(mutations("examplejson"))
def test_fuzz_examplejson_mutations(text: str):
    _parses_or_fails_cleanly(text, "examplejson")
