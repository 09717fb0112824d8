"""Generated inputs for the benchmarks: large ExampleJSON and DSL texts.

The texts mix ops and fan-in the way real offloaded subgraphs do: every node reads
the previous node and one earlier value, so the graph is a DAG, not a chain.
"""

from __future__ import annotations

EXAMPLEJSON_TOKENS = ("add", "sub", "mul")
DSL_OPS = ("add", "subtract", "multiply", "maximum")


ID_BASE = 100_000
"""Generated ids and names count up from here, so every one has the same number of
digits at every size (up to 900k lines). A text of 10x the lines is then 10x the
bytes, and a growth figure measures the parser, not longer ids: counted from 0, the
100k-line texts had 5% (ExampleJSON) and 9% (DSL) more bytes per line than the
10k-line ones."""


def _id(i: int) -> int:
    if i >= 9 * ID_BASE:
        raise ValueError(f"at most {9 * ID_BASE - 1:,} generated values keep a constant width")
    return ID_BASE + i


def examplejson_text(lines: int, inputs: int = 4) -> str:
    """A single subgraph of ``lines`` lines (header, inputs, op lines), guide layout."""
    out = ["subgraph_0"]
    out += [f"  input {_id(i)} 10 10" for i in range(inputs)]
    for i in range(inputs, lines - 1):
        op = EXAMPLEJSON_TOKENS[i % len(EXAMPLEJSON_TOKENS)]
        out.append(f"  {op} {_id(i)} inputs: {_id(i - 1)} {_id((i * 7) % i)} shape: 10 10")
    return "\n".join(out) + "\n"


def dsl_text(lines: int, inputs: int = 4) -> str:
    """A graph of about ``lines`` lines: a signature, one statement per line, a return.

    One statement in eight nests a call, as hand-written graphs do.
    """
    params = ", ".join(f"x{i}: float32[10, 10]" for i in range(inputs))
    out = [f"graph main({params}) {{"]
    names = [f"x{i}" for i in range(inputs)]
    for i in range(lines - 3):
        op = DSL_OPS[i % len(DSL_OPS)]
        a, b = names[-1], names[(i * 7) % len(names)]
        name = f"t{_id(i)}"
        if i % 8 == 7:
            out.append(f"  {name} = {op}(add({a}, {b}), {names[-2]})  # nested")
        else:
            out.append(f"  {name} = {op}({a}, {b})")
        names.append(name)
    out.append(f"  return {names[-1]}")
    out.append("}")
    return "\n".join(out) + "\n"


REGION_OPS = ("add", "subtract", "multiply")
"""The ops of :func:`region_text`'s regions, in the order they cycle."""


def region_text(nodes: int, backend: str = "ccompiler", inputs: int = 4) -> str:
    """One graph whose single @backend region holds ``nodes`` elementwise ops (a DAG)."""
    params = ", ".join(f"x{i}: float32[10, 10]" for i in range(inputs))
    out = [f"graph main({params}) {{", f"  s = @{backend} {{"]
    names = [f"x{i}" for i in range(inputs)]
    ops = REGION_OPS
    for i in range(nodes):
        a, b = names[-1], names[(i * 7) % len(names)]
        name = f"t{_id(i)}"
        out.append(f"    {name} = {ops[i % 3]}({a}, {b})")
        names.append(name)
    out += [f"    return {names[-1]}", "  }", "  return s", "}"]
    return "\n".join(out) + "\n"


# ----------------------------------------------------------------- kernel workloads
# Graphs for the kernels suite. Each puts the whole computation into one explicit
# region of ``backend``, so a backend either expresses all of it or the build fails
# with a located error (and the suite reports the backend as not applicable).

CHAIN_OPS = (("add", "a"), ("multiply", "c"), ("subtract", "b"))
"""The 64-op chain cycles t = t + a, t = t * c, t = t - b; with c in [0.5, 0.99) the
values stay bounded (no overflow, no denormals), whatever the length."""


def _dims(shape: tuple[int, ...]) -> str:
    return ", ".join(str(d) for d in shape)


def guide_subgraph_text(backend: str, shape: tuple[int, ...]) -> str:
    """The BYOC guide's subgraph ((x + w0) - w1) * w2, offloaded whole."""
    t = f"float32[{_dims(shape)}]"
    return (
        f"graph main(x: {t}, w0: {t}, w1: {t}, w2: {t}) {{\n"
        f"  s = @{backend} {{\n"
        "    return multiply(subtract(add(x, w0), w1), w2)\n"
        "  }\n"
        "  return s\n"
        "}\n"
    )


def chain_text(backend: str, shape: tuple[int, ...], ops: int = 64) -> str:
    """A chain of ``ops`` elementwise ops over x, reading a, b, c (see CHAIN_OPS)."""
    t = f"float32[{_dims(shape)}]"
    lines = [f"graph main(x: {t}, a: {t}, b: {t}, c: {t}) {{", f"  s = @{backend} {{"]
    prev = "x"
    for i in range(ops - 1):
        op, operand = CHAIN_OPS[i % len(CHAIN_OPS)]
        lines.append(f"    t{i} = {op}({prev}, {operand})")
        prev = f"t{i}"
    op, operand = CHAIN_OPS[(ops - 1) % len(CHAIN_OPS)]
    lines += [f"    return {op}({prev}, {operand})", "  }", "  return s", "}"]
    return "\n".join(lines) + "\n"


def chain_expression(ops: int = 64) -> str:
    """The same chain as one Python / numexpr expression over x, a, b, c."""
    symbols = {"add": "+", "multiply": "*", "subtract": "-"}
    expr = "x"
    for i in range(ops):
        op, operand = CHAIN_OPS[i % len(CHAIN_OPS)]
        expr = f"({expr} {symbols[op]} {operand})"
    return expr


def bias_relu_text(backend: str, rows: int, cols: int) -> str:
    """relu(x + bias) with x float32[rows, cols] and bias float32[cols] (broadcast)."""
    return (
        f"graph main(x: float32[{rows}, {cols}], bias: float32[{cols}]) {{\n"
        f"  s = @{backend} {{\n"
        "    return relu(add(x, bias))\n"
        "  }\n"
        "  return s\n"
        "}\n"
    )


def whole_graph_text(backend: str) -> str:
    """The guide's whole graph (examples/guide_whole_graph.graph) with both regions on
    ``backend``: two offloaded subgraphs and host ops, concatenated."""
    t = "float32[10, 10]"
    params = ", ".join(f"{n}: {t}" for n in ("x", "w0", "w1", "w2", "w3", "w4", "w5", "w6", "w7"))
    return (
        f"graph main({params}) {{\n"
        f"  s0 = @{backend} {{\n"
        "    t = subtract(add(x, w0), w1)\n"
        "    return multiply(t, w2)\n"
        "  }\n"
        f"  s1 = @{backend} {{\n"
        "    t = subtract(add(x, w3), w4)\n"
        "    return multiply(t, w5)\n"
        "  }\n"
        "  h = subtract(add(x, w6), w7)\n"
        "  return concatenate(s0, s1, h, axis=0)\n"
        "}\n"
    )
