"""Option values never change the structure of the generated code (issue 31).

``--option BACKEND.NAME=VALUE`` and the API's ``options=`` are untrusted. Every
option of every shipped spec (enumerated from the loaded specs, so a new option is
covered without editing this file) gets each hostile value below: it is either
refused with a UsageError located at the option in its spec, naming it, with a hint,
or it reaches the generated text as a checked literal of the option's type, which
this file decodes with its own C-literal reader and compares with the value. A spec
of the test's own (the ccompiler spec with str, float, int and identifier options
used in its prelude and flags) is compiled and run: the library returns each hostile
string byte for byte, and the graph matches the numpy reference. Every case runs in a
fresh working directory where no file (such as PWNED) may appear.
"""

from __future__ import annotations

import ctypes
import math
import re
from pathlib import Path

import numpy as np
import pytest
from libraries import missing_library

import byoc.spec
from byoc.api import evaluate, load_backend, load_catalog, parse
from byoc.building import build
from byoc.errors import ByocError, SpecError, UsageError
from byoc.generator.artifacts import Role
from byoc.generator.pipeline import generate
from byoc.spec.backend_loader import load_backend_file
from byoc.spec.search import backend_files
from byoc.spec.template import placeholder_names, render

SPECS = Path(byoc.spec.__file__).parent / "backends"
SHIPPED = sorted(backend_files(SPECS))
PAYLOAD = '({ extern int system(const char*); (void)system("touch PWNED"); })'

HOSTILE = [
    '"',
    "'",
    '"; int pwned = system("touch PWNED"); "',
    '\n#include <stdlib.h>\n__attribute__((constructor)) static void p(void) { system("touch PWNED"); }\n',
    "a\nb",
    "a\r\nb",
    "/*",
    "*/",
    "x */ int evil(void) { return 1; } /*",
    "// rest of line",
    "#define float double",
    "\\",
    "\\\n",
    "??/",
    "??/\nint evil;",
    "??=define X",
    PAYLOAD,
    PAYLOAD + ", scipy_",
    "), x",
    '0), system("touch PWNED"',
    "2 /* */ + 1",
    "3;",
    " 3",
    "0x10",
    "1_0",
    "-1",
    "nan",
    "NaN",
    "inf",
    "-inf",
    "1e999",
    "-1e999",
    "1e308",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    "1" + "0" * 400,
    "",
    "\0",
    "a\0b",
    "é",
    "\u202e\u2066",
    "\U0001f600",
    "x" * 5000,
    "scipy_ cblas",
    "2cblas_",
    'R"(',
    "$${x}",
]
"""At least 30 hostile values (quotes, newlines, comments, #, backslash, trigraphs,
statement expressions, argument breakers, non-finite and overflowing numbers, huge
ints, empty, NUL, unicode)."""


# ------------------------------------------------------------------ an independent oracle


_LITERAL = re.compile(r'"(?:[^"\\\n]|\\.)*"')
_ESCAPES = {"n": 10, "t": 9, "r": 13, "\\": 92, '"': 34, "'": 39, "?": 63, "a": 7, "b": 8, "f": 12, "v": 11}


def decode_c_string(literal: str) -> str:
    """The text a C string literal spells (simple and octal escapes, UTF-8 bytes)."""
    assert _LITERAL.fullmatch(literal), literal
    body, out, i = literal[1:-1], bytearray(), 0
    while i < len(body):
        if body[i] != "\\":
            out += body[i].encode("utf-8")
            i += 1
            continue
        octal = re.match(r"[0-7]{1,3}", body[i + 1 :])
        if octal:
            out.append(int(octal.group(0), 8))
            i += 1 + len(octal.group(0))
        else:
            out.append(_ESCAPES[body[i + 1]])
            i += 2
    return out.decode("utf-8")


def check_literal(vtype: str, value: object, text: str) -> None:
    """``text``, an option's C text, is one literal of ``vtype`` that means ``value``."""
    if vtype == "str":
        assert _LITERAL.fullmatch(text), text
        assert not re.search(r"\*/|/\*|//|\?\?|\n|[^\x20-\x7e]", text[1:-1]), text
        assert decode_c_string(text) == value
    elif vtype == "int":
        assert re.fullmatch(r"[0-9]+|\(-[0-9]+\)", text), text
        assert int(text.strip("()")) == value and abs(value) < 2**63  # a C long long  # type: ignore[arg-type]
    elif vtype == "float":
        assert re.fullmatch(r"\(?-?[0-9.]+(?:e[-+]?[0-9]+)?\)?", text), text
        assert math.isfinite(float(text.strip("()"))) and float(text.strip("()")) == value
    elif vtype == "bool":
        assert text in ("0", "1") and bool(int(text)) is value
    else:
        assert re.fullmatch(r"(?:[A-Za-z_][A-Za-z0-9_]{0,63})?", text), text
        assert text == value


# ------------------------------------------------------------------ shipped specs


def graph_for(backend: str) -> str:
    """A small graph with one region on ``backend``: add, or relu where add is not offered."""
    op = "add(x, y)" if load_backend(backend).supports("add", "float32", 2) else "relu(x)"
    return (
        "graph main(x: float32[2, 3], y: float32[2, 3]) {\n"
        f"  z = @{backend} {{\n    return {op}\n  }}\n"
        "  return multiply(z, y)\n}\n"
    )


def generated_text(backend: str, options: dict[str, object], spec_path=None) -> str:
    catalog = load_catalog(spec_path=spec_path)
    from byoc.api import backend_loader

    program = parse(graph_for(backend) if spec_path is None else HOSTILE_GRAPH, catalog=catalog)
    made = generate(program, catalog, backend_loader(spec_path, catalog), options)  # type: ignore[arg-type]
    return "\n".join(a.text for a in made.artifacts if a.backend == backend and a.role is not Role.WEIGHTS)


def template_uses(spec) -> dict[str, list[str]]:
    """Option name -> the spec's C templates (prelude and friends) that write it."""
    uses: dict[str, list[str]] = {}
    for text in spec.templates.values():
        for name in placeholder_names(text):
            uses.setdefault(name, []).append(text)
    return uses


OPTIONS = [(b, name) for b in SHIPPED for name in load_backend(b).options]


def test_every_shipped_spec_is_enumerated():
    assert {"cblas", "ccompiler", "engine", "fused", "json"} <= set(SHIPPED)
    assert ("cblas", "cblas_prefix") in OPTIONS and len(OPTIONS) >= 10
    assert load_backend("cblas").options["cblas_prefix"].type == "identifier"


@pytest.mark.parametrize(("backend", "name"), OPTIONS, ids=[f"{b}.{n}" for b, n in OPTIONS])
def test_hostile_values_on_every_shipped_option(backend, name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = load_backend(backend)
    option = spec.options[name]
    uses = template_uses(spec).get(name, [])
    accepted = 0
    for raw in HOSTILE:
        try:
            value = spec.option_values({name: raw})[name]
        except UsageError as exc:
            assert exc.location is not None and exc.location.file.endswith(f"{backend}.yaml")
            assert name in exc.message and exc.hint
            with pytest.raises(UsageError, match=name):  # the same through the whole pipeline
                generated_text(backend, {f"{backend}.{name}": raw})
            continue
        accepted += 1
        c_text = render(f"${{{name}}}", spec.template_values({name: value}))
        check_literal(option.type, value, c_text)
        text = generated_text(backend, {f"{backend}.{name}": raw})
        for template in uses:
            rendered = render(template, spec.template_values({name: value}))
            assert rendered.rstrip("\n") in text
        flags = spec.compile.render_flags(spec.template_values({name: value}))
        assert all("PWNED" not in f for f in flags)
    assert accepted < len(HOSTILE)
    assert list(tmp_path.iterdir()) == []


def test_the_issues_cblas_payload_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError, match="cblas_prefix") as info:
        generated_text("cblas", {"cblas.cblas_prefix": PAYLOAD + ", scipy_"})
    assert info.value.location is not None and info.value.location.file.endswith("cblas.yaml")
    assert "identifier" in (info.value.hint or "")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "key",
    [
        ".opt_level",
        "cblas.",
        ".",
        "a.b.c",
        " opt_level",
        "opt level",
        "ccompiler..opt_level",
        "Opt_Level",
        "1x",
    ],
)
def test_malformed_option_names_are_refused(key):
    with pytest.raises(UsageError, match="does not name an option"):
        generated_text("ccompiler", {key: "1"})


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf"), 10**30, True, "2.5", None])
def test_api_values_are_checked_like_text(value):
    """The API's Python values pass the same checks (a bool is not an int)."""
    spec = load_backend("fused")
    with pytest.raises(UsageError, match="openmp_threshold"):
        spec.option_values({"openmp_threshold": value})


# ------------------------------------------------------------------ a spec of str, float, int and identifier options

STR_OPTIONS = {
    "quote": '"; int pwned = system("touch PWNED"); "',
    "newline": "\n#include <stdlib.h>\n__attribute__((constructor)) static void p(void) {}\n",
    "comment": "x */ int evil(void) { return 1; } /* // ??/",
    "splice": "a\\\nb??/\n\\",
    "stmt": PAYLOAD,
    "unicode": "é \u202e \U0001f600 \t\r\x7f\x01",
    "octal": "\x01" + "7" * 3 + "?\x0812",
    "empty": "",
}
HOSTILE_GRAPH = (
    "graph main(x: float32[2, 3], y: float32[2, 3]) {\n"
    "  z = @hostile {\n    return add(x, y)\n  }\n"
    "  return multiply(z, y)\n}\n"
)


def hostile_spec(directory: Path) -> Path:
    """The ccompiler spec renamed ``hostile``, with a str option per :data:`STR_OPTIONS`
    returned by an exported function each, a str option in a ``-D`` flag, and float,
    int and identifier options."""
    text = (SPECS / "ccompiler.yaml").read_text()
    text = text.replace("name: ccompiler ", "name: hostile ").replace(
        "symbol_prefix: ccompiler", "symbol_prefix: hostile"
    )
    text = text.replace(
        'flags: ["-O${opt_level}", -Wall, -Wextra, -Werror]',
        'flags: ["-O${opt_level}", -Wall, -Wextra, -Werror, "-DHOSTILE_FLAG=${flag_note}"]',
    )
    options = "".join(f"  {n}:\n    type: str\n    default: plain\n" for n in [*STR_OPTIONS, "flag_note"])
    options += "  scale:\n    type: float\n    default: 0.5\n  count:\n    type: int\n    default: 3\n"
    options += "  tag:\n    type: identifier\n    default: tag\n"
    assert "\noptions:\n" in text
    text = text.replace("\noptions:\n", "\noptions:\n" + options, 1)
    getters = "".join(f"  const char *hostile_get_{n}(void) {{ return ${{{n}}}; }}\n" for n in STR_OPTIONS)
    getters += "  const char *hostile_get_flag(void) { return HOSTILE_FLAG; }\n"
    getters += "  double hostile_get_scale(void) { return ${scale}; }\n"
    getters += "  long long hostile_get_count(void) { return ${count}; }\n"
    getters += '  const char *hostile_get_tag(void) { return "${tag}"; }\n'
    text = text.replace("prelude: |\n", "prelude: |\n" + getters + "\n", 1)
    path = directory / "hostile.yaml"
    path.write_text(text)
    return path


@pytest.fixture
def spec_dir(tmp_path) -> Path:
    directory = tmp_path / "specs"
    directory.mkdir()
    hostile_spec(directory)
    return directory


def test_hostile_values_on_str_float_int_and_identifier_options(spec_dir, tmp_path, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    spec = load_backend_file(spec_dir / "hostile.yaml", load_catalog())
    for name in ("quote", "scale", "count", "tag"):
        option = spec.options[name]
        for raw in HOSTILE:
            try:
                value = spec.option_values({name: raw})[name]
            except UsageError as exc:
                assert exc.location is not None and exc.location.file.endswith("hostile.yaml")
                assert name in exc.message and exc.hint
                continue
            text = generated_text("hostile", {f"hostile.{name}": raw}, [str(spec_dir)])
            c_text = render(f"${{{name}}}", spec.template_values({name: value}))
            check_literal(option.type, value, c_text)
            assert f"hostile_get_{name}(void) {{ return {c_text}" in text or name == "tag"
    for raw in ("nan", "inf", "-inf", "1e999", "-1e999"):
        with pytest.raises(UsageError, match="scale") as info:
            spec.option_values({"scale": raw})
        assert "finite" in (info.value.hint or "") + info.value.message
    assert [
        spec.option_values({"quote": v})["quote"] for v in HOSTILE if "\0" not in v and len(v) <= 4096
    ] == [v for v in HOSTILE if "\0" not in v and len(v) <= 4096]
    assert list(work.iterdir()) == []


@pytest.mark.skipif(missing_library("ccompiler") is not None, reason="no C compiler")
def test_hostile_strings_compile_and_come_back_byte_for_byte(spec_dir, tmp_path, monkeypatch):
    """Compiled with -Wall -Wextra -Werror: each getter returns its hostile string, the
    -D flag's string arrives whole, the numbers are the values, and the graph matches numpy."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    options = {f"hostile.{n}": v for n, v in STR_OPTIONS.items()}
    options |= {
        "hostile.flag_note": 'a "b" \\ ??/ */',
        "hostile.scale": "-1e-300",
        "hostile.count": "-9223372036854775807",
    }
    options["hostile.tag"] = "_x9"
    program = parse(HOSTILE_GRAPH, catalog=load_catalog(spec_path=[str(spec_dir)]))
    model = build(program, options=options, spec_path=[str(spec_dir)])
    rng = np.random.default_rng(0)
    inputs = {p: rng.uniform(-2, 2, (2, 3)).astype("float32") for p in ("x", "y")}
    for got, want in zip(model(**inputs), evaluate(program.functions[0], inputs)):
        np.testing.assert_allclose(got, want, rtol=1e-6)
    (entry,) = model.manifest.modules
    library_path = tmp_path / "libhostile.so"
    library_path.write_bytes(model.members[entry.file])
    library = ctypes.CDLL(str(library_path))

    def getter(name: str, restype):
        function = getattr(library, f"hostile_get_{name}")
        function.restype, function.argtypes = restype, []
        return function()

    for name, value in STR_OPTIONS.items():
        assert getter(name, ctypes.c_char_p).decode("utf-8") == value
    assert getter("flag", ctypes.c_char_p).decode("utf-8") == 'a "b" \\ ??/ */'
    assert getter("scale", ctypes.c_double) == -1e-300
    assert getter("count", ctypes.c_longlong) == -9223372036854775807
    assert getter("tag", ctypes.c_char_p) == b"_x9"
    assert list(work.iterdir()) == []


# ------------------------------------------------------------------ the spec side


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ('  const char *n = "v${note}";', "inside a string literal"),
        ("  const char c = '${note}';", "inside a character literal"),
        ('  const char *r = R"x(${note})x";', "inside a raw string literal"),
        ("  const char *p = u8${note};", "glued to the name before it"),
        ("  _Pragma(${note})", "as the operand of _Pragma"),
        ("  #include ${note}", "on an #include line"),
    ],
)
def test_a_str_option_where_its_literal_would_not_stay_one_token_is_refused(tmp_path, line, why):
    text = (SPECS / "ccompiler.yaml").read_text().replace("name: ccompiler ", "name: bad ")
    text = text.replace("\noptions:\n", "\noptions:\n  note:\n    type: str\n    default: hi\n", 1)
    text = text.replace("prelude: |\n", f"prelude: |\n{line}\n", 1)
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(SpecError, match=why) as info:
        load_backend_file(path, load_catalog())
    loc = info.value.location
    row = text.splitlines().index(line) + 1
    assert loc is not None and (loc.line, loc.column) == (row, line.index("${note}") + 1)
    assert "identifier" in (info.value.hint or "")


@pytest.mark.parametrize(
    "line",
    [
        '  static const char *const n = "v: " ${note};',
        "  /* ${note} */",
        "  // ${note}",
        '  #define NOTE "x" ${note} "y"',
        "  static const char c = '\"'; static const char *const m = ${note};",
    ],
)
def test_a_str_option_where_a_literal_may_stand_is_accepted(tmp_path, line):
    text = (SPECS / "ccompiler.yaml").read_text().replace("name: ccompiler ", "name: ok ")
    text = text.replace("\noptions:\n", "\noptions:\n  note:\n    type: str\n    default: hi\n", 1)
    text = text.replace("prelude: |\n", f"prelude: |\n{line}\n", 1)
    path = tmp_path / "ok.yaml"
    path.write_text(text)
    spec = load_backend_file(path, load_catalog())
    rendered = render(line, spec.template_values({"note": '*/ "\n'}))
    assert '"\\052\\057 \\"\\012"' in rendered


def test_bounds_and_identifier_declarations(tmp_path):
    base = (SPECS / "json.yaml").read_text()
    assert load_backend("json").options["indent"].maximum == 16
    for bad, message in [
        ("    type: str\n    default: x\n    at_least: 0\n", "only int and float options take at_least"),
        ("    type: int\n    default: 99\n    at_most: 16\n", "the default 99 is out of range"),
        ("    type: float\n    default: .nan\n", "not finite"),
        ("    type: identifier\n    default: a b\n", "not an identifier"),
        (
            "    type: int\n    default: 1\n    at_least: 3\n    at_most: 2\n",
            "at_least is larger than at_most",
        ),
    ]:
        text = base.replace("\noptions:\n", f"\noptions:\n  extra:\n{bad}", 1)
        path = tmp_path / "json.yaml"
        path.write_text(text)
        with pytest.raises(ByocError, match=message):
            load_backend_file(path, load_catalog())
