"""The kinds whose artifact is data that byoc.runtime interprets, naming each op by a
name from the spec: ExampleJSON tokens (``examplejson``) and JSON kernel names (``json``)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar

from byoc.catalog import OpDef

from .bindings import KernelBinding, NamedBinding, TokenBinding
from .codegen_kind import CodegenKind
from .draft import SpecDraft

if TYPE_CHECKING:
    from .yaml_doc import YamlDoc


class NamedOpsKind(CodegenKind):
    """Each op maps to a name (at the op's key :attr:`name_key`), unique within the spec."""

    __slots__ = ()
    name_key: ClassVar[str]
    name_pattern: ClassVar[re.Pattern[str]]
    reserved_names: ClassVar[tuple[str, ...]] = ()
    name_hint: ClassVar[str]
    """What a valid name looks like, for the hint of an invalid one."""
    binding: ClassVar[type[NamedBinding]]
    options: Mapping[str, str] = MappingProxyType({"indent": "int"})
    can_broadcast = True

    def load_binding(self, doc: YamlDoc, node: Any, op: str, opdef: OpDef, draft: SpecDraft) -> NamedBinding:
        what, onode, key = f"op {op}", node[op], self.name_key
        value = doc.typed(onode, key, str, f"{what}: {key}")
        if not self.name_pattern.match(value) or value in self.reserved_names:
            raise doc.error(
                f"{what}: {key} {value!r} is not valid", onode, key, value=True, hint=f"use {self.name_hint}"
            )
        other = next(
            (b.op for b in draft.ops.values() if isinstance(b, NamedBinding) and b.name == value), None
        )
        if other is not None:
            raise doc.error(
                f"duplicate {key} {value!r}: op {other} already uses it",
                onode,
                key,
                value=True,
                hint=f"each op needs its own {key}",
            )
        return self.binding(op, str(value), loc=doc.at(node, op))


class ExampleJsonKind(NamedOpsKind):
    __slots__ = ()
    name = "examplejson"
    doc = "ExampleJSON text (the BYOC guide's subgraph format), interpreted by byoc.runtime"
    language = "examplejson"
    generator = "examplejson"
    dtypes = ("float32",)
    op_required = ("token",)
    attrs = False
    max_outputs = 1
    constants = False
    name_table = "tokens"
    name_key = "token"
    name_pattern = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
    reserved_names = ("input",)
    """ExampleJSON keywords that cannot be op tokens."""
    name_hint = "an identifier other than `input`"
    binding = TokenBinding


class JsonKind(NamedOpsKind):
    __slots__ = ()
    name = "json"
    doc = "a JSON graph in TVM's JSON-runtime schema, interpreted by byoc.runtime"
    language = "json"
    generator = "json_codegen"
    op_required = ("kernel",)
    name_table = "kernels"
    name_key = "kernel"
    name_pattern = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*\Z")
    name_hint = "dotted identifiers such as nn.relu"
    binding = KernelBinding
