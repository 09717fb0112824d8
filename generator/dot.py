"""Graphviz pictures of a (partitioned) program: ``byoc dot``.

One cluster per region, one colour per backend (host ops stay white), a dashed box
per composite inside its region (labelled ``@backend.pattern``), inputs and
outputs as ellipses, and every edge labelled with the tensor type it carries. The
text is deterministic: ids are positional and colours follow first appearance.

A program is always one ``digraph``, so it renders to one valid picture: a single
graph is drawn on its own; several graphs are drawn side by side, one cluster each
(``cluster_g<k>``, labelled with the graph's name), with their node and region ids
prefixed ``g<k>_`` so that they stay distinct.
"""

from __future__ import annotations

from byoc.ir import ANON_PREFIX, CALL_OP, Function, Program, TensorType

PALETTE = (
    ("#dbeafe", "#1d4ed8"),
    ("#dcfce7", "#15803d"),
    ("#fef3c7", "#b45309"),
    ("#fce7f3", "#be185d"),
    ("#ede9fe", "#6d28d9"),
    ("#cffafe", "#0e7490"),
)
"""(fill, border) per backend, in order of first appearance."""

DEFAULTS = (
    "  rankdir=TB;",
    '  graph [fontname="Helvetica", fontsize=11];',
    '  node [shape=box, style="rounded,filled", fillcolor="#ffffff", fontname="Helvetica", fontsize=10];',
    '  edge [fontname="Helvetica", fontsize=8, color="#555555"];',
)


def dot_program(program: Program) -> str:
    """One digraph: the single graph's own picture, or one cluster per graph."""
    if len(program.functions) == 1:
        return dot_function(program.functions[0])
    lines = ['digraph "graphs" {', *DEFAULTS]
    for k, fn in enumerate(program.functions):
        colours = _colours(fn)
        lines.append(f"  subgraph cluster_g{k} {{")
        lines.append(f'    label={_quote(_legend(fn, colours))}; style="rounded"; color="#9ca3af";')
        lines += ["  " + line for line in _body(fn, colours, f"g{k}_")]
        lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"


def dot_function(fn: Function) -> str:
    """One graph as a digraph of its own."""
    colours = _colours(fn)
    lines = [f"digraph {_quote(fn.name or 'graph')} {{", *DEFAULTS, *_body(fn, colours, "")]
    if colours:
        lines.append(f"  label={_quote(_legend(fn, colours))}; labelloc=b;")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _two(first: object, second: object) -> str:
    """A two-line label."""
    return _quote(f"{first}\n{second}")


def _colours(fn: Function) -> dict[str, tuple[str, str]]:
    colours: dict[str, tuple[str, str]] = {}
    for node in fn.nodes:
        if node.callee is not None and node.callee.backend not in colours:
            colours[node.callee.backend or ""] = PALETTE[len(colours) % len(PALETTE)]
    return colours


def _legend(fn: Function, colours: dict[str, tuple[str, str]]) -> str:
    if not colours:
        return fn.name
    return f"{fn.name}: {', '.join(f'@{b}' for b in colours)}; white boxes run on the host"


def _body(fn: Function, colours: dict[str, tuple[str, str]], prefix: str) -> list[str]:
    """The statements of one graph, each indented two spaces; ids start with ``prefix``."""
    lines: list[str] = []
    producer: dict[str, str] = {}
    types: dict[str, TensorType] = dict(fn.types())
    for k, p in enumerate(fn.params):
        producer[p.name] = f"{prefix}in{k}"
        lines.append(f'  {prefix}in{k} [shape=ellipse, fillcolor="#f3f4f6", label={_two(p.name, p.type)}];')
    for k, c in enumerate(fn.constants):
        producer[c.name] = f"{prefix}const{k}"
        lines.append(
            f'  {prefix}const{k} [shape=note, fillcolor="#f3f4f6", label={_two(c.name + " (const)", c.type)}];'
        )
    edges: list[str] = []
    counter = [0]

    def emit_nodes(function: Function, scope: dict[str, str], indent: str, fill: str) -> None:
        for node in function.nodes:
            if node.op == CALL_OP and node.callee is not None:
                callee = node.callee
                fill_c, border = colours[callee.backend or ""]
                cluster = f"cluster_{prefix}{counter[0]}"
                counter[0] += 1
                lines.append(f"{indent}subgraph {cluster} {{")
                if callee.composite is not None:
                    # A composite: a dashed box inside its region, its ops in the region's colour.
                    fill_c = fill
                    title = f"@{callee.backend}.{callee.composite}"
                    style = f'style="rounded,dashed,filled"; fillcolor="#ffffff"; color="{border}"'
                else:
                    title = f"@{callee.backend}" + (f" {callee.name}" if callee.name else "")
                    style = f'style="rounded,filled"; fillcolor="{fill_c}80"; color="{border}"'
                lines.append(f"{indent}  label={_quote(title)}; {style};")
                inner = {p.name: scope[p.name] for p in callee.params}
                inner_types = dict(callee.types())
                for j, c in enumerate(callee.constants):
                    cid = f"{prefix}c{counter[0]}_{j}"
                    inner[c.name] = cid
                    lines.append(
                        f'{indent}  {cid} [shape=note, fillcolor="#f3f4f6", label={_two(c.name + " (const)", c.type)}];'
                    )
                saved = dict(types)
                types.update(inner_types)
                emit_nodes(callee, inner, indent + "  ", fill_c)
                types.clear()
                types.update(saved)
                lines.append(f"{indent}}}")
                for out, result in zip(node.outputs, callee.outputs):
                    scope[out] = inner[result]
                continue
            nid = f"{prefix}n{counter[0]}"
            counter[0] += 1
            label = node.op if node.name.startswith(ANON_PREFIX) else f"{', '.join(node.outputs)} = {node.op}"
            attrs = ", ".join(f"{k}={v}" for k, v in node.attrs)
            if attrs:
                label += f"\n{attrs}"
            lines.append(f"{indent}{nid} [fillcolor={_quote(fill)}, label={_quote(label)}];")
            for name in node.inputs:
                edges.append(f"  {scope[name]} -> {nid} [label={_quote(str(types[name]))}];")
            for out, t in zip(node.outputs, node.types):
                scope[out] = nid
                types[out] = t

    emit_nodes(fn, producer, "  ", "#ffffff")
    for k, name in enumerate(fn.outputs):
        lines.append(
            f'  {prefix}out{k} [shape=ellipse, fillcolor="#f3f4f6", label={_two(f"output {k}", types[name])}];'
        )
        edges.append(f"  {producer[name]} -> {prefix}out{k} [label={_quote(str(types[name]))}];")
    return lines + edges
