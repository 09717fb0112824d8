"""Generated inputs for the benchmarks: large ExampleJSON and DSL texts.

The texts mix ops and fan-in the way real offloaded subgraphs do: every node reads
the previous node and one earlier value, so the graph is a DAG, not a chain.
"""

from __future__ import annotations

EXAMPLEJSON_TOKENS = ("add", "sub", "mul")
DSL_OPS = ("add", "subtract", "multiply", "maximum")


def examplejson_text(lines: int, inputs: int = 4) -> str:
    """A single subgraph of ``lines`` lines (header, inputs, op lines), guide layout."""
    out = ["subgraph_0"]
    out += [f"  input {i} 10 10" for i in range(inputs)]
    for i in range(inputs, lines - 1):
        op = EXAMPLEJSON_TOKENS[i % len(EXAMPLEJSON_TOKENS)]
        out.append(f"  {op} {i} inputs: {i - 1} {(i * 7) % i} shape: 10 10")
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
        if i % 8 == 7:
            out.append(f"  t{i} = {op}(add({a}, {b}), {names[-2]})  # nested")
        else:
            out.append(f"  t{i} = {op}({a}, {b})")
        names.append(f"t{i}")
    out.append(f"  return {names[-1]}")
    out.append("}")
    return "\n".join(out) + "\n"


def region_text(nodes: int, backend: str = "ccompiler", inputs: int = 4) -> str:
    """One graph whose single @backend region holds ``nodes`` elementwise ops (a DAG)."""
    params = ", ".join(f"x{i}: float32[10, 10]" for i in range(inputs))
    out = [f"graph main({params}) {{", f"  s = @{backend} {{"]
    names = [f"x{i}" for i in range(inputs)]
    ops = ("add", "subtract", "multiply")
    for i in range(nodes):
        a, b = names[-1], names[(i * 7) % len(names)]
        out.append(f"    t{i} = {ops[i % 3]}({a}, {b})")
        names.append(f"t{i}")
    out += [f"    return {names[-1]}", "  }", "  return s", "}"]
    return "\n".join(out) + "\n"
