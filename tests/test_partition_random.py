"""Random graphs and backend orders: the partitioned program evaluates equal to the
original, through the reference and through execution."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from partition_support import (
    BACKENDS,
    assert_same,
    random_inputs,
    region_calls,
    specs,
)

from byoc.api import evaluate, load_backend, load_catalog, parse, print_program
from byoc.building import build
from byoc.errors import UsageError
from byoc.generator.lowering import lower
from byoc.generator.partition import partition
from byoc.ir import CALL_OP, Function, Program
from byoc.validate import validate_program

# ------------------------------------------------------------------ random graphs

# Deliberately these ops: random_programs works out each one's bound on |value|, so
# integer results never overflow and compare bit for bit across the C backends.
BINARY = ("add", "subtract", "multiply", "maximum", "minimum")
UNARY = ("relu", "negative", "copy")
LIMIT = 2**20  # bound on every value's magnitude, so that integers never overflow


@st.composite
def random_programs(draw, max_nodes: int = 10):
    """DSL text of a random plain graph: elementwise ops (some broadcasting),
    concatenate, constants, ranks 1-3, one dtype (float32 or int32), 1-3 results."""
    dtype = draw(st.sampled_from(["float32", "int32"]))
    rank = draw(st.sampled_from([1, 2, 3]))
    shape = tuple(draw(st.lists(st.integers(1, 3), min_size=rank, max_size=rank)))
    values: dict[str, tuple[tuple[int, ...], int]] = {}  # name -> (shape, bound)
    lines: list[str] = []

    def some_shape() -> tuple[int, ...]:
        if draw(st.integers(0, 3)):
            return shape
        k = draw(st.integers(0, rank))
        return tuple(d if draw(st.booleans()) else 1 for d in shape[rank - k :])

    def type_text(s) -> str:
        return f"{dtype}[{', '.join(map(str, s))}]"

    params = []
    for k in range(draw(st.integers(1, 3))):
        s = some_shape()
        params.append(f"p{k}: {type_text(s)}")
        values[f"p{k}"] = (s, 9)
    for k in range(draw(st.integers(0, 2))):
        s = some_shape()
        numbers = draw(st.lists(st.integers(-3, 3), min_size=int(np.prod(s)), max_size=int(np.prod(s))))
        lines.append(f"k{k} = const {type_text(s)} [{', '.join(map(str, numbers))}]")
        values[f"k{k}"] = (s, 3)
    nodes: list[str] = []
    for k in range(draw(st.integers(3, max_nodes))):
        name = f"v{k}"
        names = sorted(values)
        a = draw(st.sampled_from(names))
        a_shape, a_bound = values[a]
        choice = draw(st.integers(0, 9))
        if choice == 0 and a_shape:
            same = [n for n in names if values[n][0] == a_shape]
            ins = draw(st.lists(st.sampled_from(same), min_size=1, max_size=3))
            axis = draw(st.integers(0, len(a_shape) - 1))
            out = list(a_shape)
            out[axis] *= len(ins)
            lines.append(f"{name} = concatenate({', '.join(ins)}, axis={axis})")
            values[name] = (tuple(out), max(values[n][1] for n in ins))
        elif choice <= 3:
            op = draw(st.sampled_from(UNARY))
            lines.append(f"{name} = {op}({a})")
            values[name] = (a_shape, a_bound)
        else:
            partners = []
            for b in names:
                try:
                    partners.append((b, tuple(np.broadcast_shapes(a_shape, values[b][0]))))
                except ValueError:
                    pass
            b, out = draw(st.sampled_from(partners))
            b_bound = values[b][1]
            op = draw(st.sampled_from(BINARY))
            if op == "multiply" and a_bound * b_bound > LIMIT:
                op = "subtract"
            bound = {"multiply": a_bound * b_bound, "maximum": max(a_bound, b_bound)}.get(op)
            bound = bound if bound is not None else a_bound + b_bound
            first, second = (a, b) if draw(st.booleans()) else (b, a)
            lines.append(f"{name} = {op}({first}, {second})")
            values[name] = (out, bound)
        nodes.append(name)
    results = list(dict.fromkeys([nodes[-1], *draw(st.lists(st.sampled_from(sorted(values)), max_size=2))]))
    body = "".join(f"  {line}\n" for line in lines)
    return f"graph main({', '.join(params)}) {{\n{body}  return {', '.join(results)}\n}}\n"


backend_orders = st.permutations(BACKENDS).flatmap(
    lambda order: st.integers(1, len(order)).map(lambda n: list(order[:n]))
)


def assert_regions_supported(program: Program) -> None:
    """No region holds a node its backend cannot run, or more than its kind allows."""
    for fn in program.functions:
        for call in region_calls(fn):
            callee = call.callee
            spec = load_backend(callee.backend)
            kind = spec.kind
            assert kind.max_outputs is None or len(callee.outputs) <= kind.max_outputs
            assert kind.constants or not callee.constants
            types = callee.types()
            for p in callee.params:
                assert p.type.dtype in spec.dtypes and p.type.rank in spec.ranks
            for node in callee.nodes:
                assert node.op != CALL_OP
                t = node.type
                assert spec.supports(node.op, t.dtype, t.rank), (spec.name, node.op, str(t))
                assert kind.attrs or not node.attrs
                for name in node.inputs:
                    ti = types[name]
                    assert ti.dtype in spec.dtypes and ti.rank in spec.ranks
                    if node.op != "concatenate":
                        assert spec.broadcast or ti.shape == t.shape, (spec.name, node.op)
    lower(program, load_backend, load_catalog())


def assert_locally_maximal(fn: Function) -> None:
    """No region feeds another of its backend directly unless a longer path joins
    them too (merging them would then be a cycle). Backends whose kind limits the
    results of a region are left out: their regions may have to stay apart."""
    units = list(fn.nodes)
    producer = {o: k for k, u in enumerate(units) for o in u.outputs}
    succ: dict[int, set[int]] = {k: set() for k in range(len(units))}
    for k, u in enumerate(units):
        for name in u.inputs:
            if name in producer:
                succ[producer[name]].add(k)

    def longer_path(a: int, b: int) -> bool:
        stack = [s for s in succ[a] if s != b]
        seen = set(stack)
        while stack:
            u = stack.pop()
            if u == b:
                return True
            for v in succ[u] - seen:
                seen.add(v)
                stack.append(v)
        return False

    for a, u in enumerate(units):
        if u.callee is None or load_backend(u.callee.backend).kind.max_outputs is not None:
            continue
        for b in succ[a]:
            if units[b].callee is not None and units[b].callee.backend == u.callee.backend:
                assert longer_path(a, b), f"regions {a} and {b} could merge"


def check_partition(text: str, backends: list[str], seed: int) -> tuple[Program, Program]:
    original = parse(text, "graph")
    program = partition(original, specs(*backends))
    validate_program(program, load_catalog())
    assert_regions_supported(program)
    # nothing a backend could take is left on the host
    fn = program.functions[0]
    types = original.functions[0].types()
    for node in fn.nodes:
        if node.callee is None:
            for spec in specs(*backends):
                ins = [types[n] for n in node.inputs]
                fits = spec.supports(node.op, node.type.dtype, node.type.rank) and all(
                    t.dtype in spec.dtypes
                    and t.rank in spec.ranks
                    and (spec.broadcast or node.op == "concatenate" or t.shape == node.type.shape)
                    for t in ins
                )
                assert not (fits and (spec.kind.attrs or not node.attrs)), (spec.name, node.op)
    assert_locally_maximal(fn)
    assert parse(print_program(program), "graph") == program, text
    inputs = random_inputs(original.functions[0], seed)
    want = evaluate(original.functions[0], inputs)
    for g, w in zip(evaluate(fn, inputs), want):
        np.testing.assert_array_equal(g, w, err_msg=text)
    return original, program


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=random_programs(max_nodes=14), backends=backend_orders, seed=st.integers(0, 2**16))
def test_random_partitions_match_the_reference(text, backends, seed):
    check_partition(text, backends, seed)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=random_programs(max_nodes=8), backends=backend_orders, seed=st.integers(0, 2**16))
def test_random_partitions_run(text, backends, seed):
    original, program = check_partition(text, backends, seed)
    used = {n.callee.backend for n in program.functions[0].nodes if n.callee is not None}
    if not used:
        with pytest.raises(UsageError, match="nothing is offloaded"):
            build(original, backends=backends, language="graph")
        return
    options = {"engine.opt_level": "0"} if "engine" in used else None
    model = build(original, backends=backends, options=options, language="graph")
    assert {m.backend for m in model.manifest.modules} == used
    inputs = random_inputs(original.functions[0], seed)
    assert_same(model(**inputs), evaluate(original.functions[0], inputs), err_msg=text)
