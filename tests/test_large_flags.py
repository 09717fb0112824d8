"""A spec's ``large_flags``: flags added for a large module's source only (the ``fused``
spec's ``-flto=auto``, so that gcc compiles a large module's functions on every core):
where they apply, that a module built with them computes bit for bit what one built
without them does, and the located errors of a malformed entry."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import random_array

from byoc.api import load_backend, parse
from byoc.building import build
from byoc.errors import SpecError
from byoc.runtime import toolchain as runtime_build
from byoc.spec import load_backend_file

SHIPPED = Path(__file__).resolve().parents[1] / "spec" / "backends" / "fused" / "fused.yaml"

GRAPH = """graph main(x: float32[1, 8, 12, 12], w: float32[8, 8, 3, 3], b: float32[8]) {
  r = @fused { return tanh(relu(bias_add(conv(x, w, pads=[1, 1, 1, 1]), b))) }
  return r
}
"""


def portable(spec):
    return spec.template_values(spec.option_values({"host_isa": "false"}))


def test_the_flags_are_added_above_the_size_only():
    spec = load_backend("fused")
    lto = ("-flto=auto", "--param=lto-min-partition=500")
    assert spec.compile.large_flags == lto and spec.compile.large_above == 262144
    small = runtime_build.spec_toolchain(spec.compile, portable(spec), source_bytes=262144)
    large = runtime_build.spec_toolchain(spec.compile, portable(spec), source_bytes=262145)
    assert "-flto=auto" not in small.flags and large.flags == (*small.flags, *lto)


def lto_always(tmp_path: Path) -> Path:
    """A copy of the shipped fused spec (and the files beside it) whose large_flags apply
    to every module."""
    folder = tmp_path / "specs"
    folder.mkdir()
    for f in SHIPPED.parent.iterdir():
        if f.is_file():
            (folder / f.name).write_bytes(f.read_bytes())
    text = SHIPPED.read_text().replace("above_bytes: 262144", "above_bytes: 0")
    assert "above_bytes: 0" in text
    (folder / "fused.yaml").write_text(text)
    return folder


def test_a_module_built_with_the_large_flags_computes_what_one_without_them_does(tmp_path, rng):
    program = parse(GRAPH)
    inputs = {p.name: random_array(rng, p.type.shape, p.type.dtype) for p in program.functions[0].params}
    options = {"fused.host_isa": "false"}
    plain = build(program, options=options)
    spec_path = [str(lto_always(tmp_path))]
    assert load_backend("fused", spec_path=spec_path).compile.large_above == 0
    lto = build(parse(GRAPH), options=options, spec_path=spec_path)
    (want,), (got,) = plain(**inputs), lto(**inputs)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("large_flags: {above_bytes: -1, flags: [-flto=auto]}", "above_bytes must be a size in bytes"),
        ("large_flags: {above_bytes: 10}", "missing the required key 'flags'"),
        ("large_flags: {above_bytes: 10, flags: [-flto], when: x}", "unknown key 'when'"),
        ("large_flags: {above_bytes: ten, flags: [-flto]}", "above_bytes must be an integer"),
    ],
)
def test_a_malformed_entry_is_a_located_error(tmp_path, entry, message):
    text = SHIPPED.read_text()
    start = text.index("  large_flags:\n")
    flags = "flags: [-flto=auto, --param=lto-min-partition=500]\n"
    end = text.index(flags, start) + len(flags)
    edited = text[:start] + f"  {entry}\n" + text[end:]
    for f in SHIPPED.parent.iterdir():
        if f.is_file() and f.name != "fused.yaml":
            (tmp_path / f.name).write_bytes(f.read_bytes())
    path = tmp_path / "fused.yaml"
    path.write_text(edited)
    with pytest.raises(SpecError) as info:
        load_backend_file(path)
    assert message in info.value.message
    row = edited[: edited.index(entry)].count("\n") + 1
    assert info.value.location.file == str(path) and info.value.location.line == row
