"""Print byoc IR as graph DSL text; ``parse_graph(print_graph(p)) == p``.

Anonymous nodes (``%k``, from nested calls) are folded back into the expression
of their single consumer, so the printed text has the shape the user wrote.
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np

from byoc.errors import UsageError
from byoc.float_text import SMALL, float32_texts, join_float32
from byoc.grammar.graph_constants import rounded
from byoc.ir import (
    ANON_PREFIX,
    CALL_OP,
    AttrValue,
    Constant,
    Function,
    Node,
    Program,
    TensorType,
    first_uses,
    is_half,
    plain_numbers,
    weights_sources,
)

INDENT = "  "


def print_graph(program: Program, *, inline_weights: bool = False) -> str:
    """The text of ``program``: its weights declaration, if a constant is external, then
    its graphs. With ``inline_weights`` every constant is written out as values, so the
    text stands alone (a bundle's copy of the source does)."""
    head = "" if inline_weights else weights_declaration(program)
    external = bool(head)
    return head + "\n".join(print_function(fn, external=external) for fn in program.functions)


def weights_declaration(program: Program) -> str:
    """``weights "FILE" sha256 "DIGEST"`` and a blank line, or "" if every constant is
    inline. A text declares one weights file, so the constants must share theirs."""
    files = {(s.file, s.sha256) for s in weights_sources(program.functions)}
    if not files:
        return ""
    if len(files) > 1:
        raise UsageError(
            f"the program's constants come from {len(files)} weights files; a graph text declares one",
            hint="merge the weights into one .npz file",
        )
    file, digest = files.pop()
    return f"weights {_attr(file)} sha256 {_attr(digest)}\n\n"


def print_function(fn: Function, *, external: bool = False) -> str:
    """One graph's text. An external constant is written as ``weights["entry"]`` only
    when ``external`` (the caller prints the declaration); else as its values."""
    if fn.name is None:
        raise UsageError("a top-level graph needs a name")
    params = ", ".join(f"{p.name}: {format_type(p.type)}" for p in fn.params)
    lines = [f"graph {fn.name}({params}) {{"]
    _body(fn, 1, lines, external)
    lines.append("}")
    return "\n".join(lines) + "\n"


def format_type(t: TensorType) -> str:
    return f"{t.dtype}[{', '.join(map(str, t.shape))}]"


def _body(fn: Function, depth: int, lines: list[str], external: bool) -> None:
    pad = INDENT * depth
    uses = Counter(name for node in fn.nodes for name in node.inputs)
    uses.update(fn.outputs)
    anon = {
        node.name: node
        for node in fn.nodes
        if node.name.startswith(ANON_PREFIX)
        and node.op != CALL_OP
        and len(node.outputs) == 1
        and uses[node.name] == 1
    }
    for c in fn.constants:
        lines.append(f"{pad}{c.name} = {_constant(c, external)}")
    for node in fn.nodes:
        if node.name in anon:
            continue
        targets = ", ".join(_ident(n) for n in node.outputs)
        if node.op == CALL_OP:
            assert node.callee is not None
            callee = node.callee
            symbol = f" as {callee.name}" if callee.name is not None else ""
            pattern = f".{callee.composite}" if callee.composite is not None else ""
            params = _parameter_list(callee)
            lines.append(f"{pad}{targets} = @{callee.backend}{pattern}{symbol}{params} {{")
            _body(callee, depth + 1, lines, external)
            lines.append(f"{pad}}}")
        else:
            lines.append(f"{pad}{targets} = {_call(node, anon)}")
    lines.append(f"{pad}return {', '.join(_expr(name, anon) for name in fn.outputs)}")


def _parameter_list(region: Function) -> str:
    """``(x, w)`` when a region's parameters are not in the order its body first uses
    them (the order the parser gives a region without a list), else nothing."""
    names = [p.name for p in region.params]
    local = {c.name for c in region.constants} | {out for node in region.nodes for out in node.outputs}
    read = [n for node in region.nodes for n in node.inputs] + list(region.outputs)
    if first_uses(read, local) == names or region.composite is not None:
        return ""
    return "(" + ", ".join(map(_ident, names)) + ")"


def _ident(name: str) -> str:
    """Names are printed as they are; a stray anonymous name gets a readable form."""
    return name if not name.startswith(ANON_PREFIX) else "tmp_" + name[len(ANON_PREFIX) :]


def _expr(name: str, anon: dict[str, Node]) -> str:
    node = anon.get(name)
    return _call(node, anon) if node is not None else _ident(name)


def _call(node: Node, anon: dict[str, Node]) -> str:
    args = [_expr(name, anon) for name in node.inputs]
    args += [f"{k}={_attr(v)}" for k, v in node.attrs]
    return f"{node.op}({', '.join(args)})"


def _attr(value: AttrValue) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return "[" + ", ".join(map(str, value)) + "]"
    if isinstance(value, str):
        return '"' + value.encode("unicode_escape").decode("ascii").replace('"', '\\"') + '"'
    return repr(value)


def _constant(c: Constant, external: bool) -> str:
    if external and c.source is not None:
        return f"const {format_type(c.type)} weights[{_attr(c.source.entry)}]"
    values = c.values
    if len(values) > 1 and _all_same(values):
        shown = number_texts(values[:1])[0]
    else:
        shown = number_list(values)
    return f"const {format_type(c.type)} {shown}"


def _all_same(values: np.ndarray) -> bool:
    """Whether every value has the first one's bits (so ``-0.0`` is not ``0.0``)."""
    word = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}.get(values.itemsize)
    if word is None:
        rows = values.view(np.uint8).reshape(len(values), values.itemsize)
        return bool((rows == rows[0]).all())
    bits = values.view(word)
    return bool(bits[1] == bits[0] and (bits == bits[0]).all())


def number_list(values: np.ndarray) -> str:
    """The list of a constant's values: ``"[" + ", ".join(number_texts(values)) + "]"``;
    a large float32 array's text is made for the whole array at once
    (:mod:`byoc.float_text`)."""
    if values.dtype == np.float32 and len(values) >= SMALL:
        return join_float32(values, ", ", "[", "]")
    return "[" + ", ".join(number_texts(values)) + "]"


def number_texts(values: np.ndarray) -> list[str]:
    """Each value as the DSL writes it, the shortest text that reads back as exactly
    that value of its dtype (:func:`~byoc.ir.plain_numbers`); ``true``/``false`` for
    bool, and for float16 and bfloat16 the shortest decimal that rounds back to the
    value's bits (:func:`half_text`). float32 arrays go through
    :func:`byoc.float_text.float32_texts`, which gives the same texts."""
    if values.dtype == np.float32:
        return float32_texts(values)
    if values.dtype == np.bool_:
        return ["true" if v else "false" for v in values.tolist()]
    if is_half(str(values.dtype)):  # each of the (at most 65536) distinct values searched once
        distinct, index = np.unique(values.view(np.uint16), return_inverse=True)
        texts = [half_text(v) for v in distinct.view(values.dtype)]
        return [texts[k] for k in index.reshape(-1).tolist()]
    if values.dtype.kind == "f":  # a NaN's sign comes from its bits (float32's text drops it)
        signs = np.signbit(values).tolist()
        return [
            float_text(math.copysign(v, -1.0 if neg else 1.0)) for v, neg in zip(plain_numbers(values), signs)
        ]
    return [repr(v) for v in plain_numbers(values)]


def float_text(x: float) -> str:
    """A float as the DSL writes it: ``repr``, and for a NaN ``nan``, or ``-nan`` when
    its sign bit is set (a NaN's payload is not kept: it reads back as the quiet NaN)."""
    if x != x:
        return "-nan" if math.copysign(1.0, x) < 0 else "nan"
    return repr(x)


def half_text(value: np.generic) -> str:
    """The shortest text of a float16 or bfloat16 ``value`` that the parser reads back
    as the same bits: ``0.1`` for the float16 nearest 0.1 (not ``0.0999755859375``), and
    always with a point or exponent, so ``-0.0`` stays a float. Neither numpy's nor
    ml_dtypes' ``str`` is that for bfloat16 (ml_dtypes prints six digits), so the
    digits are searched: a 16-bit float needs at most 5 significant ones."""
    x = float(value)
    if not np.isfinite(x):
        return float_text(x)
    dtype = value.dtype
    bits = value.tobytes()
    with np.errstate(over="ignore"):  # 3e+38 is an infinity as a bfloat16: a miss
        for digits in range(1, 18):
            candidate = float(f"{x:.{digits}g}")
            if rounded([candidate], str(dtype)).tobytes() == bits:
                return repr(candidate)
    return repr(x)  # unreachable: 17 digits read back as the very double
