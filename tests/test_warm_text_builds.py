"""A second build of the same DSL or ExampleJSON file (byoc/build_records.py,
``text_source_key``): the build finds its record and its libraries and generates
nothing; a change to the text, its file name, its weights file, the backends or the
options is another record; a Program given in code has none."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
from build_counting import count_generations
from conftest import run_cli

import byoc
from byoc.npz_files import npz_bytes, sha256_hex

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
RNG = np.random.default_rng(5)
GRAPH = """graph main(x: float32[4, 8], w: float32[8, 3]) {
  y = @ccompiler {
    h = matmul(x, w)
    return relu(h)
  }
  return y
}
"""


UNMARKED = """graph main(x: float32[4, 8], w: float32[8, 3]) {
  h = matmul(x, w)
  return relu(h)
}
"""


def same_results(a, b, program, graph: str | None = None) -> None:
    """``a`` and ``b`` give the same bits, and the reference's values."""
    fn = program.functions[0]
    given = {p.name: RNG.standard_normal(p.type.shape).astype(np.float32) for p in fn.params}
    (want,) = byoc.evaluate(fn, given)
    (got_a,), (got_b,) = a.run(graph, **given), b.run(graph, **given)
    np.testing.assert_array_equal(got_b, got_a)
    np.testing.assert_allclose(got_a, want, rtol=1e-5, atol=1e-5)


def test_a_second_build_of_a_graph_file_generates_nothing(tmp_path, private_cache, monkeypatch):
    path = tmp_path / "g.graph"
    path.write_text(GRAPH)
    generations = count_generations(monkeypatch)
    cold = byoc.build(path)  # the region names its backend: no --backend needed
    warm = byoc.build(path)
    assert generations[0] == 1
    same_results(cold, warm, byoc.parse_file(path))
    assert [m.backend for m in warm.manifest.modules] == ["ccompiler"]


def test_a_changed_text_or_another_file_name_is_built_again(tmp_path, private_cache, monkeypatch):
    path = tmp_path / "g.graph"
    path.write_text(GRAPH)
    generations = count_generations(monkeypatch)
    byoc.build(path)
    path.write_text(GRAPH.replace("relu(h)", "sigmoid(h)"))  # the same name, another graph
    changed = byoc.build(path)
    assert generations[0] == 2
    same_results(changed, changed, byoc.parse_file(path))
    copy = tmp_path / "copy.graph"  # the same text: its locations name another file
    shutil.copy(path, copy)
    byoc.build(copy)
    assert generations[0] == 3


def test_other_backends_or_options_are_other_records(tmp_path, private_cache, monkeypatch):
    path = tmp_path / "g.graph"
    path.write_text(UNMARKED)
    generations = count_generations(monkeypatch)
    byoc.build(path, backends=["fused"])
    byoc.build(path, backends=["fused"], options={"fused.float32_dots": "false"})
    byoc.build(path, backends=["ccompiler"])
    assert generations[0] == 3
    byoc.build(path, backends=["fused"], options={"fused.float32_dots": "false"})
    assert generations[0] == 3


def test_a_weights_file_with_other_values_is_another_graph(tmp_path, private_cache, monkeypatch):
    """The text names its weights file by digest: new values are a new text."""

    def write(w: np.ndarray) -> Path:
        data = npz_bytes({"w": w})
        (tmp_path / "w.npz").write_bytes(data)
        path = tmp_path / "w.graph"
        constant = '{\n  w = const float32[8, 3] weights["w"]\n  y ='
        graph = GRAPH.replace(", w: float32[8, 3]", "").replace("{\n  y =", constant, 1)
        path.write_text(f'weights "w.npz" sha256 "{sha256_hex(data)}"\n' + graph)
        return path

    generations = count_generations(monkeypatch)
    w = RNG.standard_normal((8, 3)).astype(np.float32)
    first = byoc.build(write(w))
    again = byoc.build(write(w))
    assert generations[0] == 1
    same_results(first, again, byoc.parse_file(tmp_path / "w.graph"))
    other = byoc.build(write(w * 3))
    assert generations[0] == 2
    same_results(other, other, byoc.parse_file(tmp_path / "w.graph"))


def test_a_second_build_of_an_examplejson_file_generates_nothing(tmp_path, private_cache, monkeypatch):
    path = tmp_path / "s.examplejson"
    shutil.copy(EXAMPLES / "guide_subgraph.examplejson", path)
    generations = count_generations(monkeypatch)
    cold = byoc.build(path)
    warm = byoc.build(path)
    assert generations[0] == 1
    program = byoc.parse_file(path)
    same_results(cold, warm, program, program.functions[0].name)


def test_a_program_given_in_code_keeps_no_record(tmp_path, private_cache, monkeypatch):
    program = byoc.parse(GRAPH)
    generations = count_generations(monkeypatch)
    byoc.build(program)
    byoc.build(program)
    assert generations[0] == 2
    assert not (private_cache / "build-records").exists()


def test_byoc_run_twice_generates_once(tmp_path, private_cache, capsys, monkeypatch):
    path = tmp_path / "g.graph"
    path.write_text(GRAPH)
    generations = count_generations(monkeypatch)
    for _ in range(2):
        rc, out, err = run_cli(capsys, "run", path)
        assert rc == 0, err
        assert "every output matches the numpy reference" in out
    assert generations[0] == 1
