"""The storage planner: buffers are shared only between values whose lifetimes do not
overlap, with identical dtype and size; inputs and outputs keep buffers of their own."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from byoc.generator.memory_plan import Buffer, ScheduledOp, plan_memory
from byoc.ir import TensorType

TYPES = (
    TensorType((4,), "float32"),
    TensorType((2, 2), "float32"),
    TensorType((4,), "int32"),
    TensorType((3,), "float32"),
)


@st.composite
def schedules(draw):
    """A random DAG as a schedule: inputs, steps reading earlier values, outputs."""
    n_inputs = draw(st.integers(0, 3))
    types = {f"i{k}": draw(st.sampled_from(TYPES)) for k in range(n_inputs)}
    inputs = list(types)
    steps = []
    for k in range(draw(st.integers(0, 12))):
        known = list(types)
        uses = tuple(draw(st.lists(st.sampled_from(known), max_size=3))) if known else ()
        defines = tuple(f"v{k}_{j}" for j in range(draw(st.integers(1, 2))))
        for name in defines:
            types[name] = draw(st.sampled_from(TYPES))
        overwrites = draw(st.sampled_from(uses)) if uses and draw(st.booleans()) else None
        steps.append(ScheduledOp(uses, defines, overwrites))
    outputs = draw(st.lists(st.sampled_from(list(types)), max_size=3)) if types else []
    return inputs, steps, types, outputs


def lifetimes(inputs, steps, outputs):
    """value -> (first step alive, last step alive); inputs start at -1, outputs never end."""
    start = {v: -1 for v in inputs}
    end = {v: -1 for v in inputs}
    for k, step in enumerate(steps):
        for v in step.uses:
            end[v] = max(end[v], k)
        for v in step.defines:
            start[v] = end[v] = k
    for v in outputs:
        end[v] = len(steps)
    return start, end


@settings(max_examples=300, deadline=None)
@given(schedules())
def test_no_two_live_values_share_a_buffer(case):
    inputs, steps, types, outputs = case
    plan = plan_memory(inputs, steps, types, outputs)
    start, end = lifetimes(inputs, steps, outputs)
    assert set(plan.storage) == set(types)
    for value, sid in plan.storage.items():
        assert plan.buffers[sid] == Buffer(types[value].dtype, types[value].size)
    by_buffer: dict[int, list[str]] = {}
    for value, sid in plan.storage.items():
        by_buffer.setdefault(sid, []).append(value)
    pinned = set(inputs) | set(outputs)
    handed = handovers(plan, steps)
    for values in by_buffer.values():
        if len(values) > 1:
            assert not pinned.intersection(values), "inputs and outputs are never shared"
        for a in values:
            for b in values:
                if a < b and (a, b) not in handed and (b, a) not in handed:
                    assert end[a] < start[b] or end[b] < start[a], f"{a} and {b} are alive together"
    assert sorted(set(plan.storage.values())) == list(range(len(plan.buffers)))
    assert plan_memory(inputs, steps, types, outputs) == plan


def handovers(plan, steps):
    """(input, result) of each step whose result took the buffer of the input it overwrites."""
    return {
        (step.overwrites, value)
        for step in steps
        for value in step.defines
        if step.overwrites is not None and plan.storage[value] == plan.storage[step.overwrites]
    }


@settings(max_examples=200, deadline=None)
@given(schedules())
def test_a_step_writes_a_buffer_it_reads_only_where_it_may(case):
    """Only a step's one result, into the buffer of the input it says it overwrites,
    when it reads that input once, nothing reads it later, and neither is pinned."""
    inputs, steps, types, outputs = case
    plan = plan_memory(inputs, steps, types, outputs)
    pinned = set(inputs) | set(outputs)
    for k, step in enumerate(steps):
        read = {plan.storage[v] for v in step.uses}
        written = [plan.storage[v] for v in step.defines]
        assert len(set(written)) == len(written)
        shared = read.intersection(written)
        if not shared:
            continue
        (value,) = step.defines
        taken = step.overwrites
        assert shared == {plan.storage[taken]}
        assert step.uses.count(taken) == 1 and not {taken, value} & pinned
        assert all(taken not in later.uses for later in steps[k + 1 :])
        assert types[taken].dtype == types[value].dtype and types[taken].size == types[value].size


def test_a_result_takes_the_buffer_of_the_input_it_overwrites_when_read_last():
    t = TensorType((4,), "float32")
    types = {n: t for n in "xabcde"}
    steps = [
        ScheduledOp(("x",), ("a",)),
        ScheduledOp(("a",), ("b",)),
        ScheduledOp(("b", "a"), ("c",), overwrites="a"),  # a read last here: c takes its buffer
        ScheduledOp(("c", "b"), ("d",), overwrites="c"),
        ScheduledOp(("d", "b"), ("e",), overwrites="b"),  # e is the output: a buffer of its own
    ]
    plan = plan_memory(["x"], steps, types, ["e"])
    assert plan.storage["c"] == plan.storage["a"]
    assert plan.storage["d"] == plan.storage["c"]
    assert plan.storage["e"] not in {plan.storage[v] for v in "xabcd"}


@pytest.mark.parametrize(
    "why, steps, types",
    [
        ("read again later", [("a", "b", "a"), ("ab", "c", None), ("c", "d", None)], {}),
        ("read twice by the step", [("a", "b", None), ("aa", "c", "a"), ("c", "d", None)], {}),
        ("another size", [("a", "b", None), ("a", "c", "a"), ("c", "d", None)], {"c": (5,)}),
        ("a graph input", [("x", "b", "x"), ("b", "c", None), ("c", "d", None)], {}),
    ],
)
def test_a_result_keeps_its_own_buffer_when_the_input_may_not_be_overwritten(why, steps, types):
    t = TensorType((4,), "float32")
    names = {n: TensorType(types.get(n, (4,)), "float32") if n in types else t for n in "xabcd"}
    schedule = [ScheduledOp(tuple(uses), (out,), over) for uses, out, over in [("x", "a", None), *steps]]
    plan = plan_memory(["x"], schedule, names, ["d"])
    for step in schedule:
        if step.overwrites is not None:
            assert plan.storage[step.defines[0]] != plan.storage[step.overwrites], why


def test_a_chain_ping_pongs_between_two_buffers():
    t = TensorType((8, 8), "float32")
    steps = [ScheduledOp(("x",), ("a",))] + [
        ScheduledOp((f"{c}",), (f"{n}",)) for c, n in zip("abcdef", "bcdefg")
    ]
    types = {name: t for name in "xabcdefg"}
    plan = plan_memory(["x"], steps, types, ["g"])
    assert [plan.storage[v] for v in "xabcdefg"] == [0, 1, 2, 1, 2, 1, 2, 3]
    assert len(plan.buffers) == 4 and plan.reused == 4


def test_reuse_needs_identical_dtype_and_size():
    chain = "xabcde"
    steps = [ScheduledOp((c,), (n,)) for c, n in zip(chain, chain[1:])]
    f4 = TensorType((4,), "float32")
    types = {
        "x": f4,
        "a": f4,
        "b": f4,
        "c": TensorType((2, 2), "float32"),  # same dtype and size as a: takes a's buffer
        "d": TensorType((4,), "float64"),  # another dtype: b's buffer is free, but not for d
        "e": f4,
    }
    plan = plan_memory(["x"], steps, types, ["e"])
    assert plan.storage["c"] == plan.storage["a"]
    assert plan.storage["d"] not in (plan.storage[v] for v in "xabc")
    assert plan.buffers[plan.storage["d"]] == Buffer("float64", 4)
    assert plan.storage["e"] not in (plan.storage[v] for v in "xabcd"), "outputs get their own buffer"


def test_unused_values_are_released_and_unplanned_values_ignored():
    t = TensorType((3,), "float32")
    steps = [ScheduledOp(("x", "k"), ("dead", "a")), ScheduledOp(("a",), ("b",)), ScheduledOp(("b",), ("c",))]
    plan = plan_memory(["x"], steps, {n: t for n in ("x", "dead", "a", "b", "c")}, ["c"])
    assert "k" not in plan.storage
    assert plan.storage["b"] == plan.storage["dead"]


def test_defining_a_value_twice_is_an_error():
    t = TensorType((1,), "float32")
    with pytest.raises(ValueError, match="defined twice"):
        plan_memory([], [ScheduledOp((), ("a",)), ScheduledOp((), ("a",))], {"a": t})
