"""Injection safety: names and paths from graphs never change the structure of the
generated C and C++.

Graphs (and the paths of their files) are untrusted. Value names only ever reach
the generated code inside comments (``c.text.comment``) and string literals
(``c.text.c_string``); region names become C symbols only after
``lowering.symbol_problem`` accepted them. The oracle is the compiler itself: the
preprocessed code (every comment removed, every trigraph and line splice applied)
of a hostile graph equals that of a benign one once string literals are blanked,
and the compiled libraries export exactly the same symbols (``nm -D``).
"""

from __future__ import annotations

import random
import re
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import tvm_ffi.libinfo

import byoc
import byoc.spec
from byoc.api import evaluate, parse, parse_file
from byoc.building import build
from byoc.c_names import C_KEYWORDS
from byoc.errors import GraphError
from byoc.generator.c.text import c_string, comment, comment_text
from byoc.generator.lowering import MAX_SYMBOL_LENGTH, symbol_problem
from byoc.generator.pipeline import generate
from byoc.ir import Function, Program
from byoc.spec.search import backend_files

SPECS = Path(byoc.spec.__file__).parent / "backends"
COMPILED = [b for b in ("ccompiler", "engine", "fused") if b in backend_files(SPECS)]
"""The backends whose generated code is compiled (fused, when that backend exists)."""

pytestmark = pytest.mark.skipif(
    shutil.which("gcc") is None or shutil.which("nm") is None, reason="needs gcc and nm"
)


@pytest.fixture(scope="module", autouse=True)
def no_user_flags():
    """The specs' own compiler flags: none from ``$CFLAGS`` / ``$CXXFLAGS``."""
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("CFLAGS", raising=False)
        mp.delenv("CXXFLAGS", raising=False)
        yield


CATALOG = byoc.spec.load_catalog()


# ------------------------------------------------------------------ helpers


def includes() -> list[str]:
    return [f"-I{tvm_ffi.libinfo.find_include_path()}", f"-I{tvm_ffi.libinfo.find_dlpack_include_path()}"]


def preprocess(files: dict[str, str], main: str, directory: Path, *, cplusplus: bool) -> str:
    """What the compiler sees of ``files[main]``: comments removed, trigraphs and line
    splices applied, macros expanded. Raises if it does not even preprocess cleanly."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (directory / name).write_text(text, encoding="utf-8")
    cmd = ["g++", "-std=c++17"] if cplusplus else ["gcc", "-std=c99"]
    cmd += ["-E", "-P", "-Wall", "-Werror", *includes(), f"-I{directory}", str(directory / main)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


_LITERAL = re.compile(r'"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'')


def blank_literals(code: str) -> str:
    """Preprocessed code with every string and character literal replaced by ``""``."""
    return _LITERAL.sub('""', code)


def module_sources(program: Program, backend: str) -> tuple[dict[str, str], str, bool]:
    """The backend's generated module and headers, the module's name, and whether it is C++."""
    artifacts = generate(program, CATALOG, byoc.load_backend).artifacts
    own = {a.name: a.text for a in artifacts if a.backend == backend and a.role in ("module", "header")}
    main = next(a.name for a in artifacts if a.backend == backend and a.role == "module")
    return own, main, main.endswith((".cc", ".cpp"))


def exported(library: Path) -> set[str]:
    """The library's defined dynamic symbols (``nm -D --defined-only``)."""
    proc = subprocess.run(["nm", "-D", "--defined-only", str(library)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return {line.split()[-1] for line in proc.stdout.splitlines() if line.strip()}


def library_of(model) -> Path:
    (module,) = [m for m in model.modules if getattr(m, "kind", None) == "library"]
    return module.path


def options_for(backend: str) -> dict[str, str] | None:
    return {"engine.opt_level": "0"} if backend == "engine" else None


def chain_graph(names: list[str], backend: str) -> str:
    """A graph over ``names`` (at least 5): two parameters, a constant, a chain of ops
    inside one region bound to the last name, and a host op after it."""
    a, b, k, *chain, bound = names
    lines = [f"    {k} = const float32[2, 3] [1, 2, 3, 4, 5, 6]"]
    previous = [a, b]
    for i, name in enumerate(chain):
        op = ("add", "subtract", "multiply")[i % 3]
        right = k if op == "multiply" else previous[-2]
        lines.append(f"    {name} = {op}({previous[-1]}, {right})")
        previous.append(name)
    body = "\n".join(lines)
    return (
        f"graph main({a}: float32[2, 3], {b}: float32[2, 3]) {{\n"
        f"  {bound} = @{backend} {{\n{body}\n    return {previous[-1]}\n  }}\n"
        f"  return {bound}, add({bound}, {a})\n}}\n"
    )


@pytest.fixture(scope="module")
def benign_exports() -> dict[str, set[str]]:
    """The symbols a benign chain graph's library exports, per backend (built once)."""
    return {
        b: exported(library_of(build(parse(chain_graph(BENIGN, b)), options=options_for(b))))
        for b in COMPILED
    }


def check_runs(model, program: Program) -> None:
    fn = program.functions[0]
    rng = np.random.default_rng(0)
    inputs = {p.name: rng.uniform(-2, 2, p.type.shape).astype(p.type.dtype) for p in fn.params}
    for got, want in zip(model(**inputs), evaluate(fn, inputs)):
        np.testing.assert_allclose(got, want, rtol=1e-6)


# --------------------------------------------------------- comments and literals


HOSTILE_TEXTS = [
    "x */ int evil(void) { return 1; } /*",
    "*/",
    "/* nested",
    "a *??/\n/ int evil(void) { return 1; } /*",  # ??/ is a backslash in C99: a line splice
    "a *\\\n/ int evil(void) { return 1; } /*",  # backslash-newline splices the lines
    "a *\\ \t\n/ int evil(void) { return 1; } /*",  # gcc splices over trailing blanks too
    "??= ??( ??) ??< ??> ??' ??! ??- ???/",
    "\u202e bidi override \u2066 isolate \u200f",
    "bell \a escape \x1b[31m cr \r vt \v ff \f nul \0 del \x7f",
    "\" quote ' apostrophe \\ backslash",
    "\n#define float int\n#include </etc/passwd>\n",
    "é ü 中文 🙂",
    "*" * 50 + "/" * 50,
    "\\",
    "?",
    "",
]


def _random_texts(n: int, seed: int = 8) -> list[str]:
    rng = random.Random(seed)
    alphabet = ["*", "/", "\\", "?", "?", "\n", "\r", " ", "\t", '"', "'", "#", "=", "x", "\u202e", "\0"]
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 24))) for _ in range(n)]


COMMENT_TEXTS = HOSTILE_TEXTS + _random_texts(2000)


@pytest.mark.parametrize("cplusplus", [False, True], ids=["c99", "c++17"])
def test_comments_are_inert(tmp_path, cplusplus):
    """Between markers, every comment preprocesses to nothing: no text of any kind
    can end it early (``*/``, a trigraph or a line splice), nest in it, or make the
    compiler warn (-Wcomment, -Wtrigraphs, -Wbidi-chars under -Werror)."""
    parts = [f"int m{k};\n{comment(text)}\n" for k, text in enumerate(COMMENT_TEXTS)]
    code = "".join(parts) + f"int m{len(COMMENT_TEXTS)};\n"
    out = preprocess({"c.c": code}, "c.c", tmp_path, cplusplus=cplusplus)
    assert out.split() == " ".join(f"int m{k};" for k in range(len(COMMENT_TEXTS) + 1)).split()


def test_comment_text_keeps_ordinary_text():
    for text in (
        "add at guide.graph:9:9",
        "region @ccompiler at g.graph:2:7\n  in0: x: float32[4]",
        "a * b / c",
    ):
        assert comment_text(text) == text
    assert (
        "*/" not in comment_text("*/") and "??" not in comment_text("???") and "/*" not in comment_text("/*")
    )


def test_string_literals_round_trip(tmp_path):
    """c_string escapes everything: a compiled program prints each string's exact bytes."""
    texts = HOSTILE_TEXTS[:-1] + _random_texts(300, seed=9)
    table = ",\n".join(f"  {{{c_string(t)}, {len(t.encode())}}}" for t in texts)
    code = (
        "#include <stdio.h>\n"
        "struct entry { const char* s; unsigned long n; };\n"
        f"static const struct entry table[] = {{\n{table}\n}};\n"
        "int main(void) {\n"
        "  for (unsigned long k = 0; k < sizeof table / sizeof table[0]; ++k) {\n"
        '    for (unsigned long i = 0; i < table[k].n; ++i) printf("%02x", (unsigned char)table[k].s[i]);\n'
        '    printf("\\n");\n  }\n  return 0;\n}\n'
    )
    (tmp_path / "s.c").write_text(code)
    exe = tmp_path / "s"
    compiled = subprocess.run(
        ["gcc", "-std=c99", "-Wall", "-Wextra", "-Werror", str(tmp_path / "s.c"), "-o", str(exe)],
        capture_output=True,
        text=True,
    )
    assert compiled.returncode == 0, compiled.stderr
    printed = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.splitlines()
    assert printed == [t.encode().hex() for t in texts]


# ------------------------------------------------------------- hostile value names

NAME_SETS = {
    "c-keywords": ["int", "void", "char", "while", "sizeof", "static", "main", "malloc", "free"],
    "reserved": [
        "__x",
        "_X",
        "__tvm_ffi_main",
        "byoc_raise",
        "TVMFFIAny",
        "DLTensor",
        "_Bool",
        "errno",
        "NULL",
    ],
    "generated-identifiers": ["in0", "out0", "buf0", "t", "args", "msg", "result", "self", "num_args"],
    "long": [c * 128 for c in "abcdefghi"],
}
BENIGN = [f"n{k}" for k in range(9)]


@pytest.mark.parametrize("backend", COMPILED)
@pytest.mark.parametrize("names", NAME_SETS, ids=list(NAME_SETS))
def test_value_names_never_reach_c_identifiers(backend, names, tmp_path, benign_exports):
    """Value names that are C keywords, reserved identifiers, the generated code's own
    identifiers or 128 characters long: the code the compiler sees equals the benign
    graph's but for string literals, and it compiles, exports the same symbols and runs."""
    hostile = parse(chain_graph(NAME_SETS[names], backend))
    benign = parse(chain_graph(BENIGN, backend))
    files, main, cplusplus = module_sources(hostile, backend)
    files0, main0, _ = module_sources(benign, backend)
    seen = blank_literals(preprocess(files, main, tmp_path / "hostile", cplusplus=cplusplus))
    seen0 = blank_literals(preprocess(files0, main0, tmp_path / "benign", cplusplus=cplusplus))
    assert seen == seen0
    model = build(hostile, options=options_for(backend))
    assert exported(library_of(model)) == benign_exports[backend]
    check_runs(model, hostile)


def _rename(fn: Function, new: dict[str, str]) -> Function:
    """``fn`` with every value name mapped through ``new`` (IR built by code can hold any string)."""

    def r(name: str) -> str:
        return new.get(name, name)

    nodes = []
    for node in fn.nodes:
        callee = _rename(node.callee, new) if node.callee is not None else None
        nodes.append(
            replace(
                node, outputs=tuple(map(r, node.outputs)), inputs=tuple(map(r, node.inputs)), callee=callee
            )
        )
    return replace(
        fn,
        params=tuple(replace(p, name=r(p.name)) for p in fn.params),
        constants=tuple(replace(c, name=r(c.name)) for c in fn.constants),
        nodes=tuple(nodes),
        outputs=tuple(map(r, fn.outputs)),
    )


API_NAMES = [
    "x */ int evil(void) { return 1; } /*",
    "y *??/\n/ int evil2(void) { return 2; } /*",
    "z *\\\n/ int evil3(void) { return 3; } /*",
    'q"; int evil4; static const char* s = "',
    "\u202e\n#define float int\n",
]


@pytest.mark.parametrize("backend", COMPILED)
def test_api_built_ir_with_punctuation_in_names(backend, tmp_path):
    """IR built by code may name values anything, including C that would close a
    comment or a string: it only ever lands in comments and string literals."""
    text = (
        "graph main(a: float32[2, 3], b: float32[2, 3]) {\n"
        f"  s = @{backend} {{\n    c = add(a, b)\n    d = subtract(c, a)\n    return multiply(d, c)\n  }}\n"
        "  return s\n}\n"
    )
    benign = parse(text)
    fn = benign.functions[0]
    hostile = Program((_rename(fn, dict(zip(["a", "b", "c", "d", "s"], API_NAMES))),))
    files, main, cplusplus = module_sources(hostile, backend)
    files0, main0, _ = module_sources(benign, backend)
    seen = blank_literals(preprocess(files, main, tmp_path / "hostile", cplusplus=cplusplus))
    assert seen == blank_literals(preprocess(files0, main0, tmp_path / "benign", cplusplus=cplusplus))
    model = build(hostile, options=options_for(backend))
    assert not {s for s in exported(library_of(model)) if "evil" in s}
    assert exported(library_of(model)) == exported(library_of(build(benign, options=options_for(backend))))
    check_runs(model, hostile)


# ------------------------------------------------------------- hostile file paths

HOSTILE_PATHS = {
    "closes-comment": ["x*", " int evil(void) { return 1; } ", "*"],
    "trigraph-splice": ["x*??", "\n", " int evil(void) { return 1; } ", "*"],
    "backslash-splice": ["x*\\", "\n", " int evil(void) { return 1; } ", "*"],
    "backslash-blank-splice": ["x*\\ ", "\n", " int evil(void) { return 1; } ", "*"],
    "newline-directive": ["n\n#define float int\n#include <nonexistent.h>\n"],
    "bidi-and-control": ["\u202e\u2066 \x1b[31m \r \x7f"],
    "quotes": ['q"', "'", "\\x41"],
}


@pytest.mark.parametrize("backend", COMPILED)
@pytest.mark.parametrize("path", HOSTILE_PATHS, ids=list(HOSTILE_PATHS))
def test_file_paths_in_locations_are_inert(backend, path, tmp_path, benign_exports):
    """A graph's path appears in the location comments of the generated code; a path
    built to close those comments (directly, by a trigraph or by a line splice) or to
    inject directives changes nothing the compiler sees or exports."""
    text = chain_graph(BENIGN, backend)
    benign_file = tmp_path / "benign" / "g.graph"
    benign_file.parent.mkdir()
    benign_file.write_text(text)
    hostile_dir = tmp_path.joinpath(*HOSTILE_PATHS[path])
    hostile_dir.mkdir(parents=True)
    (hostile_dir / "g.graph").write_text(text)
    hostile = parse_file(hostile_dir / "g.graph")
    benign = parse_file(benign_file)
    files, main, cplusplus = module_sources(hostile, backend)
    assert "int evil" not in preprocess(files, main, tmp_path / "pp-hostile", cplusplus=cplusplus)
    files0, main0, _ = module_sources(benign, backend)
    assert preprocess(files, main, tmp_path / "pp-hostile", cplusplus=cplusplus) == preprocess(
        files0, main0, tmp_path / "pp-benign", cplusplus=cplusplus
    )
    # the host functions (DSL text with `#` location comments) are the same functions
    artifacts = generate(hostile, CATALOG, byoc.load_backend).artifacts
    artifacts0 = generate(benign, CATALOG, byoc.load_backend).artifacts
    (host,) = [a.text for a in artifacts if a.role == "host_functions"]
    (host0,) = [a.text for a in artifacts0 if a.role == "host_functions"]
    assert parse(host) == parse(host0)
    model = build(hostile, options=options_for(backend))
    assert exported(library_of(model)) == benign_exports[backend]
    check_runs(model, hostile)


# ------------------------------------------------------------------ region names


@pytest.mark.parametrize(
    "symbol",
    sorted(C_KEYWORDS)[:20]
    + [
        "__x",
        "_X",
        "_Z9",
        "byoc_raise",
        "TVMFFIAny",
        "kTVMFFIInt",
        "DLTensor",
        "kDLCPU",
        "a b",
        "x*/",
        "1x",
        "",
    ]
    + ["s" * (MAX_SYMBOL_LENGTH + 1), "é"],
)
def test_hostile_region_names_are_rejected(symbol):
    assert symbol_problem(symbol) is not None


@pytest.mark.parametrize("symbol", ["f", "my_region", "_private", "x" * MAX_SYMBOL_LENGTH, "int_", "Return"])
def test_ordinary_region_names_are_accepted(symbol):
    assert symbol_problem(symbol) is None


def test_every_accepted_symbol_is_a_plain_identifier():
    rng = random.Random(5)
    alphabet = "abcXYZ_019 */\\?\"'-.é"
    for _ in range(5000):
        s = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 6)))
        if symbol_problem(s) is None:
            assert re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", s) and s not in C_KEYWORDS
            assert not s.startswith("__") and not re.match(r"_[A-Z]", s)


@pytest.mark.parametrize("backend", COMPILED)
def test_region_names_become_exactly_the_exported_symbols(backend):
    """Named and automatic regions export __tvm_ffi_<name> and nothing else of theirs."""
    text = (
        "graph main(x: float32[2, 3], y: float32[2, 3]) {\n"
        f"  a = @{backend} as int_ {{ return add(x, y) }}\n"
        f"  b = @{backend} {{ return subtract(a, y) }}\n"
        "  return a, b\n}\n"
    )
    model = build(parse(text), options=options_for(backend))
    prefix = byoc.load_backend(backend).symbol_prefix
    assert {s for s in exported(library_of(model)) if s.startswith("__tvm_ffi_")} == {
        "__tvm_ffi_int_",
        f"__tvm_ffi_{prefix}_0",
    }


def test_names_that_collide_after_mapping_are_rejected():
    """ExampleJSON ids 1, 01 and 001 are all v1; region f_wrapper would clash with f's helpers."""
    with pytest.raises(GraphError, match="duplicate id '1'"):
        parse("sg\n  input 1 4\n  input 01 4\n  add 2 inputs: 1 1 shape: 4\n", "examplejson")
    with pytest.raises(GraphError, match="clashes with the C names generated for region 'f'"):
        generate(
            parse(
                "graph main(x: float32[4]) {\n  a = @ccompiler as f { return add(x, x) }\n"
                "  b = @ccompiler as f_wrapper { return add(x, x) }\n  return a, b\n}\n"
            ),
            CATALOG,
            byoc.load_backend,
        )


def test_generated_text_is_deterministic():
    text = chain_graph(NAME_SETS["reserved"], "ccompiler")
    first = generate(parse(text), CATALOG, byoc.load_backend).artifacts
    again = generate(parse(text), CATALOG, byoc.load_backend).artifacts
    assert [(a.name, a.text) for a in first] == [(a.name, a.text) for a in again]
