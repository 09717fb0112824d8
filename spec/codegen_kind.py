"""The base of every codegen kind.

A *codegen kind* is one code generator of byoc (``c_source``, ``c_fused``,
``engine``, ``examplejson``, ``json``). A backend spec picks a kind and fills in its
slots with data: op mappings, C macros, C expressions, engine layers and code
templates. Each kind is one subclass of :class:`CodegenKind`. Its class attributes
say what a spec of the kind may and must contain, which placeholders each template
may use and what the generated code can do; its methods load and validate the
kind's part of a spec, ending with one typed binding per op
(:mod:`byoc.spec.bindings`). :mod:`byoc.spec.kinds` registers the kinds, by name,
for the spec loader and for the generator dispatch
(:func:`byoc.generator.generator_for` imports the module :attr:`generator` names).

The base class holds the loading that every kind shares: the templates and the loop
over the spec's ``ops``, with each op's conditions (``when:``,
:mod:`byoc.spec.conditions`), which every kind's mapping may carry. A kind overrides
attributes, and the hooks
:meth:`load_structure` (its constructs), :meth:`load_binding` (one op) and
:meth:`check_spec` (checks that need every op).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar

from byoc.catalog import Catalog, OpDef
from byoc.errors import Location, SpecError, close_names
from byoc.ir import DTYPES

from .bindings import OpBinding
from .conditions import WHEN_KEY, Scope, load_conditions
from .draft import SpecDraft, check_template, check_template_text, known
from .languages import LANGUAGES
from .names import COMMON_PLACEHOLDERS
from .support import file_beside

if TYPE_CHECKING:
    from .yaml_doc import YamlDoc


@dataclass(frozen=True, slots=True)
class Slot:
    """A code template that a backend of some kind provides, at a top-level key."""

    key: str
    doc: str
    placeholders: tuple[str, ...]
    """Placeholders the generator supplies here, besides the common ones and options."""
    required: bool = False


class CodegenKind:
    """One codegen kind: the contract between its backend specs and its generator.

    Kinds hold no state; two instances of one kind class are equal.
    """

    __slots__ = ()

    name: ClassVar[str]
    """What a spec's ``kind:`` says."""
    doc: ClassVar[str]
    language: ClassVar[str]
    """A key of :data:`~byoc.spec.languages.LANGUAGES`: what the artifact is written in."""
    generator: ClassVar[str]
    """The module of ``byoc.generator`` that implements the kind, dotted below it
    (``c_source.generate``; imported lazily)."""
    dtypes: ClassVar[tuple[str, ...]] = DTYPES
    """The dtypes this kind can generate code for; a spec declares a subset."""
    single_dtype: ClassVar[bool] = False
    """True when one backend of this kind handles exactly one dtype."""
    templates: ClassVar[tuple[Slot, ...]] = ()
    structure_required: ClassVar[tuple[str, ...]] = ()
    """Top-level keys of the kind's constructs (``macros``, ...) that a spec must have."""
    structure_optional: ClassVar[tuple[str, ...]] = ()
    op_required: ClassVar[tuple[str, ...]] = ()
    """The keys each entry of ``ops`` must have, and may have."""
    op_optional: ClassVar[tuple[str, ...]] = ()
    """Besides these, every op's mapping may have ``when`` (:mod:`byoc.spec.conditions`)."""
    shape_rules: ClassVar[tuple[str, ...] | None] = None
    """The catalog shape rules this kind can implement; None means any."""
    attrs: ClassVar[bool] = True
    """Whether ops with attributes can be mapped."""
    options: ClassVar[Mapping[str, str]] = MappingProxyType({})
    """Options the kind's generator honours when a spec declares them: name -> value type."""
    can_broadcast: ClassVar[bool] = False
    """Whether the kind's code can broadcast inputs to the output shape (numpy's rule),
    so that a spec of the kind may declare ``broadcast: true``."""
    max_outputs: ClassVar[int | None] = None
    """The most outputs one generated function can have; None means any."""
    constants: ClassVar[bool] = True
    """Whether a generated function can embed constants."""
    name_table: ClassVar[str | None] = None
    """For an interpreted kind: the key (``tokens``, ``kernels``) under which a build's
    manifest gives the runtime the op names of :meth:`BackendSpec.op_names`."""
    pattern_required: ClassVar[tuple[str, ...]] = ()
    """The keys that say what implements a composite pattern (``patterns:``, see
    :mod:`byoc.spec.patterns`); empty when the kind takes no patterns."""
    pattern_optional: ClassVar[tuple[str, ...]] = ()
    reserved_more: ClassVar[str] = ""
    """How the hint on reserved names ends, for names :meth:`reserves` matches by pattern."""
    support_files: ClassVar[bool] = False
    """Whether a spec may list C files beside it (``support:``, :mod:`byoc.spec.support`)."""

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"<codegen kind {self.name}>"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CodegenKind):
            return NotImplemented
        return type(other) is type(self)

    def __hash__(self) -> int:
        return hash(type(self))

    def __reduce__(self) -> tuple:
        """A kind pickles as its name and loads as the registry's own instance, as a spec
        validated from its file holds it (:mod:`byoc.spec.validated_cache`)."""
        from .kinds import kind_named

        return kind_named, (self.name,)

    @property
    def compiled(self) -> bool:
        return LANGUAGES[self.language].compiled

    def top_keys(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The kind-specific top-level keys: (required, optional)."""
        required = [s.key for s in self.templates if s.required]
        optional = [s.key for s in self.templates if not s.required]
        patterns = ("patterns",) if self.pattern_required else ()
        return self.structure_required + tuple(required), self.structure_optional + tuple(optional) + patterns

    def placeholders(self) -> set[str]:
        """Names the generator supplies, so options and vars may not take them."""
        names = set(COMMON_PLACEHOLDERS)
        for slot in self.templates:
            names |= set(slot.placeholders)
        return names

    def reserves(self, name: str) -> bool:
        """Whether an option may not be called ``name``: a placeholder has it."""
        return name in self.placeholders()

    # ------------------------------------------------------------------ loading

    def load_structure(self, doc: YamlDoc, root: Any, draft: SpecDraft) -> None:
        """Check the kind's templates and constructs into ``draft``; ops come later."""
        names = set(COMMON_PLACEHOLDERS) | set(draft.options)
        for slot in self.templates:
            if slot.key in root and isinstance(root[slot.key], dict):
                if "file" not in root[slot.key]:
                    raise doc.error(
                        f"{slot.key} must be a string, or a template read from a file; got a mapping without `file`",
                        root,
                        slot.key,
                        value=True,
                        hint=f"write the template here (`{slot.key}: |`), or `{slot.key}: {{file: NAME}}` "
                        "for the file NAME beside the spec",
                    )
                draft.templates[slot.key] = template_file(doc, root, slot.key, names | set(slot.placeholders))
            elif slot.key in root:
                doc.typed(root, slot.key, str, slot.key)
                check_template(doc, root, slot.key, slot.key, names | set(slot.placeholders))
                draft.templates[slot.key] = str(root[slot.key])
                line = doc.block_line(root, slot.key)
                if line is not None:
                    draft.template_lines[slot.key] = line
            else:
                draft.templates[slot.key] = ""

    def load_ops(self, doc: YamlDoc, root: Any, catalog: Catalog, draft: SpecDraft) -> None:
        """Check ``ops``, each a catalog op this kind can implement, into ``draft.ops``."""
        node = doc.mapping(root, "ops", "ops")
        if not node:
            raise doc.error("ops must map at least one catalog op", root, "ops", value=True)
        for op in node:
            if op not in catalog:
                close = close_names(str(op), catalog)
                raise doc.error(
                    f"unknown op {op!r}: it is not in the op catalog",
                    node,
                    op,
                    hint=(f"did you mean {' or '.join(close)}? " if close else "")
                    + known("catalog ops", catalog),
                )
            opdef = catalog[op]
            if self.shape_rules is not None and opdef.shape_rule not in self.shape_rules:
                raise doc.error(
                    f"the {self.name} kind cannot implement {op} (shape rule {opdef.shape_rule})",
                    node,
                    op,
                    hint=f"{self.name} implements {', '.join(self.shape_rules)} ops",
                )
            if not self.attrs and opdef.attrs:
                raise doc.error(f"the {self.name} kind cannot carry the attributes of {op}", node, op)
            what = f"op {op}"
            onode = doc.mapping(node, op, what)
            doc.check_keys(onode, what, self.op_required, (*self.op_optional, WHEN_KEY))
            binding = self.load_binding(doc, node, op, opdef, draft)
            if WHEN_KEY in onode:
                binding = replace(binding, when=load_conditions(doc, onode, what, Scope.of_op(opdef)))
            draft.ops[op] = binding

    def load_binding(self, doc: YamlDoc, node: Any, op: str, opdef: OpDef, draft: SpecDraft) -> OpBinding:
        """The binding of ``op``, whose mapping is ``node[op]`` (its keys are checked;
        ``when``, if there, is the base class's)."""
        raise NotImplementedError

    def load_pattern_binding(
        self, doc: YamlDoc, node: Any, name: str, inputs: int, draft: SpecDraft
    ) -> OpBinding:
        """What implements pattern ``name`` (``node[name]``, of ``inputs`` inputs), for a
        kind with :attr:`pattern_required`."""
        raise NotImplementedError

    def check_spec(self, doc: YamlDoc, draft: SpecDraft) -> None:
        """Checks that need every op of the spec; none by default."""


def template_file(doc: YamlDoc, root: Any, key: str, names: set[str]) -> str:
    """The text of a template written as ``{file: NAME}``: the file NAME beside the spec
    (a template too long to read in YAML), its placeholders checked with errors located
    in that file."""
    text, path = file_beside(doc, root, key, key)
    name = Path(path).name

    def error(offset: int, message: str, hint: str | None) -> SpecError:
        line = text.count("\n", 0, offset) + 1
        column = offset - (text.rfind("\n", 0, offset) + 1) + 1
        return SpecError(message, Location(path, line, column), hint=hint, source=text)

    check_template_text(text, error, f"{key} ({name})", names)
    return text
