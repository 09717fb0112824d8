"""Fuzzing, bounded for CI (budgets and the long mode: tests/fuzz_strategies.py).

* **Parsers**, from mutated files of the bad-input corpus, the examples and the
  golden graphs (byte-level: bit flips, cuts, splices, hostile insertions), and
  then the generators on whatever still parses: may raise only ByocError.
* **The spec loader**: mutated shipped backend specs and op catalog (YAML text),
  and generation with a mutated spec that still loads: only ByocError.
* **The bundle loader**: mutated bytes of valid bundles (a bundle that still loads
  must compute the original results: every member is verified), and structurally
  mutated manifests and members with valid digests, loaded and run: only ByocError.
* **Differential**: random graphs, with numpy broadcasting where a backend's spec
  allows it, give the numpy reference's results on every backend.

(tests/test_roundtrip_hypothesis.py fuzzes both parsers from random text as well.)
"""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from pathlib import Path

import numpy as np
import pytest
from conftest import DATA, EXAMPLES
from fuzz_strategies import (
    CI_EXAMPLES,
    DIFFERENTIAL_EXAMPLES,
    Caps,
    assert_matches_reference,
    build_options,
    fuzz_settings,
    region_graphs,
)
from hypothesis import given
from hypothesis import strategies as st
from libraries import missing_library

import byoc
import byoc.runtime
import byoc.spec
from byoc.api import parse
from byoc.building import build
from byoc.errors import ByocError
from byoc.generator.lowering import offload_whole
from byoc.generator.pipeline import generate
from byoc.spec.backend_loader import load_backend_doc
from byoc.spec.ops_loader import SHIPPED_OPS, load_catalog_text
from byoc.spec.search import backend_files
from byoc.spec.yaml_doc import YamlDoc

CATALOG = byoc.spec.load_catalog()
SPECS = Path(byoc.spec.__file__).parent / "backends"
BACKENDS = sorted(backend_files(SPECS))
BAD = DATA / "bad"


# ------------------------------------------------------------------ mutations

INTERESTING = [
    b"\xff",
    b"\x00",
    b"\r",
    b"\n",
    b"\xc3",
    b"\xe2\x80\xae",
    b"[",
    b"]",
    b"(",
    b")",
    b"{",
    b"}",
    b"@",
    b"#",
    b'"',
    b"\\",
    b",",
    b"=",
    b":",
    b"-",
    b"9" * 30,
    b"0" * 200 + b"1",
    b"a" * 200,
    b"99999999999999999999",
    b"float32[",
    b" return ",
    b" as int ",
    b" as __x ",
    b"@ccompiler {",
    b"@fused {",
    b" const ",
    b"input ",
    b"inputs: ",
    b"shape: ",
    b"*/",
    b"??/",
]


@st.composite
def mutated(draw, seeds: list[bytes]) -> bytes:
    """A seed with one to four byte-level mutations."""
    data = bytearray(draw(st.sampled_from(seeds)))
    for _ in range(draw(st.integers(1, 4))):
        pos = draw(st.integers(0, len(data)))
        action = draw(st.sampled_from(("flip", "delete", "insert", "duplicate", "splice", "truncate")))
        if action == "flip" and data:
            i = min(pos, len(data) - 1)
            data[i] ^= 1 << draw(st.integers(0, 7))
        elif action == "delete":
            del data[pos : pos + draw(st.integers(1, 16))]
        elif action == "insert":
            data[pos:pos] = draw(st.sampled_from(INTERESTING))
        elif action == "duplicate":
            end = min(len(data), pos + draw(st.integers(1, 40)))
            data[end:end] = data[pos:end]
        elif action == "splice":
            other = draw(st.sampled_from(seeds))
            start = draw(st.integers(0, len(other)))
            data[pos:] = other[start:]
        else:
            data = data[:pos]
    return bytes(data)


def _only_byoc_errors(action) -> object | None:
    try:
        return action()
    except ByocError as exc:
        assert exc.message
        exc.render()
        if exc.location is not None:
            assert exc.location.line >= 1 and exc.location.column >= 1
        return None


# ------------------------------------------------------------------ parsers


def _seeds(*patterns: tuple[Path, str]) -> list[bytes]:
    out = []
    for root, pattern in patterns:
        for path in sorted(root.glob(pattern)):
            out.append(path.read_bytes().replace(b"@BACKEND", b"@ccompiler"))
    return out


DSL_SEEDS = _seeds((BAD / "graph", "*.graph"), (EXAMPLES, "*.graph"), (DATA / "gen", "*.graph"))
EJ_SEEDS = _seeds((BAD / "examplejson", "*.examplejson"), (EXAMPLES, "*.examplejson"))


def _load(name: str):
    return byoc.load_backend(name)


@fuzz_settings(CI_EXAMPLES["dsl-corpus-mutations"])
@given(mutated(DSL_SEEDS))
def test_fuzz_dsl_parser_and_generators(data):
    program = _only_byoc_errors(lambda: parse(data, "graph"))
    if program is not None:
        _only_byoc_errors(lambda: generate(program, CATALOG, _load))


@fuzz_settings(CI_EXAMPLES["examplejson-corpus-mutations"])
@given(mutated(EJ_SEEDS), st.sampled_from(BACKENDS))
def test_fuzz_examplejson_parser_and_generators(data, backend):
    program = _only_byoc_errors(lambda: parse(data, "examplejson"))
    if program is not None:
        _only_byoc_errors(lambda: generate(offload_whole(program, backend), CATALOG, _load))


# ------------------------------------------------------------------ spec loader

YAML_VALUES = [
    "-1",
    "0",
    "99999999999999999999",
    "1.5",
    "''",
    "[]",
    "{}",
    "null",
    "true",
    "'*/'",
    "__x",
    "int",
    "'${nosuch}'",
    "'${'",
    "!!binary aGk=",
    "&a x",
    "*a",
    "[[[[[[]]]]]]",
    "'x\\n#define'",
    "float16",
    "c++",
]
YAML_CHARS = [":", "-", "[", "{", "'", '"', "\t", "#", "&", "*", "!", "|", ">", "%", "@", "`", "  ", "\n"]


@st.composite
def mutated_yaml(draw, texts: list[tuple[str, str]]) -> tuple[str, str]:
    """(file name, text): a YAML file with one to three line-level mutations."""
    name, text = draw(st.sampled_from(texts))
    lines = text.split("\n")
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.integers(0, len(lines) - 1))
        action = draw(st.sampled_from(("delete", "duplicate", "swap", "value", "char", "indent", "dedent")))
        if action == "delete":
            del lines[i]
        elif action == "duplicate":
            lines.insert(i, lines[i])
        elif action == "swap":
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif action == "value" and ":" in lines[i]:
            key = lines[i].split(":", 1)[0]
            lines[i] = f"{key}: {draw(st.sampled_from(YAML_VALUES))}"
        elif action == "char":
            pos = draw(st.integers(0, len(lines[i])))
            lines[i] = lines[i][:pos] + draw(st.sampled_from(YAML_CHARS)) + lines[i][pos:]
        elif action == "indent":
            lines[i] = "  " + lines[i]
        elif action == "dedent":
            lines[i] = lines[i][2:]
        if not lines:
            lines = [""]
    return name, "\n".join(lines)


SPEC_TEXTS = [(str(p), p.read_text(encoding="utf-8")) for p in backend_files(SPECS).values()]
"""Each shipped spec by its path, so that a mutant of one in a folder of its own reads
the support and template files beside it, as the spec does."""
SMALL_GRAPH = "graph main(x: float32[2, 3], y: float32[2, 3]) {\n  s = @NAME { return multiply(add(x, y), y) }\n  return s\n}\n"


@fuzz_settings(CI_EXAMPLES["spec-mutations"])
@given(mutated_yaml(SPEC_TEXTS))
def test_fuzz_spec_loader(named):
    name, text = named
    spec = _only_byoc_errors(lambda: load_backend_doc(YamlDoc(name, text), CATALOG))
    if spec is None:
        return
    # A mutated spec that still loads generates code or fails with a ByocError.
    program = parse(SMALL_GRAPH.replace("NAME", spec.name))
    shipped = byoc.load_backend

    def loader(backend: str):
        return spec if backend == spec.name else shipped(backend)

    _only_byoc_errors(lambda: generate(program, CATALOG, loader))


@fuzz_settings(CI_EXAMPLES["catalog-mutations"])
@given(mutated_yaml([("ops.yaml", Path(SHIPPED_OPS).read_text(encoding="utf-8"))]))
def test_fuzz_op_catalog_loader(named):
    name, text = named
    _only_byoc_errors(lambda: load_catalog_text(YamlDoc(name, text)))


# ------------------------------------------------------------------ bundle loader

BUNDLE_GRAPH = """\
graph main(x: float32[3, 4], y: float32[3, 4]) {
  s = @ccompiler { return multiply(add(x, y), y) }
  t, u = @json {
    k = const float32[3, 4] 0.5
    return subtract(s, k), relu(x)
  }
  return t, u, add(s, x)
}
"""


@pytest.fixture(scope="module")
def bundles(tmp_path_factory) -> dict[str, bytes]:
    """Valid bundles: a JSON-only one, and a library + JSON one."""
    out = tmp_path_factory.mktemp("bundles")
    result = {}
    for key, text in (("json", BUNDLE_GRAPH.replace("@ccompiler", "@json")), ("library", BUNDLE_GRAPH)):
        source = out / f"{key}.graph"
        source.write_text(text)
        build(source).save(out / f"{key}.byoc")
        result[key] = (out / f"{key}.byoc").read_bytes()
    return result


def _inputs(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {n: rng.uniform(-2, 2, (3, 4)).astype(np.float32) for n in ("x", "y")}


@pytest.fixture(scope="module")
def expected(bundles, tmp_path_factory) -> dict[str, tuple[np.ndarray, ...]]:
    out = tmp_path_factory.mktemp("expected")
    result = {}
    for key, raw in bundles.items():
        (out / f"{key}.byoc").write_bytes(raw)
        result[key] = byoc.runtime.load(out / f"{key}.byoc")(**_inputs())
    return result


@fuzz_settings(CI_EXAMPLES["bundle-bytes"])
@given(data=st.data())
def test_fuzz_bundle_bytes(bundles, expected, tmp_path_factory, data):
    key = data.draw(st.sampled_from(sorted(bundles)))
    raw = data.draw(mutated([bundles[key]]))
    path = tmp_path_factory.getbasetemp() / "fuzz-bytes.byoc"
    path.write_bytes(raw)
    model = _only_byoc_errors(lambda: byoc.runtime.load(path))
    if model is not None:  # every member passed its sha256: it computes what the original did
        for got, want in zip(model(**_inputs()), expected[key]):
            np.testing.assert_array_equal(got, want)


JSON_VALUES = [None, -1, 0, 2**70, 1.5, "", "../../x", "/etc/passwd", "main", [], {}, [[]], True, "x" * 300]


def _mutate_json(draw, value):
    """``value`` (parsed JSON) with one structural change somewhere inside it."""
    if isinstance(value, dict) and value and draw(st.integers(0, 3)):
        key = draw(st.sampled_from(sorted(value, key=str)))
        action = draw(st.sampled_from(("recurse", "recurse", "delete", "replace")))
        copy = dict(value)
        if action == "delete":
            del copy[key]
        elif action == "replace":
            copy[key] = draw(st.sampled_from(JSON_VALUES))
        else:
            copy[key] = _mutate_json(draw, value[key])
        return copy
    if isinstance(value, list) and value and draw(st.integers(0, 3)):
        i = draw(st.integers(0, len(value) - 1))
        action = draw(st.sampled_from(("recurse", "recurse", "delete", "duplicate", "replace", "reverse")))
        copy = list(value)
        if action == "delete":
            del copy[i]
        elif action == "duplicate":
            copy.insert(i, copy[i])
        elif action == "replace":
            copy[i] = draw(st.sampled_from(JSON_VALUES))
        elif action == "reverse":
            copy.reverse()
        else:
            copy[i] = _mutate_json(draw, value[i])
        return copy
    return draw(st.sampled_from(JSON_VALUES))


def _rezip(members: dict[str, bytes], manifest: dict) -> bytes:
    manifest = dict(manifest)
    manifest["members"] = {
        n: {"sha256": hashlib.sha256(b).hexdigest(), "size": len(b)} for n, b in members.items()
    }
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        z.writestr("manifest.json", json.dumps(manifest))
        for name, data in members.items():
            z.writestr(name, data)
    return buffer.getvalue()


@fuzz_settings(CI_EXAMPLES["bundle-manifests"])
@given(data=st.data())
def test_fuzz_bundle_structure(bundles, tmp_path_factory, data):
    """Manifests and JSON members changed in structure, with valid digests: loading and
    running may fail only with a ByocError (a bundle's native code is trusted, but its
    manifest and JSON are still checked)."""
    key = data.draw(st.sampled_from(sorted(bundles)))
    with zipfile.ZipFile(io.BytesIO(bundles[key])) as z:
        members = {n: z.read(n) for n in z.namelist()}
    manifest = json.loads(members.pop("manifest.json"))
    target = data.draw(st.sampled_from(["manifest"] + sorted(n for n in members if n.endswith(".json"))))
    if target == "manifest":
        manifest = _mutate_json(data.draw, manifest)
        if not isinstance(manifest, dict):
            manifest = {"format": "byoc-bundle", "version": 1, "body": manifest}
        manifest.setdefault("format", "byoc-bundle")
    else:
        members[target] = json.dumps(_mutate_json(data.draw, json.loads(members[target]))).encode()
    path = tmp_path_factory.getbasetemp() / "fuzz-structure.byoc"
    path.write_bytes(_rezip(members, manifest))
    model = _only_byoc_errors(lambda: byoc.runtime.load(path))
    if model is None:
        return
    for graph in model.graph_names:
        executor = model.executor(graph)
        types = {n: executor.input_type(n) for n in executor.input_names}
        if any(t.size > 1 << 16 for t in types.values()):
            continue
        rng = np.random.default_rng(0)
        inputs = {n: rng.uniform(-2, 2, t.shape).astype(t.dtype) for n, t in types.items()}
        _only_byoc_errors(lambda: model.run(graph, **inputs))  # noqa: B023


# ------------------------------------------------------------------ differential


def _differential(backend: str):
    why = f"no {backend} backend spec" if backend not in BACKENDS else missing_library(backend)
    if why:

        @pytest.mark.skip(reason=why)
        def skipped():
            pass

        return skipped
    caps = Caps(backend)

    @fuzz_settings(DIFFERENTIAL_EXAMPLES[backend], compiled=True)
    @given(case=region_graphs(caps))
    def test(case):
        graph, inputs = case
        model = build(parse(graph), options=build_options(backend))
        assert_matches_reference(graph, inputs, model)

    return test


test_differential_ccompiler = _differential("ccompiler")
test_differential_engine = _differential("engine")
test_differential_examplejson = _differential("examplejson")
test_differential_json = _differential("json")
test_differential_fused = _differential("fused")
test_differential_cblas = _differential("cblas")
test_differential_dnnl = _differential("dnnl")


def test_differential_covers_every_shipped_backend():
    assert set(BACKENDS) <= set(DIFFERENTIAL_EXAMPLES), set(BACKENDS) - set(DIFFERENTIAL_EXAMPLES)
