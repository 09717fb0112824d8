"""Memory layouts of a ``c_source`` spec: the top-level ``layouts:`` (alternative orders
of a value's axes in memory) and each macro's ``layouts:`` (the ports of its kernel that
take them).

A layout is a permutation of the axes of values of one rank (``[0, 2, 3, 1]``: an nchw
value stored as nhwc); the byte size never changes, so the memory plan and the
workspace of a function do not depend on its layouts. Every port takes ``plain``
(byoc's row-major layout); a macro lists the other layouts its kernel takes at each
port, and reads the one its use gets from ``${in<k>_layout}`` and ``${out_layout}``
(:mod:`byoc.generator.c_source.layouts` chooses them inside each function).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from byoc.errors import close_names

from .backend import PLAIN_LAYOUT, LayoutDef
from .bindings import frozen_map
from .draft import SpecDraft, c_name, known
from .template import TemplateSyntaxError, placeholder_names

if TYPE_CHECKING:
    from .yaml_doc import YamlDoc

OUT_PORT = "out"
"""The port of a kernel's result; its inputs' ports are ``in0``, ``in1``, ..."""

LAYOUT_PLACEHOLDER = "{port}_layout"
"""The macro-argument placeholder that gives a port's layout (``${in0_layout}``)."""


def load_layouts(doc: YamlDoc, root: Any, draft: SpecDraft) -> None:
    """The spec's ``layouts:`` into ``draft.layouts``."""
    node = doc.mapping(root, "layouts", "layouts")
    if not node:
        raise doc.error(
            "layouts must name at least one layout", root, "layouts", value=True, hint="or remove `layouts:`"
        )
    for name in node:
        what = f"layout {name}"
        c_name(doc, node, name, "layout name")
        if name == PLAIN_LAYOUT:
            raise doc.error(
                f"layout name {PLAIN_LAYOUT!r} is byoc's own",
                node,
                name,
                hint=f"every port takes {PLAIN_LAYOUT} (row-major); name the other layouts otherwise",
            )
        lnode = doc.mapping(node, name, what)
        doc.check_keys(lnode, what, ("permutation",), ("doc",))
        perm = doc.typed(lnode, "permutation", list, f"{what}: permutation")
        for i in range(len(perm)):
            doc.typed(perm, i, int, f"{what}: axis {i} of the permutation")
        axes = [int(a) for a in perm]
        example = "[0, 2, 3, 1] stores an nchw value as nhwc"
        if sorted(axes) != list(range(len(axes))):
            raise doc.error(
                f"{what}: {axes} is not a permutation of the axes 0 to {len(axes) - 1}",
                lnode,
                "permutation",
                value=True,
                hint=f"list each axis of the value once, in the order memory stores them: {example}",
            )
        if axes == sorted(axes):
            raise doc.error(
                f"{what}: the identity permutation is the {PLAIN_LAYOUT} layout",
                lnode,
                "permutation",
                value=True,
                hint=f"list the axes in the order memory stores them: {example}",
            )
        if len(axes) not in draft.ranks:
            raise doc.error(
                f"{what}: a permutation of {len(axes)} axes, but the backend has no rank {len(axes)}",
                lnode,
                "permutation",
                value=True,
                hint=f"ranks: {', '.join(map(str, draft.ranks))}",
            )
        ldoc = str(doc.typed(lnode, "doc", str, f"{what}: doc")).strip() if "doc" in lnode else ""
        draft.layouts[str(name)] = LayoutDef(str(name), tuple(axes), ldoc, doc.at(node, name))


def load_macro_layouts(
    doc: YamlDoc, mnode: Any, what: str, inputs: int, params: Mapping[str, tuple[Any, Any]], draft: SpecDraft
) -> Mapping[str, tuple[str, ...]]:
    """A macro's ``layouts:``: each port of its kernel (``in<k>`` below ``inputs``, or
    ``out``) -> the layouts of ``draft.layouts`` it takes besides plain. A port that
    takes one must be told which it gets: an argument must read its placeholder.
    ``params`` says where each argument is written: ``(node, key)``, in the macro's own
    ``params`` or the spec's shared ones (:func:`~byoc.spec.macro_files.macro_arguments`)."""
    node = doc.mapping(mnode, "layouts", f"{what}: layouts")
    ports = [f"in{k}" for k in range(inputs)] + [OUT_PORT]
    out: dict[str, tuple[str, ...]] = {}
    for port in node:
        if port not in ports:
            raise doc.error(
                f"{what}: layouts: {port!r} is not a port of its kernel",
                node,
                port,
                hint=f"its ports: {', '.join(ports)} (inputs count from 0, the result is `{OUT_PORT}`)",
            )
        names = doc.typed(node, port, list, f"{what}: the layouts of {port}")
        if not names:
            raise doc.error(
                f"{what}: the layouts of {port} list none",
                node,
                port,
                value=True,
                hint=f"list a layout, or remove {port} ({PLAIN_LAYOUT} is always taken)",
            )
        taken: list[str] = []
        for i, name in enumerate(names):
            doc.typed(names, i, str, f"{what}: a layout of {port}")
            if name == PLAIN_LAYOUT:
                raise doc.error(
                    f"{what}: {port} lists {PLAIN_LAYOUT}, which every port takes",
                    names,
                    i,
                    hint="list only the other layouts",
                )
            if name not in draft.layouts:
                close = close_names(str(name), draft.layouts)
                raise doc.error(
                    f"{what}: unknown layout {name!r} for {port}",
                    names,
                    i,
                    hint=(f"did you mean {' or '.join(close)}? " if close else "")
                    + known("layouts (top-level `layouts:`)", draft.layouts),
                )
            if name in taken:
                raise doc.error(f"{what}: {port} lists layout {name} twice", names, i)
            taken.append(str(name))
        placeholder = LAYOUT_PLACEHOLDER.format(port=port)
        if not _reads(doc, mnode, what, params, placeholder):
            raise doc.error(
                f"{what} takes layouts at {port}, but no argument reads ${{{placeholder}}}",
                node,
                port,
                hint=f'pass ${{{placeholder}}} in an argument (p_LAYOUT_: "${{{placeholder}}}"): '
                f"it says which layout, {' or '.join([PLAIN_LAYOUT, *taken])}, the kernel gets",
            )
        out[str(port)] = tuple(taken)
    return frozen_map(out)


def load_mixed_layouts(doc: YamlDoc, mnode: Any, what: str, ports: Mapping[str, tuple[str, ...]]) -> bool:
    """A macro's ``mixed_layouts:`` (default true). ``false`` says its kernel takes the
    ports of its ``layouts:`` only all in one layout (all plain, or all the same one):
    a library whose fast code needs its source and result in one order, say."""
    mixed = bool(doc.typed(mnode, "mixed_layouts", bool, f"{what}: mixed_layouts"))
    if not mixed and len(ports) < 2:
        listed = f"only {next(iter(ports))}" if ports else "no port"
        raise doc.error(
            f"{what}: mixed_layouts: false ties the ports of its layouts together, but layouts lists {listed}",
            mnode,
            "mixed_layouts",
            value=True,
            hint="list the layouts of two ports or more (`layouts: {in0: [...], out: [...]}`), "
            "or remove mixed_layouts",
        )
    return mixed


def check_layout_ranks(doc: YamlDoc, draft: SpecDraft, uses: list[Any]) -> None:
    """A macro whose result takes a layout serves only the layout's rank; ``uses`` are
    the :class:`~byoc.spec.macro_uses.MacroUse` of the spec. (An input's rank depends
    on the op; the generator gives an input a layout only from a result of its rank.)"""
    for use in uses:
        for name in draft.macros[use.macro].layouts.get(OUT_PORT, ()):
            layout = draft.layouts[name]
            ranks = use.ranks if use.ranks is not None else draft.ranks
            other = [r for r in ranks if r != layout.rank]
            if other:
                raise doc.error(
                    f"{use.user} uses macro {use.macro} at rank {other[0]}, but its result takes "
                    f"layout {name}, of rank {layout.rank}",
                    use.node,
                    use.key,
                    value=True,
                    hint=f"map rank {other[0]} to a macro without layouts, or only rank {layout.rank} to this one",
                )


def _reads(
    doc: YamlDoc, mnode: Any, what: str, params: Mapping[str, tuple[Any, Any]], placeholder: str
) -> bool:
    """Whether an argument of ``params`` reads ``${placeholder}``; a malformed argument
    is a located error here, where it is written (the macro's own ``params`` or the
    spec's shared ones), as the layouts are checked before the arguments are."""
    for pnode, key in params.values():
        try:
            if placeholder in placeholder_names(str(pnode[key])):
                return True
        except TemplateSyntaxError as exc:
            whose = f"{what}: params" if pnode is mnode.get("params") else "params (shared)"
            raise doc.error_at(
                f"{whose}: {key}: {exc.message}", doc.at_offset(pnode, key, exc.offset), hint=exc.hint
            ) from None
    return False
