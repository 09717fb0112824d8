"""Codegen kinds: one CodegenKind class each, one registry for the spec loader and
the generator dispatch, and a new kind as a small subclass."""

from __future__ import annotations

import pickle

import pytest
from compile_util import module_artifact

from byoc.api import load_catalog, parse
from byoc.errors import SpecError
from byoc.generator import generator_for
from byoc.generator.lowering import lower
from byoc.spec import KINDS, SHIPPED_BACKENDS, CodegenKind, backend_loader, load_backend, load_backend_file
from byoc.spec.bindings import (
    ExpressionBinding,
    KernelBinding,
    LayerBinding,
    MacroBinding,
    TokenBinding,
)
from byoc.spec.codegen_kind import Slot
from byoc.spec.kind_c_fused import CallBinding, MovementBinding, ReductionBinding
from byoc.spec.kind_c_source import CSourceKind
from byoc.spec.kinds import KIND_CLASSES

BINDINGS = {
    "ccompiler": MacroBinding,
    "engine": LayerBinding,
    "fused": (ExpressionBinding, ReductionBinding, MovementBinding, CallBinding),
    "examplejson": TokenBinding,
    "json": KernelBinding,
}


def test_one_registry_of_classes():
    assert list(KINDS) == [cls.name for cls in KIND_CLASSES]
    assert list(KINDS) == ["c_source", "c_fused", "engine", "examplejson", "json"]
    for name, kind in KINDS.items():
        assert type(kind) in KIND_CLASSES and isinstance(kind, CodegenKind)
        assert kind.name == name == str(kind)
        assert callable(generator_for(kind))
        assert pickle.loads(pickle.dumps(kind)) == kind
    assert KINDS["json"] != KINDS["examplejson"] and KINDS["json"] != "json"


@pytest.mark.parametrize("backend", list(BINDINGS))
def test_each_kind_loads_its_own_bindings(backend):
    spec = load_backend(backend)
    assert spec.kind is KINDS[spec.kind.name]
    expected = BINDINGS[backend]
    assert {type(b) for b in spec.ops.values()} == set(
        expected if isinstance(expected, tuple) else (expected,)
    )
    assert spec.kind.compiled == spec.compile.compiled
    assert (spec.kind.name_table is not None) == (not spec.kind.compiled)
    assert all(b.describe() for b in spec.ops.values())


class LibraryKind(CSourceKind):
    """What a later library kind could start as: c_source plus an init template."""

    __slots__ = ()
    name = "c_library"
    templates = (*CSourceKind.templates, Slot("init", "C run once before the first call", ("symbol_prefix",)))


def _library_spec(tmp_path, init: str):
    text = (SHIPPED_BACKENDS / "ccompiler.yaml").read_text()
    text = text.replace("kind: c_source ", "kind: c_library").replace("\nops:", f"\ninit: '{init}'\nops:", 1)
    path = tmp_path / "ccompiler.yaml"
    path.write_text(text)
    return path


def test_a_new_kind_is_a_small_subclass(tmp_path, monkeypatch):
    path = _library_spec(tmp_path, "/* init ${symbol_prefix} */")
    with pytest.raises(SpecError, match="unknown codegen kind 'c_library'"):
        load_backend_file(path)
    monkeypatch.setattr(backend_loader, "KINDS", {**KINDS, "c_library": LibraryKind()})
    spec = load_backend_file(path)
    assert isinstance(spec.kind, LibraryKind) and spec.kind.generator == "c_source.generate"
    assert spec.templates["init"] == "/* init ${symbol_prefix} */"
    program = parse(
        "graph g(x: float32[4]) {\n  y = @ccompiler { return add(x, x) }\n  return y\n}\n", "graph"
    )
    externals = lower(program, lambda _: spec, load_catalog()).externals
    artifact = module_artifact(
        generator_for(spec.kind)(externals, spec, load_catalog(), spec.option_values())
    )
    assert "__tvm_ffi_" in artifact.text

    bad = _library_spec(tmp_path, "${nope}")
    with pytest.raises(SpecError, match=r"undefined placeholder \$\{nope\} in init"):
        load_backend_file(bad)
