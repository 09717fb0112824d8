"""A DSL or ExampleJSON file's parse, remembered for the next process (byoc/parsed_texts.py):
the second read of the same text parses nothing and gets the same Program, locations
included; another text, file name or catalog is parsed again; an error, a weights file
and a catalog built in code are never remembered; and a warm ``byoc run`` of the quick
start imports neither the parsers nor ruamel.yaml."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import byoc
from byoc.api import parse_source
from byoc.errors import GraphError
from byoc.grammar import examplejson_parser, graph_parser
from byoc.npz_files import npz_bytes, sha256_hex

ROOT = Path(__file__).resolve().parent.parent
GRAPH = """graph main(x: float32[4, 8], w: float32[8, 3]) {
  h = matmul(x, w)
  return relu(h)
}
"""


@pytest.fixture
def parses(monkeypatch) -> list[str]:
    """The files the DSL and ExampleJSON parsers read from now on, in order."""
    seen: list[str] = []
    for module, name in ((graph_parser, "parse_graph"), (examplejson_parser, "parse_examplejson")):
        real = getattr(module, name)

        def counting(text, *args, real=real, **kwargs):
            seen.append(kwargs.get("file"))
            return real(text, *args, **kwargs)

        monkeypatch.setattr(module, name, counting)
    return seen


def locations(program) -> list:
    return [(n.name, n.loc) for fn in program.functions for n in fn.nodes]


def test_a_second_read_of_a_graph_file_parses_nothing(tmp_path, private_cache, parses):
    path = tmp_path / "g.graph"
    path.write_text(GRAPH)
    first, key = parse_source(path, "graph")
    again, same_key = parse_source(path, "graph")
    assert parses == [str(path)]
    assert again == first and same_key == key
    assert locations(again) == locations(first) and str(path) in str(locations(again)[0][1])
    assert (private_cache / "parsed-texts").is_dir()


def test_a_second_read_of_an_examplejson_file_parses_nothing(tmp_path, private_cache, parses):
    path = tmp_path / "s.examplejson"
    shutil.copy(ROOT / "examples" / "guide_subgraph.examplejson", path)
    first, _ = parse_source(path, "examplejson")
    again, _ = parse_source(path, "examplejson")
    assert parses == [str(path)]
    assert again == first and locations(again) == locations(first)


def test_another_text_or_file_name_is_parsed_again(tmp_path, private_cache, parses):
    path = tmp_path / "g.graph"
    path.write_text(GRAPH)
    parse_source(path, "graph")
    path.write_text(GRAPH.replace("relu(h)", "sigmoid(h)"))
    changed, _ = parse_source(path, "graph")
    assert changed.functions[0].nodes[-1].op == "sigmoid"
    copy = tmp_path / "copy.graph"  # the same text: its locations name another file
    shutil.copy(path, copy)
    copied, _ = parse_source(copy, "graph")
    assert parses == [str(path), str(path), str(copy)]
    assert str(copy) in str(copied.functions[0].nodes[0].loc)


def test_a_user_catalog_is_part_of_the_key(tmp_path, private_cache, parses):
    """The same text checked against another catalog (a user op added) is parsed again."""
    path = tmp_path / "g.graph"
    path.write_text(GRAPH)
    parse_source(path, "graph")
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "ops.yaml").write_text(
        "version: 1\nops:\n  twice:\n    doc: x times two\n    inputs: 1\n    shape: elementwise\n"
        "    dtypes: [float32]\n    numpy: multiply(x0, 2)\n"
    )
    parse_source(path, "graph", spec_path=[specs])
    parse_source(path, "graph", spec_path=[specs])
    assert parses == [str(path), str(path)]


def test_a_text_with_an_error_raises_every_time(tmp_path, private_cache, parses):
    path = tmp_path / "bad.graph"
    path.write_text(GRAPH.replace("relu(h)", "relu(q)"))
    for _ in range(2):
        with pytest.raises(GraphError, match="undefined name 'q'"):
            parse_source(path, "graph")
    assert parses == [str(path), str(path)]
    assert not (private_cache / "parsed-texts").exists()


def test_a_program_that_reads_a_weights_file_is_parsed_every_time(tmp_path, private_cache, parses):
    """The parse reads the weights file and checks its digest each time: a file changed
    since is still reported."""
    w = np.arange(24, dtype=np.float32).reshape(8, 3)
    data = npz_bytes({"w": w})
    (tmp_path / "w.npz").write_bytes(data)
    path = tmp_path / "w.graph"
    graph = GRAPH.replace(", w: float32[8, 3]", "").replace(
        "{\n  h =", '{\n  w = const float32[8, 3] weights["w"]\n  h =', 1
    )
    path.write_text(f'weights "w.npz" sha256 "{sha256_hex(data)}"\n' + graph)
    first, _ = parse_source(path, "graph")
    np.testing.assert_array_equal(first.functions[0].constants[0].array, w)
    parse_source(path, "graph")
    assert parses == [str(path), str(path)]
    (tmp_path / "w.npz").write_bytes(npz_bytes({"w": w * 2}))
    with pytest.raises(GraphError, match="SHA-256"):
        parse_source(path, "graph")


def test_a_catalog_built_in_code_is_never_remembered(tmp_path, private_cache, parses):
    path = tmp_path / "g.graph"
    path.write_text(GRAPH)
    shipped = byoc.load_catalog()
    in_code = type(shipped)(dict(shipped))  # the same ops, no key
    for _ in range(2):
        parse_source(path, "graph", catalog=in_code)
    assert parses == [str(path), str(path)]


def test_a_warm_run_imports_neither_the_parsers_nor_ruamel(tmp_path):
    """The quick start's warm ``byoc run``: its graph, its host graph, its catalog and
    its spec all come from the disk cache, so neither Lark nor ruamel.yaml is loaded."""
    env = {**os.environ, "BYOC_CACHE_DIR": str(tmp_path / "cache")}
    run = [sys.executable, "-c", "import sys; from byoc.cli import main; sys.exit(main(sys.argv[1:]))"]
    args = ["run", str(ROOT / "examples" / "guide_whole_graph.graph")]
    cold = subprocess.run([*run, *args], env=env, capture_output=True, text=True, check=False)
    assert cold.returncode == 0, cold.stderr
    check = (
        "import sys; from byoc.cli import main; rc = main(sys.argv[1:]); "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'lark', 'ruamel'}))"
    )
    warm = subprocess.run(
        [sys.executable, "-c", check, *args], env=env, capture_output=True, text=True, check=False
    )
    assert warm.returncode == 0, warm.stderr
    assert "every output matches the numpy reference" in warm.stdout
    assert warm.stdout.strip().splitlines()[-1] == "[]"
