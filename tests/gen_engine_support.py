"""Shared helpers of the engine codegen tests (test_gen_engine*.py): a golden graph
offloaded to @engine, generating its module and header, compiling and loading them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import tvm_ffi
from compile_util import compile_library
from conftest import DATA

from byoc.api import load_backend, parse
from byoc.generator import generator_for
from byoc.generator.artifacts import Artifact
from byoc.generator.lowering import lower
from byoc.ir import Function, Program, is_integer
from byoc.spec import KINDS
from byoc.spec.backend import BackendSpec

GEN = DATA / "gen"

Loader = Callable[[str], BackendSpec]


def graph_program(name: str) -> Program:
    """tests/data/gen/<name>.graph with its regions offloaded to @engine."""
    text = (GEN / f"{name}.graph").read_text().replace("@BACKEND", "@engine")
    return parse(text, "graph", file=f"tests/data/gen/{name}.graph")


def shipped(name: str) -> BackendSpec:
    return load_backend(name)


def generate(program: Program, catalog, loader: Loader = shipped, options=None):
    """(externals, (module, header)) of the program's engine regions."""
    lowered = lower(program, loader, catalog)
    externals = lowered.externals_for("engine")
    artifacts = generator_for(KINDS["engine"])(externals, loader("engine"), catalog, options or {})
    return externals, artifacts


def split(artifacts: tuple[Artifact, ...]) -> tuple[Artifact, Artifact]:
    """The module and the engine's header; the rest must be byoc's support files (.cc)."""
    module, header, *support = artifacts
    assert (module.role, header.role) == ("module", "header")
    assert [a.name for a in support] == ["byoc_module.h", "byoc_entry.cc"], support
    return module, header


def build(artifacts: tuple[Artifact, ...], out_dir: Path):
    module, _ = split(artifacts)
    lib = compile_library({a.name: a.text for a in artifacts}, module.name, out_dir, cplusplus=True)
    return tvm_ffi.load_module(str(lib))


def empty_outputs(fn: Function) -> list[np.ndarray]:
    """Output arrays that are wrong until written (NaN for floats)."""
    outs = []
    for t in fn.output_types:
        fill = np.nan if not is_integer(t.dtype) else 0
        outs.append(np.full(t.shape, fill, dtype=t.dtype))
    return outs
