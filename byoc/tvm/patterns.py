"""The relax pattern table of a byoc backend, for ``relax.transform.FuseOpsByPattern``,
generated from its spec: one pattern per composite pattern of the spec that the rules
can write in relax (largest first), then one per rule whose catalog op the backend
maps. Every pattern is named ``byoc_<backend>.<name>`` and checks a match by
translating it to byoc IR and asking byoc's partitioning whether the backend takes it
whole (dtypes, ranks, broadcasting, ``when:`` conditions, the machine's probes)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

from tvm.relax.dpl import is_const, is_op, is_tuple_get_item, wildcard

from byoc.errors import UsageError

from .rules import TRANSPOSE_OP, Rule, rules
from .translate import Oracle, Translator, Unsupported

CODEGEN_PREFIX = "byoc_"
"""A backend's relax codegen is ``byoc_<backend>`` (its ``relax.ext.`` function and its
patterns' prefix)."""


def codegen_name(backend: str) -> str:
    return f"{CODEGEN_PREFIX}{backend}"


def backend_list(backends: str | Sequence[str]) -> list[str]:
    """``"ccompiler,fused"`` or ``["ccompiler", "fused"]`` as a list of backend names."""
    names = backends.split(",") if isinstance(backends, str) else list(backends)
    names = [n.strip() for n in names if n.strip()]
    if not names:
        raise UsageError("no backend to offload to", hint='name one, as in offload(mod, "fused")')
    if len(set(names)) != len(names):
        raise UsageError(f"a backend is named twice in {','.join(names)}")
    return names


@cache
def oracle(backend: str, spec_path: tuple[str, ...] | None) -> Oracle:
    """One :class:`Oracle` per backend and spec path, shared by checks and the codegen."""
    return Oracle(backend, list(spec_path) if spec_path is not None else None)


def spec_path_key(spec_path: str | Sequence[str] | None) -> tuple[str, ...] | None:
    if spec_path is None:
        return None
    return (
        (str(spec_path),)
        if isinstance(spec_path, str) or not isinstance(spec_path, Sequence)
        else tuple(map(str, spec_path))
    )


def rule_pattern(rule: Rule, args: Sequence[object]):
    """The relax form of ``rule`` over the dpl patterns ``args`` of its catalog inputs."""
    inputs = []
    for k, arg in enumerate(args):
        if k in rule.transposed:
            inputs.append(is_op(TRANSPOSE_OP)(arg))
        elif k == rule.bias:
            inputs.append(is_const())
        else:
            inputs.append(arg)
    call = is_op(rule.relax)(*inputs, varg_default_wildcard=True)
    return call if rule.item is None else is_tuple_get_item(call, rule.item)


def composite_pattern(pattern):
    """A spec's composite pattern in relax (each node by the first rule of its op that
    can write it), or None when one of its ops has none."""
    values = {name: wildcard() for name in pattern.inputs}
    for node in pattern.nodes:
        for rule in rules():
            if rule.op == node.op and (rule.bias is None or node.inputs[rule.bias] in pattern.inputs):
                values[node.name] = rule_pattern(rule, [values[x] for x in node.inputs])
                break
        else:
            return None
    return values[pattern.nodes[-1].name]


def make_check(found: Oracle):
    """The check of every pattern: the match translates, its interior values are used
    by the match alone, and the backend takes it whole."""

    def check(ctx) -> bool:
        inside = set(ctx.matched_bindings.keys())
        root = ctx.value_to_bound_var.get(ctx.matched_expr)
        for var in inside:
            if not var.same_as(root) and any(user not in inside for user in ctx.var_usages.get(var, ())):
                return False
        try:
            t = Translator(found, ctx.matched_bindings)
            fn = t.function([t.value(ctx.matched_expr)], "check")
        except Unsupported:
            return False
        return found.takes(fn)

    return check


def patterns(backend: str, spec_path: str | Sequence[str] | None = None) -> list[tuple]:
    """The pattern table of ``backend`` for ``FuseOpsByPattern``, highest priority
    first: ``(name, pattern, annotations, check)`` each."""
    found = oracle(backend, spec_path_key(spec_path))
    spec, check, prefix = found.spec, make_check(found), codegen_name(backend)
    table = []
    for pattern in sorted(spec.patterns.values(), key=lambda p: -p.size):
        dpl = composite_pattern(pattern)
        if dpl is not None:
            table.append((f"{prefix}.{pattern.name}", dpl, {}, check))
    for rule in rules():
        if rule.op in spec.ops:
            arity = found.catalog[rule.op].min_inputs
            table.append(
                (f"{prefix}.{rule.name}", rule_pattern(rule, [wildcard() for _ in range(arity)]), {}, check)
            )
    return table
