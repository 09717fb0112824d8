"""Random elementwise graphs with numpy broadcasting, at every dtype and ranks 0 to 4,
partitioned onto the `fused` backend, built, run and compared with the numpy reference.

Bit for bit at every dtype, float16 and bfloat16 included: their ops here (+, -, *, /,
maximum, minimum, negation) run in float32 and are rounded to the dtype once, and
float32 has more than twice their significand bits plus two, so that rounding is the
correctly rounded result, as the reference's (float64, then rounded once) is.
"""

from __future__ import annotations

import numpy as np
from conftest import random_array
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from byoc.api import evaluate, load_backend, load_catalog, parse
from byoc.building import build
from byoc.generator.partition import partition
from byoc.ir import CALL_OP, DTYPES, UNSIGNED_DTYPES, is_integer

BACKEND = "fused"


# Deliberately these ops: the graphs below work out each one's bound on |value| (and
# keep divisors away from zero), so integer results never overflow and compare bit for
# bit. The whole catalog on fused is tests/test_e2e_random_catalog.py's.
UNARY = ("relu", "negative", "copy")
BINARY = ("add", "subtract", "multiply", "maximum", "minimum", "divide")
LIMIT = 2**20  # bound on magnitudes, so that no int32/int64 value overflows (wrapping is tested
# in test_gen_fused.py); int8 and uint8 values do wrap, as they do in numpy


@st.composite
def broadcasting_graphs(draw):
    """DSL text of a random plain graph of elementwise ops with numpy broadcasting, at
    one dtype and rank 0 to 4, with constants and sometimes a concatenate (host)."""
    dtype = draw(st.sampled_from(DTYPES))
    unary = [op for op in UNARY if dtype in load_catalog()[op].dtypes]  # relu takes no uint8
    binary = [
        op
        for op in BINARY
        if dtype in load_catalog()[op].dtypes and not (op == "divide" and is_integer(dtype))
    ]
    small: list = [-3, -2, -1, 1, 2, 3]
    if dtype in UNSIGNED_DTYPES:  # 1, 2, 3 and the two largest values (which wrap)
        top = int(np.iinfo(dtype).max) if dtype != "bool" else 1
        small = [1, 2, 3, top - 1, top] if dtype != "bool" else ["true", "false"]
    rank = draw(st.integers(0, 4))
    shape = tuple(draw(st.lists(st.integers(1, 3), min_size=rank, max_size=rank)))
    values: dict[str, tuple[tuple[int, ...], int, bool]] = {}  # name -> (shape, bound, is a leaf)

    def some_shape() -> tuple[int, ...]:
        if draw(st.integers(0, 2)):
            return shape
        k = draw(st.integers(0, rank))
        return tuple(d if draw(st.booleans()) else 1 for d in shape[rank - k :])

    def type_text(s) -> str:
        return f"{dtype}[{', '.join(map(str, s))}]"

    params, lines = [], []
    for k in range(draw(st.integers(1, 3))):
        s = some_shape()
        params.append(f"p{k}: {type_text(s)}")
        values[f"p{k}"] = (s, 50, True)  # conftest.random_array: |v| < 50, never 0
    if draw(st.booleans()):
        s = some_shape()
        numbers = draw(st.lists(st.sampled_from(small), min_size=int(np.prod(s)), max_size=int(np.prod(s))))
        lines.append(f"k0 = const {type_text(s)} [{', '.join(map(str, numbers))}]")
        values["k0"] = (s, 3, True)
    count = draw(st.integers(1, 8))
    for k in range(count):
        names = sorted(values)
        a = draw(st.sampled_from(names))
        a_shape, a_bound, _ = values[a]
        choice = draw(st.integers(0, 9))
        if choice == 0 and a_shape and k < count - 1:  # the last node offloads
            lines.append(f"v{k} = concatenate({a}, {a}, axis=0)")
            values[f"v{k}"] = ((a_shape[0] * 2, *a_shape[1:]), a_bound, False)
            continue
        if choice <= 3 or not binary:  # bool: no arithmetic op takes it
            lines.append(f"v{k} = {draw(st.sampled_from(unary))}({a})")
            values[f"v{k}"] = (a_shape, a_bound, False)
            continue
        op = draw(st.sampled_from(binary))
        partners = []
        for b in names:
            try:
                partners.append((b, tuple(np.broadcast_shapes(a_shape, values[b][0]))))
            except ValueError:
                pass
        leaves = [p for p in partners if values[p[0]][2]]
        if op == "divide" and not leaves:  # no leaf broadcasts with a: divide by nothing safe
            op = "add"
        if op == "divide":  # only by leaves, which are never 0, so no NaN reaches maximum
            partners = leaves
        b, out = draw(st.sampled_from(partners))
        b_bound = values[b][1]
        if op == "multiply" and a_bound * b_bound > LIMIT:
            op = "add"
        bound = {"multiply": a_bound * b_bound, "maximum": max(a_bound, b_bound), "divide": a_bound}.get(op)
        first, second = (b, a) if op != "divide" and draw(st.booleans()) else (a, b)
        lines.append(f"v{k} = {op}({first}, {second})")
        values[f"v{k}"] = (out, bound if bound is not None else a_bound + b_bound, False)
    last = max((n for n in values if n.startswith("v")), key=lambda n: int(n[1:]))
    results = list(dict.fromkeys([last, *draw(st.lists(st.sampled_from(sorted(values)), max_size=2))]))
    body = "".join(f"  {line}\n" for line in lines)
    return f"graph main({', '.join(params)}) {{\n{body}  return {', '.join(results)}\n}}\n"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=broadcasting_graphs(), seed=st.integers(0, 2**16))
def test_random_broadcasting_graphs_match_the_reference(text, seed):
    program = parse(text, "graph", file="random.graph")
    fn = program.functions[0]
    parted = partition(program, [load_backend(BACKEND)]).functions[0]
    assert all(n.op in (CALL_OP, "concatenate") for n in parted.nodes), text
    rng = np.random.default_rng(seed)
    inputs = {p.name: random_array(rng, p.type.shape, p.type.dtype) for p in fn.params}
    for p in fn.params:  # conftest's random_array gives bool only True
        if p.type.dtype == "bool":
            inputs[p.name] = rng.integers(0, 2, size=p.type.shape).astype(bool)
    got = build(program, backends=[BACKEND])(**inputs)
    for g, w in zip(got, evaluate(fn, inputs)):
        assert g.dtype == w.dtype and g.shape == w.shape, text
        np.testing.assert_array_equal(g, w, err_msg=text)
