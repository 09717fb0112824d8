"""The ``examplejson`` codegen: a backend's external functions become ONE ExampleJSON
text module, ``<backend>.examplejson``, in the exact layout of the BYOC guide::

    subgraph_0
      input 0 10 10
      input 1 10 10
      add 2 inputs: 0 1 shape: 10 10

One block per function, headed by its symbol, with op tokens from the spec and the
``indent`` option's spaces before each line. The text is what
:mod:`byoc.grammar.examplejson_printer` prints, so it parses back with the spec's
tokens.

ExampleJSON says less than the IR. A function's result is its last op line, so ops
that do not feed the result are dropped and the result is moved last (the order
stays topological). Everything else that ExampleJSON cannot express is a located
:class:`~byoc.errors.GraphError`: constants, dtypes other than float32, several
outputs, a result that is an input, op attributes, and ops without a token. The
format has no comments, so unlike the other artifacts it carries no provenance.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from byoc.catalog import Catalog
from byoc.errors import GraphError
from byoc.grammar.examplejson_parser import DTYPE
from byoc.grammar.examplejson_printer import print_subgraph
from byoc.ir import CALL_OP, Function
from byoc.spec.backend import BackendSpec, OptionValue
from byoc.spec.bindings import TokenBinding

from .artifacts import Artifact, Role

PRINTER_INDENT = "  "
"""The indentation :func:`print_subgraph` writes, replaced by the ``indent`` option."""


def generate(
    externals: Sequence[Function], spec: BackendSpec, catalog: Catalog, options: Mapping[str, OptionValue]
) -> tuple[Artifact, ...]:
    to_token = {op: b.name for op, b in spec.ops.items() if isinstance(b, TokenBinding)}
    indent = " " * int(options.get("indent", 2))
    text = "".join(subgraph_text(fn, to_token, spec.name, indent) for fn in externals)
    return (Artifact(f"{spec.name}.examplejson", text, Role.MODULE, spec.name),)


def subgraph_text(
    fn: Function, to_token: Mapping[str, str], backend: str, indent: str = PRINTER_INDENT
) -> str:
    """One function as an ExampleJSON block; raises GraphError if it cannot be one."""
    fn = expressible(fn, to_token, backend)
    lines = print_subgraph(fn, to_token).splitlines()
    body = [indent + line.removeprefix(PRINTER_INDENT) for line in lines[1:]]
    return "\n".join([lines[0], *body]) + "\n"


def expressible(fn: Function, to_token: Mapping[str, str], backend: str) -> Function:
    """``fn`` with only the ops its result needs, the result last; or a GraphError
    naming the first thing ExampleJSON cannot say."""
    where = f"function {fn.name}" if fn.name else "an unnamed function"
    if fn.name is None:
        raise GraphError("an ExampleJSON subgraph needs a name", fn.loc)
    if fn.constants:
        c = fn.constants[0]
        raise GraphError(
            f"{where}: ExampleJSON has no constants, but {c.name} is one",
            c.loc or fn.loc,
            hint="pass the constant as an input, or offload to a json or c_source backend",
        )
    for p in fn.params:
        if p.type.dtype != DTYPE:
            raise GraphError(
                f"{where}: input {p.name} is {p.type}; ExampleJSON is {DTYPE} only", p.loc or fn.loc
            )
    if len(fn.outputs) != 1:
        raise GraphError(
            f"{where}: ExampleJSON has one result per subgraph, this one has {len(fn.outputs)}",
            fn.loc,
            hint="split the region, or offload it to a json or c_source backend",
        )
    producers = {name: node for node in fn.nodes for name in node.outputs}
    result = producers.get(fn.outputs[0])
    if result is None:
        raise GraphError(
            f"{where}: its result {fn.outputs[0]} is an input; ExampleJSON's result is its last op line",
            fn.loc,
        )
    for node in fn.nodes:
        if node.op == CALL_OP or node.op not in to_token:
            known = ", ".join(sorted(to_token)) or "none"
            raise GraphError(
                f"{where}: backend {backend} has no ExampleJSON token for op {node.op}",
                node.loc,
                hint=f"expressible ops: {known}",
            )
        if node.attrs:
            raise GraphError(f"{where}: ExampleJSON cannot carry the attributes of {node.op}", node.loc)
        if len(node.outputs) != 1 or node.type.dtype != DTYPE:
            raise GraphError(f"{where}: {node.op} gives {node.type}; ExampleJSON is {DTYPE} only", node.loc)
    needed = {result.name}
    kept = []
    for node in reversed(fn.nodes):
        if node.name in needed:
            needed.update(node.inputs)
            if node is not result:
                kept.append(node)
    nodes = (*reversed(kept), result)
    return fn if nodes == fn.nodes else replace(fn, nodes=nodes)
