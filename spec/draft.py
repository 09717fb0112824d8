"""What the loader and the kinds share while a backend spec is validated: the draft
of the spec, the placeholder check of templates, and the C-name check."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from byoc.catalog import OpDef
from byoc.errors import SpecError

from .backend import LayerDef, LayoutDef, MacroDef, OptionDef
from .bindings import OpBinding
from .names import DIM_PLACEHOLDER, RESERVED_C_NAME
from .template import Placeholder, TemplateSyntaxError, placeholders

if TYPE_CHECKING:
    from .yaml_doc import YamlDoc


@dataclass
class SpecDraft:
    """A backend spec as it is validated: what the common keys gave (ranks, options)
    and the kind's parts as its checks fill them in. The loader copies it into a
    :class:`~byoc.spec.backend.BackendSpec`."""

    ranks: tuple[int, ...]
    options: dict[str, OptionDef]
    dtypes: tuple[str, ...] = ()
    ops: dict[str, OpBinding] = field(default_factory=dict)
    macros: dict[str, MacroDef] = field(default_factory=dict)
    layers: dict[str, LayerDef] = field(default_factory=dict)
    templates: dict[str, str] = field(default_factory=dict)
    template_lines: dict[str, int] = field(default_factory=dict)
    """The spec file's line of each template's first line, for templates written as
    literal blocks (``|``): where the generated code says each came from."""
    header: str | None = None
    macro_params: dict[str, dict[str, tuple[Any, str]]] = field(default_factory=dict)
    """Where each macro's arguments are written, by parameter: (YAML mapping, key), the
    macro's own ``params`` or the spec's shared ones, to locate errors in them."""
    opdefs: dict[str, OpDef] = field(default_factory=dict)
    """The catalog op of each mapped op, for kinds whose checks need its attributes."""
    patterns: dict[str, Any] = field(default_factory=dict)
    """The composite patterns (:class:`~byoc.spec.patterns.Pattern`) by name."""
    layouts: dict[str, LayoutDef] = field(default_factory=dict)
    """c_source: the spec's ``layouts:`` by name."""


def check_template(
    doc: YamlDoc,
    node: Any,
    key: Any,
    what: str,
    names: Iterable[str],
    *,
    dims: bool = False,
    accept: Callable[[str], bool] | None = None,
    more: str = "",
) -> tuple[Placeholder, ...]:
    """Check the placeholders of the template ``node[key]`` against ``names``, and
    ``${dim<k>}`` when ``dims``, and any name ``accept`` takes (its kinds are listed in
    the hint by ``more``)."""
    return check_template_text(
        node[key],
        lambda offset, message, hint: doc.error_at(message, doc.at_offset(node, key, offset), hint=hint),
        what,
        names,
        dims=dims,
        accept=accept,
        more=more,
    )


def check_template_text(
    text: str,
    error: Callable[[int, str, str | None], SpecError],
    what: str,
    names: Iterable[str],
    *,
    dims: bool = False,
    accept: Callable[[str], bool] | None = None,
    more: str = "",
) -> tuple[Placeholder, ...]:
    """:func:`check_template` of a template's ``text``, wherever it was read from:
    ``error(offset, message, hint)`` makes the SpecError located at character
    ``offset`` of the text."""
    allowed = set(names)
    try:
        found = tuple(placeholders(text))
    except TemplateSyntaxError as exc:
        raise error(exc.offset, f"{what}: {exc.message}", exc.hint) from None
    for p in found:
        if p.name in allowed or (dims and DIM_PLACEHOLDER.match(p.name)):
            continue
        if accept is None or not accept(p.name):
            shown = ", ".join("${" + n + "}" for n in sorted(allowed)) or "none"
            raise error(
                p.offset,
                f"undefined placeholder ${{{p.name}}} in {what}",
                f"defined here: {shown}" + (", ${dim0}, ${dim1}, ..." if dims else "") + more,
            )
    return found


def c_name(doc: YamlDoc, node, name, what: str) -> str:
    """``name``, a key of ``node``, as a C identifier that C does not reserve."""
    doc.identifier(node, name, name, what, at_value=False)
    if RESERVED_C_NAME.match(name):
        raise doc.error(
            f"{what} {name!r} is a reserved C identifier", node, name, hint="start it with a letter"
        )
    return str(name)


def known(noun: str, names: Iterable[str]) -> str:
    listed = list(names)
    return f"{noun}: {', '.join(listed)}" if listed else f"no {noun} are defined"
