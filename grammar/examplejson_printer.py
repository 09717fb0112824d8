"""Print byoc IR as ExampleJSON text, in the guide's indented layout.

ExampleJSON can say less than the IR: float32 only, no constants, no attributes,
one output that is the last op line, and only ops with an op token. Anything else
is a :class:`~byoc.errors.UsageError` naming what cannot be expressed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from byoc.errors import UsageError
from byoc.ir import CALL_OP, Function, Program

from .examplejson_parser import DTYPE

_ID_NAME = re.compile(r"v(0|[1-9][0-9]*)\Z")


def print_examplejson(program: Program, tokens: Mapping[str, str]) -> str:
    """``tokens`` maps op tokens to catalog ops, as the parser takes it."""
    to_token = {op: token for token, op in tokens.items()}
    return "".join(print_subgraph(fn, to_token) for fn in program.functions)


def print_subgraph(fn: Function, to_token: Mapping[str, str]) -> str:
    where = f"function {fn.name}"
    if fn.name is None:
        raise UsageError("an ExampleJSON subgraph needs a name")
    if fn.constants:
        raise UsageError(f"{where}: ExampleJSON has no constants", fn.loc)
    if not fn.nodes or len(fn.outputs) != 1 or fn.outputs[0] != fn.nodes[-1].name:
        raise UsageError(
            f"{where}: ExampleJSON needs exactly one output, computed by the last node",
            fn.loc,
        )
    ids = _ids(fn)
    lines = [fn.name]
    for p in fn.params:
        if p.type.dtype != DTYPE:
            raise UsageError(f"{where}: input {p.name} is {p.type.dtype}; ExampleJSON is float32 only", p.loc)
        lines.append(f"  input {ids[p.name]}" + "".join(f" {d}" for d in p.type.shape))
    for node in fn.nodes:
        token = to_token.get(node.op)
        if node.op == CALL_OP or token is None:
            known = ", ".join(sorted(to_token)) or "none"
            raise UsageError(
                f"{where}: op {node.op} has no ExampleJSON token", node.loc, hint=f"expressible ops: {known}"
            )
        if node.attrs:
            raise UsageError(f"{where}: ExampleJSON cannot carry the attributes of {node.op}", node.loc)
        inputs = " ".join(str(ids[n]) for n in node.inputs)
        shape = "".join(f" {d}" for d in node.type.shape)
        lines.append(f"  {token} {ids[node.name]} inputs: {inputs} shape:{shape}")
    return "\n".join(lines) + "\n"


def _ids(fn: Function) -> dict[str, int]:
    """Keep ``v<id>`` names as their ids; otherwise number inputs, then nodes, from 0."""
    names = [p.name for p in fn.params] + [n.name for n in fn.nodes]
    matches = [_ID_NAME.match(n) for n in names]
    if all(matches):
        ids = {n: int(m.group(1)) for n, m in zip(names, matches)}
        if len(set(ids.values())) == len(ids):
            return ids
    return {n: i for i, n in enumerate(names)}
