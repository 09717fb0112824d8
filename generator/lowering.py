"""Turn a parsed Program into what the generators consume: host functions whose call
nodes name external functions by symbol, and the external functions themselves.

This is the explicit-region half of partitioning: every ``@backend { ... }`` region
already is a callee Function; lowering gives each one its exported symbol and checks
it against its backend's spec. (Automatic partitioning of un-annotated graphs builds
regions first and then lowers them the same way.)
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from byoc.c_names import C_KEYWORDS
from byoc.catalog import Catalog
from byoc.errors import GraphError, UsageError
from byoc.ir import CALL_OP, Function, Node, Program
from byoc.spec.backend import BackendSpec

MAX_SYMBOL_LENGTH = 128
_C_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


@dataclass(frozen=True, slots=True)
class Lowered:
    """``hosts`` are the program's top-level functions with every callee renamed to its
    symbol; ``externals`` are those callees, in first-call order, grouped later by backend."""

    hosts: tuple[Function, ...]
    externals: tuple[Function, ...]

    def externals_for(self, backend: str) -> tuple[Function, ...]:
        return tuple(f for f in self.externals if f.backend == backend)

    @property
    def backends(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(f.backend for f in self.externals if f.backend))


def offload_whole(program: Program, backend: str) -> Program:
    """Make each function one external function of ``backend``, called by a host
    function of the same name: how an ExampleJSON file's subgraphs are generated."""
    hosts = []
    for fn in program.functions:
        callee = replace(fn, backend=backend)
        names = tuple(p.name for p in fn.params)
        outputs = tuple(
            f"{fn.name}_out{i}" if len(fn.outputs) > 1 else f"{fn.name}_out" for i in range(len(fn.outputs))
        )
        call = Node(outputs, CALL_OP, names, callee.output_types, (), callee, fn.loc)
        hosts.append(Function(fn.name, fn.params, (), (call,), outputs, None, fn.loc))
    return Program(tuple(hosts))


def lower(program: Program, load_backend: Callable[[str], BackendSpec], catalog: Catalog) -> Lowered:
    """Assign symbols to every region and check each against its backend spec.

    ``load_backend(name)`` returns a backend's spec or raises a ByocError.
    """
    specs: dict[str, BackendSpec] = {}
    used: dict[str, object] = {}
    counters: dict[str, int] = {}
    externals: list[Function] = []
    hosts: list[Function] = []

    # Explicit names are claimed first, so automatic names never take them.
    for fn in program.functions:
        for node in fn.nodes:
            if node.callee is not None and node.callee.name is not None:
                _claim(node.callee.name, node, used)

    for fn in program.functions:
        nodes = []
        for node in fn.nodes:
            if node.callee is None:
                nodes.append(node)
                continue
            callee = node.callee
            backend = callee.backend or ""
            if backend not in specs:
                try:
                    specs[backend] = load_backend(backend)
                except UsageError as exc:
                    raise GraphError(
                        f"unknown backend {backend!r} in @{backend}", node.loc, hint=exc.hint
                    ) from None
            spec = specs[backend]
            symbol = callee.name
            if symbol is None:
                symbol = _next_symbol(spec.symbol_prefix, counters, used)
                used[symbol] = node
            _check_region(callee, node, spec, catalog)
            callee = replace(callee, name=symbol)
            externals.append(callee)
            nodes.append(replace(node, callee=callee))
        hosts.append(replace(fn, nodes=tuple(nodes)))
    _check_prefixes(externals)
    return Lowered(tuple(hosts), tuple(externals))


def _check_prefixes(externals: list[Function]) -> None:
    """Generated C names extend a symbol with ``_`` (``<sym>_``, ``<sym>_wrapper_``,
    ``<sym>_<k>``), so no symbol may start with another symbol plus ``_``."""
    names = {f.name for f in externals}
    for fn in externals:
        b = fn.name or ""
        a = next((b[:i] for i, ch in enumerate(b) if ch == "_" and b[:i] in names), None)
        if a is not None:
            raise GraphError(
                f"region name {b!r} clashes with the C names generated for region {a!r}",
                fn.loc,
                hint=f"names generated for {a!r} start with {a + '_'!r}; rename one of the regions",
            )


def _claim(symbol: str, node: Node, used: dict[str, object]) -> None:
    problem = symbol_problem(symbol)
    if problem:
        raise GraphError(f"region name {symbol!r} {problem}", node.loc, hint="pick another name after `as`")
    if symbol in used:
        raise GraphError(
            f"two regions are both named {symbol!r}",
            node.loc,
            hint="region names become C symbols; make them unique",
        )
    used[symbol] = node


def symbol_problem(symbol: str) -> str | None:
    """Why ``symbol`` cannot be an exported C symbol, or None when it can."""
    if not _C_IDENT.match(symbol):
        return "is not a C identifier"
    if symbol in C_KEYWORDS:
        return "is a C or C++ keyword"
    if symbol.startswith("__") or (symbol[0] == "_" and symbol[1:2].isupper()):
        return "is reserved in C (it starts with __ or _ and a capital)"
    if symbol.startswith(("byoc_", "TVMFFI", "kTVMFFI", "DL", "kDL")):
        return "starts with a prefix reserved for the generated support code (byoc_, TVMFFI, DL)"
    if len(symbol) > MAX_SYMBOL_LENGTH:
        return f"is longer than {MAX_SYMBOL_LENGTH} characters"
    return None


def _next_symbol(prefix: str, counters: dict[str, int], used: Mapping[str, object]) -> str:
    k = counters.get(prefix, 0)
    while f"{prefix}_{k}" in used:
        k += 1
    counters[prefix] = k + 1
    return f"{prefix}_{k}"


def _check_region(callee: Function, call: Node, spec: BackendSpec, catalog: Catalog) -> None:
    """Every node of an explicit region must be something its backend can run."""
    for node in callee.nodes:
        if node.callee is not None and node.callee.composite is not None:
            _check_composite(node, callee, spec, catalog)
            continue
        if node.op == CALL_OP:
            raise GraphError(
                "a region cannot contain another region", node.loc, hint="move the inner region out"
            )
        t = node.type
        if node.op not in spec.ops:
            raise GraphError(
                f"backend {spec.name} has no op {node.op!r}",
                node.loc,
                hint=f"{spec.name} supports {', '.join(spec.ops)}; move {node.op} out of the region",
            )
        if not spec.supports(node.op, t.dtype, t.rank):
            raise GraphError(
                f"backend {spec.name} cannot run {node.op} on {t}",
                node.loc,
                hint=f"{spec.name} takes dtypes {', '.join(spec.dtypes)} and ranks {_ranks(spec.ranks)}",
            )
    for p in callee.params:
        if p.type.dtype not in spec.dtypes or p.type.rank not in spec.ranks:
            raise GraphError(f"backend {spec.name} cannot take input {p.name}: {p.type}", call.loc)


def _check_composite(call: Node, region: Function, spec: BackendSpec, catalog: Catalog) -> None:
    """A composite must be its pattern, on tensors its backend's kernel takes."""
    from byoc.spec.lowerings import LoweringBinding

    from .composite import GraphView, composite_match, why_not_implementable
    from .partition.annotate import takes_types

    assert call.callee is not None
    what = f"composite @{spec.name}.{call.callee.composite}"
    if call.callee.composite not in spec.patterns:
        raise GraphError(
            f"backend {spec.name} has no pattern {call.callee.composite!r}",
            call.loc,
            hint=f"its patterns: {', '.join(spec.patterns) or 'none'}",
        )
    if isinstance(spec.patterns[call.callee.composite].binding, LoweringBinding):
        raise GraphError(
            f"{what}: the pattern has no kernel; {spec.name} computes it by the ops of its lowering",
            call.loc,
            hint=f"write the pattern's ops in the @{spec.name} region without @{spec.name}.{call.callee.composite} "
            "(or in no region: partitioning lowers them)",
        )
    found = composite_match(call, spec, region, catalog)
    if isinstance(found, str):
        pattern = spec.patterns[call.callee.composite]
        raise GraphError(
            f"{what} does not match its pattern: {found}",
            call.loc,
            hint=f"pattern {pattern.name}: {pattern.describe()}",
        )
    view = GraphView.of(call.callee)
    for node in call.callee.nodes:
        if not takes_types(spec, node, view.types, catalog):
            raise GraphError(
                f"{what}: backend {spec.name} cannot take the tensors of {node.op}",
                node.loc,
                hint=f"{spec.name} takes dtypes {', '.join(spec.dtypes)} and ranks {_ranks(spec.ranks)}, without broadcasting"
                if not spec.broadcast
                else None,
            )
    why = why_not_implementable(spec, found, view, catalog)
    if why is not None:
        raise GraphError(
            f"{what}: backend {spec.name} has no kernel for it: {why}",
            call.loc,
            hint=f"pattern {found.pattern.name}: {found.pattern.describe()}",
        )


def _ranks(ranks: tuple[int, ...]) -> str:
    if len(ranks) > 2 and ranks == tuple(range(ranks[0], ranks[-1] + 1)):
        return f"{ranks[0]}-{ranks[-1]}"
    return ", ".join(map(str, ranks))
