"""The JSON runtime module's calls: a function's constants are bound once, by the
init step (implicitly on the first call, or explicitly with the module's consts or
given ones, which are checked), and stay read-only; an unknown symbol or a call with
the wrong arguments raises RuntimeFailure naming the function and argument, and
writes nothing."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import random_array
from runtime_json_support import gen_program, json_module_text

from byoc.errors import RuntimeFailure
from byoc.runtime import json_module
from byoc.runtime.interface import call
from byoc.runtime.json_module import JsonRuntimeModule

# ------------------------------------------------------------------ const binding


@pytest.fixture
def const_module():
    text, _ = json_module_text(gen_program("constants"))
    return JsonRuntimeModule.from_text(text)


@pytest.fixture
def const_count(monkeypatch):
    """How many const arrays the module has built from its const_values."""
    counter = {"n": 0}
    build = json_module.const_array

    def counting(*args):
        counter["n"] += 1
        return build(*args)

    monkeypatch.setattr(json_module, "const_array", counting)
    return counter


K = np.array([0.5, -1, 2, 3.25, 4, -5.5], dtype="float32").reshape(2, 3)


def test_consts_bound_once_on_first_call(const_module, const_count, rng):
    assert const_module.const_names == {"json_0": ("json_0_const_0",)}
    assert not const_module.initialized("json_0") and const_count["n"] == 0
    f = const_module.get_function("json_0")
    assert const_count["n"] == 0, "loading and looking up bind nothing"
    for _ in range(5):
        x = random_array(rng, (2, 3), "float32")
        out = np.empty((2, 3), dtype="float32")
        f(x, out)
        np.testing.assert_array_equal(out, (x + K) * K)
    assert const_module.initialized("json_0") and const_count["n"] == 1
    assert const_module.init("json_0") is False and const_count["n"] == 1


def test_explicit_init_step(const_module, const_count, rng):
    init = const_module.get_function("__init_json_0")
    assert "__init_json_0" not in const_module.symbols()
    assert init() is True and const_count["n"] == 1
    assert init() is False and const_module.init("json_0") is False
    x = random_array(rng, (2, 3), "float32")
    (out,) = call(const_module, "json_0", x)
    np.testing.assert_array_equal(out, (x + K) * K)
    assert const_count["n"] == 1


def test_init_with_given_consts(const_module, const_count, rng):
    k = random_array(rng, (2, 3), "float32")
    assert const_module.init("json_0", [k]) is True
    x = random_array(rng, (2, 3), "float32")
    np.testing.assert_array_equal(call(const_module, "json_0", x)[0], (x + k) * k)
    assert const_count["n"] == 0
    with pytest.raises(RuntimeFailure, match="already bound"):
        const_module.init("json_0", [k])


@pytest.mark.parametrize(
    "consts, message",
    [
        ([], "expected 1 constants, got 0"),
        ([K, K], "expected 1 constants, got 2"),
        ([K.astype("float64")], r"constant 'json_0_const_0' is float64\[2, 3\]"),
        ([K[:1]], r"is float32\[1, 3\], expected float32\[2, 3\]"),
        (["k"], "must be an array"),
    ],
)
def test_init_rejects_bad_consts(const_module, consts, message):
    with pytest.raises(RuntimeFailure, match=message):
        const_module.get_function("__init_json_0")(*consts) if consts else const_module.init("json_0", consts)
    assert not const_module.initialized("json_0")


def test_bound_consts_are_read_only(const_module):
    const_module.init("json_0")
    (k,) = const_module._consts["json_0"]
    assert not k.flags.writeable


# ------------------------------------------------------------------------ bad calls


@pytest.fixture
def dag_module():
    text, _ = json_module_text(gen_program("multi_output"))
    return JsonRuntimeModule.from_text(text)


def test_unknown_symbol(dag_module):
    for name in ("json_1", "__init_json_1"):
        with pytest.raises(RuntimeFailure, match=f"no function {'json_1'!r}") as info:
            dag_module.get_function(name)
        assert info.value.hint == "known: json_0"


@pytest.mark.parametrize(
    "case",
    ["count", "too many", "dtype", "shape", "non-contiguous output", "read-only output", "not an array"],
)
def test_bad_calls_raise(dag_module, rng, case):
    x, y = random_array(rng, (3, 4), "float32"), random_array(rng, (3, 4), "float32")
    p, q = np.zeros((3, 4), dtype="float32"), np.zeros((3, 4), dtype="float32")
    frozen = np.zeros((3, 4), dtype="float32")
    frozen.flags.writeable = False
    args, message = {
        "count": ((x, y, p), "json_0: expected 4 arguments, got 3"),
        "too many": ((x, y, p, q, q), "expected 4 arguments, got 5"),
        "dtype": (
            (x, y.astype("int64"), p, q),
            r"argument 1 \(input 'y'\) is int64\[3, 4\], expected float32\[3, 4\]",
        ),
        "shape": ((x, y, p, q.reshape(4, 3)), r"argument 3 \(output 1\) is float32\[4, 3\]"),
        "non-contiguous output": ((x, y, np.zeros((4, 3), dtype="float32").T, q), "not C-contiguous"),
        "read-only output": ((x, y, frozen, q), r"argument 2 \(output 0\) is read-only"),
        "not an array": ((x, 1.0, p, q), "must be an array"),
    }[case]
    with pytest.raises(RuntimeFailure, match=message) as info:
        dag_module.get_function("json_0")(*args)
    if case == "count":
        assert "x, y" in info.value.hint
    assert not p.any() and not q.any(), "nothing is written by a rejected call"
