"""``byoc examples`` (byoc/cli/examples.py): the shipped examples are installed with the
package, listed, and copied out whole or not at all."""

from __future__ import annotations

from conftest import EXAMPLES, run_cli

from byoc.cli.examples import shipped


def repository_examples() -> dict[str, bytes]:
    """The example files of the repository that the package ships (not its Python module)."""
    return {
        p.relative_to(EXAMPLES).as_posix(): p.read_bytes()
        for p in EXAMPLES.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.name != "__init__.py"
    }


def test_every_example_of_the_repository_is_shipped():
    assert {name: entry.read_bytes() for name, entry in shipped().items()} == repository_examples()


def test_the_list_names_every_runnable_example_with_its_first_line(capsys):
    rc, out, err = run_cli(capsys, "examples")
    assert rc == 0 and err == ""
    listed = {line.split()[0] for line in out.splitlines() if line.startswith("examples/")}
    runnable = {
        f"examples/{n}" for n in repository_examples() if n.endswith((".graph", ".examplejson", ".onnx"))
    }
    assert listed == runnable
    guide = next(line for line in out.splitlines() if line.startswith("examples/guide_whole_graph.graph"))
    first = (EXAMPLES / "guide_whole_graph.graph").read_text().splitlines()[0].lstrip("# ")
    assert guide.endswith(first)


def test_a_copy_runs_where_it_was_written_and_is_never_overwritten(tmp_path, capsys, monkeypatch):
    rc, out, err = run_cli(capsys, "examples", "-o", tmp_path)
    assert rc == 0, err
    copied = {
        p.relative_to(tmp_path / "examples").as_posix(): p.read_bytes()
        for p in (tmp_path / "examples").rglob("*")
        if p.is_file()
    }
    assert copied == repository_examples()
    monkeypatch.chdir(tmp_path)
    rc, out, err = run_cli(capsys, "run", "examples/guide_whole_graph.graph")
    assert rc == 0 and "every output matches" in out
    (tmp_path / "examples" / "mlp.graph").write_text("# mine\n")
    rc, out, err = run_cli(capsys, "examples", "-o", tmp_path)
    assert rc == 2 and "exists" in err and "Traceback" not in err
    assert (tmp_path / "examples" / "mlp.graph").read_text() == "# mine\n"  # untouched
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".examples.")]  # no staging left
