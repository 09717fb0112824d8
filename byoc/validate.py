"""Check a :class:`~byoc.ir.Function` or :class:`~byoc.ir.Program` built by code.

The parsers already produce valid IR through :mod:`byoc.builder`; this module
re-checks IR that transformations or API users construct directly: unique names,
inputs defined before use (topological order), call nodes consistent with their
callees, and every type equal to what the op catalog infers.
"""

from __future__ import annotations

from .catalog import Catalog, RuleError, infer_types, normalize_attrs
from .errors import GraphError
from .ir import CALL_OP, DTYPES, Function, Program, TensorType, shape_problem


def validate_program(program: Program, catalog: Catalog) -> None:
    seen: set[str | None] = set()
    for fn in program.functions:
        if fn.name in seen:
            raise GraphError(f"duplicate function name {fn.name!r}", fn.loc)
        seen.add(fn.name)
        validate_function(fn, catalog)


def validate_function(fn: Function, catalog: Catalog) -> None:
    """Raise GraphError, located at the offending node, if ``fn`` is not valid IR."""
    types: dict[str, TensorType] = {}

    def define(name: str, type_: TensorType, loc) -> None:
        if name in types:
            raise GraphError(f"duplicate name {name!r} in function {fn.name}", loc)
        if type_.dtype not in DTYPES or any(d < 0 for d in type_.shape):
            raise GraphError(f"invalid tensor type {type_} for {name!r}", loc)
        problem = shape_problem(type_.shape)
        if problem is not None:
            raise GraphError(f"tensor type {type_} of {name!r} is too large: {problem}", loc)
        types[name] = type_

    for p in fn.params:
        define(p.name, p.type, p.loc)
    for c in fn.constants:
        if c.values.size != c.type.size:
            raise GraphError(f"constant {c.name!r} has {c.values.size} values for type {c.type}", c.loc)
        define(c.name, c.type, c.loc)
    for node in fn.nodes:
        for name in node.inputs:
            if name not in types:
                raise GraphError(f"{node.name}: input {name!r} is undefined or defined later", node.loc)
        inputs = tuple(types[n] for n in node.inputs)
        if node.op == CALL_OP:
            callee = node.callee
            if callee is None:
                raise GraphError(f"{node.name}: a call node needs a callee", node.loc)
            if (
                tuple(p.name for p in callee.params) != node.inputs
                or tuple(p.type for p in callee.params) != inputs
            ):
                raise GraphError(f"{node.name}: call inputs do not match the callee's parameters", node.loc)
            validate_function(callee, catalog)
            expected = callee.output_types
        else:
            op = catalog.get(node.op)
            if op is None:
                raise GraphError(f"unknown op {node.op!r}", node.loc)
            try:
                if normalize_attrs(op, node.attrs) != node.attrs:
                    raise GraphError(
                        f"{node.name}: attrs must list every attribute in catalog order", node.loc
                    )
                expected = infer_types(op, inputs, node.attrs, len(node.outputs))
            except RuleError as exc:
                raise GraphError(f"{node.name}: {exc.message}", node.loc, hint=exc.hint) from None
        if node.types != expected or len(node.outputs) != len(expected):
            raise GraphError(
                f"{node.name}: declared types {[str(t) for t in node.types]} "
                f"but the catalog infers {[str(t) for t in expected]}",
                node.loc,
            )
        for name, t in zip(node.outputs, node.types):
            define(name, t, node.loc)
    for name in fn.outputs:
        if name not in types:
            raise GraphError(f"output {name!r} of function {fn.name} is undefined", fn.loc)
