"""A stand-in vendor SDK for tests of ``requires:`` (tests/test_requirements_spec_dirs.py,
tests/test_requirement_environment.py): a header and a shared library built by the
test, and a one-op backend spec whose ``exp`` kernel calls the library."""

from __future__ import annotations

import subprocess
from pathlib import Path

from byoc.spec.requirements import library_file

STANDIN_H = (
    "#include <stdint.h>\nvoid NAME_exp(const float* x, float* out, int64_t n);\nextern int64_t NAME_calls;\n"
)
STANDIN_C = """\
#include <math.h>
#include "NAME.h"
int64_t NAME_calls = 0;
void NAME_exp(const float* x, float* out, int64_t n) {
  ++NAME_calls;
  for (int64_t k = 0; k < n; ++k) out[k] = expf(x[k]);
}
"""
STANDIN_SPEC = """\
version: 1
name: NAME
kind: c_source
description: exp through a vendor SDK's library (a stand-in built by the test).
dtypes: [float32]
ranks: [1, 2, 3, 4]
requires:
  sdk:
    headers: [NAME.h]
    libraries: [NAME]
    install: build the stand-in SDK into sdk/
    from: {dirs: {include: [INCLUDE], lib: [LIB]}}
ENVIRONMENT
compile: {compiler: cc, language: c, std: c99, flags: [-O2, -Wall, -Wextra, -Werror]}
prelude: |
  #include <stdint.h>
  #include <NAME.h>
macros:
  STANDIN_EXP:
    inputs: 1
    params: {p_ID_: "${symbol}", p_N_: "${size}"}
    body: |
      static void p_ID_(const float* x, float* out) { NAME_exp(x, out, p_N_); }
ops:
  exp: {macros: {default: STANDIN_EXP}}
"""
STANDIN_LINE = 12
"""The line of ``from:`` in STANDIN_SPEC."""


def standin_sdk(root: Path, name: str, source: str = STANDIN_C) -> Path:
    """``root/sdk``: include/NAME.h and lib/libNAME.so, a stand-in vendor library (by
    default one that counts its calls; ``source``, its C with NAME for ``name``), one
    name per test: a process reuses a loaded library of the same file name, and its
    symbols."""
    sdk = root / "sdk"
    (sdk / "include").mkdir(parents=True)
    (sdk / "lib").mkdir()
    (sdk / "include" / f"{name}.h").write_text(STANDIN_H.replace("NAME", name))
    (sdk / f"{name}.c").write_text(source.replace("NAME", name))
    out = subprocess.run(
        [
            "cc",
            "-shared",
            "-fPIC",
            "-O2",
            f"-I{sdk / 'include'}",
            "-o",
            str(sdk / "lib" / library_file(name)),
            str(sdk / f"{name}.c"),
            "-lm",
        ],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    return sdk


def standin_spec(directory: Path, name: str, include: str, lib: str, environment: str = "") -> Path:
    """``directory/NAME.yaml``, the stand-in's spec; ``environment``: its requirement's
    ``environment:`` mapping, as YAML flow text (none when empty)."""
    directory.mkdir(parents=True)
    path = directory / f"{name}.yaml"
    extra = f"    environment: {environment}\n" if environment else ""
    text = STANDIN_SPEC.replace("ENVIRONMENT\n", extra).replace("NAME", name)
    path.write_text(text.replace("INCLUDE", f'"{include}"').replace("LIB", f'"{lib}"'))
    return path
