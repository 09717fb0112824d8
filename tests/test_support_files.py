"""byoc's own support C (generator/c/support/): what every generated module includes
and links. Each file compiles on its own as C99 and as C++17 without a warning, the
header declares exactly the names the generators reserve, and the objects of two
modules linked into one library (TVM's export_library) keep one copy instead of clashing."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
import tvm_ffi.libinfo
from compile_util import WARNINGS

from byoc.generator.c import support_files

SOURCES = [f"{stem}.c" for stem in support_files.STEMS]


def compiler(name: str) -> str:
    if shutil.which(name) is None:
        pytest.skip(f"no compiler {name!r}")
    return name


@pytest.mark.parametrize("language", ["c99", "c++17"])
@pytest.mark.parametrize("source", SOURCES)
def test_each_file_compiles_alone_without_a_warning(source, language, tmp_path):
    for name in (support_files.HEADER, source):
        (tmp_path / name).write_text(support_files.text(name))
    cc = compiler("c++") if language == "c++17" else compiler("cc")
    as_language = ["-x", "c++"] if language == "c++17" else []
    cmd = [cc, f"-std={language}", *WARNINGS, "-O2", "-fPIC", f"-I{tvm_ffi.libinfo.find_include_path()}"]
    cmd += [*as_language, "-c", str(tmp_path / source), "-o", str(tmp_path / "out.o")]
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_the_reserved_names_are_what_the_header_declares():
    header = support_files.text(support_files.HEADER)
    code = re.sub(r"/\*.*?\*/", "", header, flags=re.S)  # declarations, not the prose
    declared = set(re.findall(r"#define (\w+)", code))
    declared |= set(re.findall(r"\b(byoc_\w+)\s*(?:\(|\[)", code))
    declared |= set(re.findall(r"\(\*(byoc_\w+)\)", code))  # the function pointer type
    assert declared == set(support_files.NAMES)


def test_every_file_a_module_may_link_is_named_and_shipped():
    assert {a.name for a in support_files.artifacts("b", support_files.STEMS)} == {
        support_files.HEADER,
        *SOURCES,
    }
    assert [a.name for a in support_files.artifacts("b", cplusplus=True)] == [
        "byoc_module.h",
        "byoc_entry.cc",
    ]
    assert {a.name for a in support_files.artifacts("b", support_files.STEMS)} <= support_files.FILE_NAMES


def test_two_modules_objects_link_into_one_library(tmp_path):
    """TVM's export_library links the object of every backend's module, each holding
    byoc's support code, into one library: the weak definitions keep one copy."""
    cc = compiler("cc")
    include = tvm_ffi.libinfo.find_include_path()
    libdir = tvm_ffi.libinfo.find_libtvm_ffi().rsplit("/", 1)[0]
    for name in (support_files.HEADER, *SOURCES):
        (tmp_path / name).write_text(support_files.text(name))
    objects = []
    for k in range(2):  # each module's translation unit with every support file, as byoc.tvm makes it
        unit = tmp_path / f"module{k}.c"
        posix = ["#define _POSIX_C_SOURCE 200112L"]  # before any header, as byoc.tvm's unit has it
        lines = [*posix, *(f'#include "{name}"' for name in SOURCES)]
        unit.write_text(
            "\n".join(lines)
            + f"\nint module{k}_answer(void);\nint module{k}_answer(void) {{ return {k}; }}\n"
        )
        obj = tmp_path / f"module{k}.o"
        done = subprocess.run(
            [cc, "-std=c99", *WARNINGS, "-fPIC", f"-I{include}", "-c", str(unit), "-o", str(obj)],
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr
        objects.append(str(obj))
    library = tmp_path / "libboth.so"
    done = subprocess.run(
        [cc, "-shared", "-o", str(library), *objects, f"-L{libdir}", "-ltvm_ffi", "-lpthread"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    exported = subprocess.run(["nm", "-D", "--defined-only", str(library)], capture_output=True, text=True)
    if exported.returncode == 0:  # hidden: the library exports none of byoc's support names
        assert "byoc_" not in exported.stdout.replace("module0_answer", "").replace("module1_answer", "")
