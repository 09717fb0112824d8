"""``byoc.parse`` from several threads at once: every parse reads only its own text.

Each thread parses its own texts, each named by its own file: DSL texts whose
statements all take the fast path, DSL texts with keyword attributes, constants and
regions (the word-level rules), and ExampleJSON texts with both fast and word-level
lines. Every value is named after the line that defines it, so every location can be
checked against its own file and its own line. The switch interval is shortened so
that threads take turns in the middle of parses, not only between them.
"""

from __future__ import annotations

import gc
import sys
import threading
from collections.abc import Iterator

import pytest

import byoc
from byoc.ir import ANON_PREFIX, Function

PARSES = 1_000
"""Parses per configuration, over all its threads."""


def _fast_dsl(name: str, pad: int) -> str:
    """Plain statements only (SIMPLE_ASSIGNS), some with a nested call."""
    lines = ["# padding"] * pad + [f"graph {name}(x: float32[4], y: float32[4]) {{"]
    last = "x"
    for _ in range(40):
        n = len(lines) + 1
        arg = f"negative({last})" if n % 3 == 0 else last
        lines.append(f"  n{n} = add({arg}, y)")
        last = f"n{n}"
    lines += [f"  return {last}", "}"]
    return "\n".join(lines) + "\n"


def _slow_dsl(name: str, pad: int) -> str:
    """Keyword attributes, constants and regions: the word-level rules."""
    lines = ["# padding"] * pad + [f"graph {name}(x: float32[4], y: float32[4]) {{"]
    last = "x"
    for _ in range(6):
        n = len(lines) + 1
        lines.append(f"  c{n} = const float32[4] [1, 2, 3, {n}]")
        lines.append(f"  n{n + 1} = concatenate({last}, c{n}, axis=0)")
        lines.append(f"  r{n + 2} = @ccompiler {{")
        lines.append(f"    n{n + 3} = add({last}, y)")
        lines.append(f"    return n{n + 3}")
        lines.append("  }")
        lines.append(f"  n{n + 6} = concatenate(r{n + 2}, x, axis=-1)")
        lines.append(f"  n{n + 7} = add(n{n + 1}, n{n + 6})")
        last = f"r{n + 2}"
    lines += [f"  return {last}, n{n + 7}", "}"]
    return "\n".join(lines) + "\n"


def _examplejson(name: str, pad: int) -> str:
    """Ids are line numbers; every fifth op line is spaced for the word-level rules."""
    lines = [""] * pad + [name, f"  input {pad + 2} 4", f"  input {pad + 3} 4"]
    a, b = pad + 2, pad + 3
    for _ in range(40):
        n = len(lines) + 1
        inputs = f"inputs:{a} {b}" if n % 5 == 0 else f"inputs: {a} {b}"
        lines.append(f"  {'add' if n % 2 else 'mul'} {n} {inputs} shape: 4")
        a, b = b, n
    return "\n".join(lines) + "\n"


KINDS = (("graph", _fast_dsl), ("graph", _slow_dsl), ("examplejson", _examplejson))


def _line_of(name: str) -> int:
    """The line a value is defined on: its name is a letter and that number."""
    return int(name.lstrip("cnrv"))


def _misplaced(fn: Function, file: str) -> Iterator[str]:
    """Every location in ``fn`` (and its regions) that is not its own file and line."""
    nodes = list(fn.nodes)
    where = [(c.name, c.loc, _line_of(c.name)) for c in fn.constants]
    for p in fn.params:
        if fn.backend is None:  # a graph's or subgraph's own parameter
            line = fn.loc.line if p.name[0] in "xy" else _line_of(p.name)
        else:  # a region's capture: where the region first uses it
            line = _line_of(next(n.name for n in nodes if p.name in n.inputs))
        where.append((p.name, p.loc, line))
    for k, node in enumerate(nodes):
        if node.name.startswith(ANON_PREFIX):  # a nested call: on its statement's line
            line = _line_of(next(n.name for n in nodes[k:] if not n.name.startswith(ANON_PREFIX)))
        else:
            line = _line_of(node.name)
        where.append((node.name, node.loc, line))
        if node.callee is not None:
            yield from _misplaced(node.callee, file)
    if fn.loc.file != file:
        yield f"function {fn.name} at {fn.loc.file}:{fn.loc.line}, expected {file}"
    for name, loc, line in where:
        if loc.file != file or loc.line != line:
            yield f"{name} at {loc.file}:{loc.line}, expected {file}:{line}"


@pytest.fixture
def busy_switching():
    """Threads take turns every 10 µs instead of every 5 ms."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    yield
    sys.setswitchinterval(interval)


@pytest.mark.parametrize("threads", [2, 8])
def test_threads_parse_their_own_texts(threads, busy_switching, catalog):
    before = gc.get_threshold()
    problems: list[str] = []
    start = threading.Barrier(threads)

    def work(tid: int) -> None:
        start.wait()
        for k in range(PARSES // threads):
            language, make = KINDS[(tid + k) % len(KINDS)]
            file = f"thread{tid}_{k}.{language}"
            text = make(f"g{tid}_{k}", tid + k % 4)
            try:
                program = byoc.parse(text, language, file=file, catalog=catalog)
            except Exception as exc:  # noqa: BLE001 - reported below, with the thread's file
                problems.append(f"{file}: {type(exc).__name__}: {exc}")
                continue
            problems.extend(f"{file}: {p}" for fn in program.functions for p in _misplaced(fn, file))

    pool = [threading.Thread(target=work, args=(tid,)) for tid in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    after = gc.get_threshold()
    gc.set_threshold(*before)  # so that a failure here leaves later tests a normal collector
    # The first few misplaced locations, how many there are, and the collector's thresholds.
    assert (problems[:3], len(problems), after) == ([], 0, before)


@pytest.mark.parametrize("threads", [8])
def test_threads_build_their_parsers_at_once(threads):
    """Each thread builds its own Lark parser on its first parse. Lark reads the
    grammar's literals with ``ast.literal_eval``, which CPython 3.11 cannot run in two
    threads at once ("AST constructor recursion depth mismatch"), so the builds must
    not overlap. Fresh threads, started together, each parse once, in many rounds."""
    texts = [_fast_dsl(f"g{k}", 0) for k in range(threads)]
    errors: list[str] = []

    def first_parse(k: int, start: threading.Barrier) -> None:
        start.wait()
        try:
            byoc.parse(texts[k], "graph", file=f"fresh{k}.graph")
            byoc.parse(_examplejson(f"e{k}", 0), "examplejson", file=f"fresh{k}.examplejson")
        except Exception as exc:  # noqa: BLE001 - the test reports any failure
            errors.append(f"{type(exc).__name__}: {exc}")

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for _ in range(15):
            _round(threads, first_parse)
    finally:
        sys.setswitchinterval(interval)
    assert errors == []


def _round(threads: int, first_parse) -> None:
    start = threading.Barrier(threads)
    workers = [threading.Thread(target=first_parse, args=(k, start)) for k in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
