"""``byoc dot``: Graphviz pictures of (partitioned) graphs, as DOT, SVG and PNG."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from conftest import EXAMPLES, GUIDE_WHOLE_GRAPH, run_cli

import byoc.cli.partition
from byoc.api import load_backend, load_catalog, parse_file
from byoc.generator.dot import PALETTE, dot_program
from byoc.generator.lowering import lower
from byoc.generator.partition import partition

ROOT = Path(__file__).resolve().parent.parent
PLAIN_GRAPH = EXAMPLES / "guide_plain_graph.graph"
COMMITTED_DOT = ROOT / "docs" / "guide_whole_graph.dot"
HAS_DOT = shutil.which("dot") is not None
needs_graphviz = pytest.mark.skipif(not HAS_DOT, reason="Graphviz's dot is not installed")

MIXED = """\
graph main(x: float32[4, 3], y: float32[4, 3], bias: float32[3]) {
  k = const float32[3] [1, 2, 3]
  a = add(x, y)
  b = abs(a)
  c = add(multiply(b, y), bias)
  d = concatenate(a, c, axis=1)
  return d, negative(k)
}
"""


def dot_of(capsys, *argv) -> str:
    rc, out, err = run_cli(capsys, "dot", *argv)
    assert rc == 0 and err == "", err
    return out


def check_dot_syntax(text: str) -> None:
    """Graphviz accepts the text (when installed); else a structural check."""
    assert text.startswith("digraph ") and text.rstrip().endswith("}")
    assert text.count("{") == text.count("}")
    if HAS_DOT:
        proc = subprocess.run(["dot", "-Tsvg"], input=text.encode(), capture_output=True, timeout=60)
        assert proc.returncode == 0, proc.stderr.decode()


# ------------------------------------------------------------------ golden DOT


def test_guide_whole_graph_dot(capsys, golden, tmp_path):
    text = dot_of(capsys, GUIDE_WHOLE_GRAPH)
    assert text == golden("dot")
    check_dot_syntax(text)
    # two @ccompiler clusters with their symbols; the host ops stay white
    assert text.count("subgraph cluster_") == 2
    assert 'label="@ccompiler ccompiler_0"' in text and 'label="@ccompiler ccompiler_1"' in text
    fill, border = PALETTE[0]
    assert text.count(f'fillcolor="{fill}"') == 6 and f'color="{border}"' in text
    assert 'label="h = subtract"' in text and 'fillcolor="#ffffff", label="concatenate\\naxis=0"' in text
    # tensor types on the edges, inputs and the output as ellipses
    assert 'label="float32[10, 10]"' in text and 'label="output 0\\nfloat32[30, 10]"' in text
    assert text.count("shape=ellipse") == 10


def test_committed_picture_is_current():
    """docs/guide_whole_graph.dot (behind the README's picture) is what byoc draws now."""
    program = parse_file(GUIDE_WHOLE_GRAPH)
    lowered = lower(program, load_backend, load_catalog())
    assert COMMITTED_DOT.read_text() == dot_program(type(program)(lowered.hosts))
    readme = (ROOT / "README.md").read_text()
    match = re.search(r"!\[[^\]]*\]\((docs/guide_whole_graph\.(?:svg|png))\)", readme)
    assert match, "the README shows the guide's picture"
    picture = ROOT / match.group(1)
    assert picture.is_file() and picture.stat().st_size > 1000


DOT_CASES = {
    "plain_ccompiler": ("plain", ["ccompiler"]),
    "plain_unpartitioned": ("plain", []),
    "plain_engine_json": ("plain", ["engine", "json"]),
    "mixed_ccompiler_json": ("mixed", ["ccompiler", "json"]),
}


@pytest.mark.parametrize(("source", "backends"), list(DOT_CASES.values()), ids=list(DOT_CASES))
def test_partitioned_dot(source, backends, capsys, golden, tmp_path):
    path = PLAIN_GRAPH if source == "plain" else tmp_path / "mixed.graph"
    if source == "mixed":
        path.write_text(MIXED)
    argv = [path]
    for b in backends:
        argv += ["--backend", b]
    text = dot_of(capsys, *argv)
    assert text == golden("dot")
    check_dot_syntax(text)
    program = parse_file(path)
    if backends:
        program = partition(program, [load_backend(b) for b in backends])
    calls = [n for n in program.functions[0].nodes if n.callee is not None]
    assert text.count("subgraph cluster_") == len(calls)
    # one colour per backend, in order of first appearance
    seen = list(dict.fromkeys(n.callee.backend for n in calls))
    for k, backend in enumerate(seen):
        fill, border = PALETTE[k]
        assert re.search(
            rf'label="@{backend} \w+"; style="rounded,filled"; fillcolor="{fill}80"; color="{border}"', text
        )
    if seen:
        assert f'label="main: {", ".join("@" + b for b in seen)}; white boxes run on the host"' in text
    else:
        assert "white boxes" not in text


def test_plain_graph_ccompiler_clusters(capsys):
    text = dot_of(capsys, PLAIN_GRAPH, "--backend", "ccompiler")
    clusters = re.findall(r"subgraph (cluster_\d+) \{\n\s+label=\"([^\"]+)\"", text)
    assert [label for _, label in clusters] == [
        "@ccompiler ccompiler_0",
        "@ccompiler ccompiler_1",
        "@ccompiler ccompiler_2",
    ]
    # concatenate is drawn outside every cluster, on the host
    body = text.split("subgraph")[-1]
    closing = body.index("\n  }\n")
    assert "concatenate" in body[closing:]


# ------------------------------------------------------------------ SVG, PNG and DOT files


@needs_graphviz
def test_svg_output(capsys, tmp_path):
    out = tmp_path / "guide.svg"
    rc, stdout, err = run_cli(capsys, "dot", PLAIN_GRAPH, "--backend", "ccompiler", "-o", out)
    assert rc == 0 and err == ""
    assert stdout == f"wrote {out}\n"
    root = ET.parse(out).getroot()
    assert root.tag.endswith("svg")
    text = out.read_text()
    assert "ccompiler_0" in text and "concatenate" in text


@needs_graphviz
def test_png_output(capsys, tmp_path):
    out = tmp_path / "guide.PNG"  # the suffix is case-insensitive
    rc, stdout, err = run_cli(capsys, "dot", GUIDE_WHOLE_GRAPH, "-o", out)
    assert rc == 0 and err == ""
    data = out.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 1000


@pytest.mark.parametrize("suffix", ["dot", "gv"])
def test_dot_file_output(suffix, capsys, tmp_path):
    out = tmp_path / f"guide.{suffix}"
    rc, stdout, err = run_cli(capsys, "dot", GUIDE_WHOLE_GRAPH, "-o", out)
    assert rc == 0 and stdout == f"wrote {out}\n"
    assert out.read_text() == dot_of(capsys, GUIDE_WHOLE_GRAPH)


@pytest.mark.parametrize("suffix", ["svg", "png"])
def test_without_graphviz(suffix, capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(byoc.cli.partition.shutil, "which", lambda name, *a, **k: None)
    out = tmp_path / f"guide.{suffix}"
    rc, stdout, err = run_cli(capsys, "dot", GUIDE_WHOLE_GRAPH, "-o", out)
    assert rc == 2 and stdout == ""
    assert "Traceback" not in err
    assert err.startswith("usage error: ")
    assert f"writing {out} needs Graphviz's `dot`, which is not installed" in err
    assert "apt-get install graphviz" in err and "brew install graphviz" in err
    assert "-o out.dot" in err
    assert not out.exists()
    # DOT output does not need Graphviz
    rc, _, err = run_cli(capsys, "dot", GUIDE_WHOLE_GRAPH, "-o", tmp_path / "guide.dot")
    assert rc == 0, err


def test_without_graphviz_on_path(tmp_path):
    """The same through a real PATH without `dot`, in a subprocess."""
    out = tmp_path / "guide.svg"
    env = {**os.environ, "PATH": str(tmp_path / "empty")}
    proc = subprocess.run(
        [sys.executable, "-m", "byoc", "dot", str(GUIDE_WHOLE_GRAPH), "-o", str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "needs Graphviz's `dot`" in proc.stderr and "apt-get install graphviz" in proc.stderr
    assert not out.exists()


@pytest.mark.parametrize("name", ["guide.jpg", "guide", "guide.svg.txt"])
def test_bad_suffix(name, capsys, tmp_path):
    out = tmp_path / name
    rc, stdout, err = run_cli(capsys, "dot", GUIDE_WHOLE_GRAPH, "-o", out)
    assert rc == 2 and "Traceback" not in err
    assert f"cannot tell the picture format of {str(out)!r}" in err
    assert "use a .dot, .svg or .png file name" in err
    assert not out.exists()


def test_dot_errors(capsys):
    rc, _, err = run_cli(capsys, "dot", PLAIN_GRAPH, "--backend", "nosuch")
    assert rc == 2 and "nosuch" in err and "Traceback" not in err
    rc, _, err = run_cli(capsys, "dot", PLAIN_GRAPH, "--backend", "ccompiler", "--option", "opt_level=1")
    assert rc == 2 and "--option does not change partitioning" in err


TWO_GRAPHS = """\
graph first(x: float32[4], y: float32[4]) {
  a = add(x, y)
  return abs(a)
}

graph second(x: float32[3], y: float32[3]) {
  k = const float32[3] [1, 2, 3]
  return add(x, y), negative(k)
}
"""


def test_two_graphs_are_one_digraph(capsys, tmp_path):
    path = tmp_path / "two.graph"
    path.write_text(TWO_GRAPHS)
    text = dot_of(capsys, path, "--backend", "ccompiler")
    check_dot_syntax(text)
    assert text.count("digraph ") == 1 and text.startswith('digraph "graphs" {\n')
    # one cluster per graph, labelled with its name, holding that graph's nodes
    assert re.findall(r"subgraph (cluster_g\d+) \{\n\s+label=\"(\w+)", text) == [
        ("cluster_g0", "first"),
        ("cluster_g1", "second"),
    ]
    first, second = text.split("subgraph cluster_g1 {")
    assert 'label="@ccompiler ccompiler_0"' in first and "g0_in1" in first and "g1_" not in first
    assert 'label="@ccompiler ccompiler_1"' in second and "g1_const0" in second and "g0_" not in second
    # every node id is defined once, however many graphs use the same names
    ids = re.findall(r"^\s+(\w+) \[", text, flags=re.M)
    assert len(ids) == len(set(ids)) and {"g0_in0", "g1_in0", "g0_out0", "g1_out1"} <= set(ids)
    # a one-graph program keeps its own digraph, without the prefixes
    program = parse_file(path)
    single = dot_program(type(program)(program.functions[1:]))
    assert single.startswith('digraph "second" {') and "g1_" not in single and "cluster_g" not in single


@needs_graphviz
def test_two_graphs_svg(capsys, tmp_path):
    path = tmp_path / "two.graph"
    path.write_text(TWO_GRAPHS)
    out = tmp_path / "two.svg"
    rc, stdout, err = run_cli(capsys, "dot", path, "--backend", "ccompiler", "-o", out)
    assert rc == 0 and err == "" and stdout == f"wrote {out}\n"
    root = ET.parse(out).getroot()  # one well-formed document, not two concatenated ones
    ns = {"svg": "http://www.w3.org/2000/svg"}
    titles = [t.text for t in root.iterfind(".//svg:g[@class='cluster']/svg:title", ns)]
    assert titles[:1] == ["cluster_g0"] and "cluster_g1" in titles
    labels = [t.text for t in root.iterfind(".//svg:text", ns)]
    assert "first: @ccompiler; white boxes run on the host" in labels
    assert "second: @ccompiler; white boxes run on the host" in labels
    png = tmp_path / "two.png"
    assert run_cli(capsys, "dot", path, "-o", png)[0] == 0
    data = png.read_bytes()  # one PNG: one signature, one end chunk
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and data.count(b"\x89PNG") == 1
    assert data.count(b"IEND") == 1


# ------------------------------------------------------------------ determinism


def test_dot_is_deterministic(capsys, tmp_path):
    path = tmp_path / "mixed.graph"
    path.write_text(MIXED)
    first = dot_of(capsys, path, "--backend", "ccompiler", "--backend", "json")
    assert dot_of(capsys, path, "--backend", "ccompiler", "--backend", "json") == first
    # and across processes with different hash seeds
    outs = set()
    for seed in ("1", "2"):
        proc = subprocess.run(
            [sys.executable, "-m", "byoc", "dot", str(path), "--backend", "ccompiler", "--backend", "json"],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
        outs.add(proc.stdout)
    assert outs == {first}
