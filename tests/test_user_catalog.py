"""A spec directory's own op catalog (``ops.yaml``): merged over the shipped one in
search order, used by every command and the API, cached by content, and carried by
bundles. The README's worked example runs in tests/test_spec_readme.py; located
errors are in the bad-input corpus (tests/data/bad/cases.yaml, ``spec-user-*``)."""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

import numpy as np
import pytest
from conftest import run_cli
from ruamel.yaml import YAML

import byoc
import byoc.runtime
from byoc.errors import GraphError, SpecError
from byoc.spec import ENV_VAR, SHIPPED_BACKENDS, find_backends, load_backend, load_catalog

CUBE = "multiply(multiply(x0, x0), x0)"
TWICE = "add(x0, x0)"


def user_dir(root: Path, name: str, ops: dict[str, dict]) -> Path:
    """``root/name/ops.yaml`` holding ``ops``."""
    directory = root / name
    directory.mkdir(exist_ok=True)
    write_catalog(directory, ops)
    return directory


def write_catalog(directory: Path, ops: dict[str, dict]) -> None:
    with (directory / "ops.yaml").open("w", encoding="utf-8") as out:
        YAML(typ="safe", pure=True).dump({"version": 1, "ops": ops}, out)


def unary(numpy: str, doc: str = "") -> dict:
    return {"doc": doc, "inputs": 1, "shape": "elementwise", "dtypes": ["float32", "float64"], "numpy": numpy}


def with_op(backend: str, directory: Path, op: str, binding: dict) -> None:
    """A copy of the shipped ``backend`` spec in ``directory`` that also maps ``op``."""
    yaml = YAML(typ="rt")
    data = yaml.load(SHIPPED_BACKENDS / f"{backend}.yaml")
    data["ops"][op] = binding
    with (directory / f"{backend}.yaml").open("w", encoding="utf-8") as out:
        yaml.dump(data, out)


@pytest.fixture(autouse=True)
def no_env_spec_path(monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)


# ------------------------------------------------------------------ merging and search order


def test_user_ops_join_the_shipped_ones(tmp_path):
    a = user_dir(tmp_path, "a", {"cube": unary(CUBE, "x cubed")})
    catalog = byoc.load_catalog(spec_path=a)
    shipped = load_catalog()
    assert list(catalog) == [*shipped, "cube"]
    assert catalog["cube"].doc == "x cubed" and catalog["cube"].loc.file == str(a / "ops.yaml")
    assert all(catalog[name] == shipped[name] for name in shipped)
    assert byoc.load_catalog() is shipped  # no user catalog on the path: the shipped one


def test_the_first_directory_on_the_search_path_wins(tmp_path, monkeypatch):
    a = user_dir(tmp_path, "a", {"cube": unary(CUBE), "relu": {"doc": "from a"}})
    b = user_dir(tmp_path, "b", {"cube": unary(TWICE), "relu": {"doc": "from b"}})
    ab, ba = byoc.load_catalog(spec_path=[a, b]), byoc.load_catalog(spec_path=[b, a])
    assert (ab["cube"].numpy, ab["relu"].doc) == (CUBE, "from a")
    assert (ba["cube"].numpy, ba["relu"].doc) == (TWICE, "from b")
    monkeypatch.setenv(ENV_VAR, str(b))  # after --spec-path, before the shipped specs
    assert byoc.load_catalog(spec_path=a)["cube"].numpy == CUBE
    assert byoc.load_catalog()["cube"].numpy == TWICE


def test_a_doc_change_may_name_an_op_of_a_later_directory(tmp_path):
    a = user_dir(tmp_path, "a", {"cube": {"doc": "documented in a"}})
    b = user_dir(tmp_path, "b", {"cube": unary(CUBE, "defined in b")})
    catalog = byoc.load_catalog(spec_path=[a, b])
    assert catalog["cube"].doc == "documented in a" and catalog["cube"].numpy == CUBE
    assert catalog.doc_locations["cube"].file == str(a / "ops.yaml")
    with pytest.raises(SpecError, match="there is no op of that name"):
        byoc.load_catalog(spec_path=a)


def test_redefining_a_shipped_op_is_an_error_at_its_name(tmp_path):
    a = user_dir(tmp_path, "a", {"cube": unary(CUBE), "exp": unary("exp(x0)")})
    with pytest.raises(SpecError) as info:
        byoc.load_catalog(spec_path=a)
    error = info.value
    assert "op exp is shipped with byoc" in error.message and "my_exp" in error.hint
    assert (error.location.file, error.location.line, error.location.column) == (str(a / "ops.yaml"), 8, 3)


def test_ops_yaml_is_not_a_backend(tmp_path):
    a = user_dir(tmp_path, "a", {"cube": unary(CUBE)})
    with_op("json", a, "cube", {"kernel": "cube"})
    assert "ops" not in find_backends(a)
    assert find_backends(a)["json"] == a.resolve() / "json.yaml"


# ------------------------------------------------------------------ caching by content


def test_the_merged_catalog_is_cached_by_content(tmp_path):
    a = user_dir(tmp_path, "a", {"cube": unary(CUBE)})
    first = byoc.load_catalog(spec_path=a)
    assert byoc.load_catalog(spec_path=a) is first
    stat = (a / "ops.yaml").stat()
    write_catalog(a, {"cube": unary(TWICE)})
    os.utime(a / "ops.yaml", ns=(stat.st_atime_ns, stat.st_mtime_ns))  # the old mtime: content decides
    second = byoc.load_catalog(spec_path=a)
    assert second["cube"].numpy == TWICE and second.key != first.key


def test_backend_specs_are_rechecked_when_the_catalog_changes(tmp_path):
    a = user_dir(tmp_path, "a", {"cube": unary(CUBE)})
    with_op("json", a, "cube", {"kernel": "cube"})
    assert "cube" in load_backend("json", a).ops
    assert load_backend("json", a) is load_backend("json", a)
    write_catalog(a, {"square_root": unary("sqrt(x0)")})
    with pytest.raises(SpecError, match="unknown op 'cube'") as info:
        load_backend("json", a)
    assert info.value.location.file.endswith("json.yaml")


# ------------------------------------------------------------------ the API and the commands


def test_parse_and_evaluate_take_the_spec_path(tmp_path, rng):
    a = user_dir(tmp_path, "a", {"cube": unary(CUBE)})
    text = "graph g(x: float64[3, 4]) { return cube(x) }"
    with pytest.raises(GraphError, match="unknown op 'cube'"):
        byoc.parse(text)
    fn = byoc.parse(text, spec_path=a).functions[0]
    x = rng.standard_normal((3, 4))
    (out,) = byoc.evaluate(fn, {"x": x}, spec_path=a)
    np.testing.assert_allclose(out, x * x * x, rtol=1e-15)


def test_ops_shows_a_from_column_only_with_a_user_catalog(tmp_path, capsys):
    status, out, _ = run_cli(capsys, "ops")
    assert status == 0 and "from" not in out.splitlines()[0].split()
    a = user_dir(tmp_path, "a", {"cube": unary(CUBE)})
    status, out, _ = run_cli(capsys, "ops", "--spec-path", a)
    rows = {line.split()[0]: [c.strip() for c in line.split("  ")] for line in out.splitlines()}
    assert status == 0 and "from" in rows["op"] and "a/ops.yaml" in rows["cube"]
    status, _, err = run_cli(capsys, "ops", "cub", "--spec-path", a)
    assert status == 2 and "unknown op 'cub'" in err and "did you mean 'cube'?" in err


def test_check_reports_what_a_user_catalog_adds(tmp_path):
    a = user_dir(tmp_path, "a", {"cube": unary(CUBE), "relu": {"doc": "mine"}})
    from byoc.spec import check_spec_file

    assert (
        check_spec_file(a / "ops.yaml")
        == "op catalog of a spec directory (adds 1 op(s), changes the doc of 1)"
    )


# ------------------------------------------------------------------ bundles

GRAPH = """\
graph main(x: float32[5, 6]) {
  a = @json { return cube(x) }
  return cube(a), add(a, x)
}
"""


def test_a_bundle_carries_the_user_catalog(tmp_path, rng):
    """The JSON interpreter and a host op both run the user op from the bundle's catalog."""
    a = user_dir(tmp_path, "a", {"cube": unary(CUBE)})
    with_op("json", a, "cube", {"kernel": "cube"})
    (tmp_path / "g.graph").write_text(GRAPH, encoding="utf-8")
    model = byoc.build(tmp_path / "g.graph", spec_path=[str(a)])
    path = tmp_path / "g.byoc"
    model.save(path)
    with zipfile.ZipFile(path) as archive:
        manifest = json.loads(archive.read("manifest.json"))
        assert manifest["catalogs"] == ["user_ops_1.yaml"]
        assert archive.read("user_ops_1.yaml") == (a / "ops.yaml").read_bytes()
    assert "cube(" in model.text("main.host.graph")  # the second cube runs on the host

    (a / "ops.yaml").unlink()
    loaded = byoc.runtime.load(path)
    assert "cube" in loaded.catalog and "cube" not in byoc.load_catalog(spec_path=a)
    x = rng.uniform(-2, 2, (5, 6)).astype(np.float32)
    program = byoc.parse(loaded.text("source.graph"), catalog=loaded.catalog)
    expected = byoc.evaluate(program.functions[0], {"x": x}, loaded.catalog)
    for got, want in zip(loaded(x=x), expected, strict=True):
        np.testing.assert_array_equal(got, want)
    cubed = (x.astype(np.float64) ** 3).astype(np.float32)
    np.testing.assert_allclose(expected[1], cubed + x, rtol=1e-6)


def test_a_bundle_without_user_ops_has_no_catalogs_key(tmp_path):
    (tmp_path / "g.graph").write_text(GRAPH.replace("cube", "relu"), encoding="utf-8")
    path = tmp_path / "g.byoc"
    byoc.build(tmp_path / "g.graph").save(path)
    with zipfile.ZipFile(path) as archive:
        assert "catalogs" not in json.loads(archive.read("manifest.json"))
    assert byoc.runtime.load(path).catalog is load_catalog()


def test_a_manifest_naming_a_missing_or_mistyped_catalog_is_refused(tmp_path):
    from dataclasses import replace

    from byoc.errors import RuntimeFailure
    from byoc.runtime import Model
    from byoc.runtime.manifest import Manifest

    a = user_dir(tmp_path, "a", {"cube": unary(CUBE)})
    with_op("json", a, "cube", {"kernel": "cube"})
    (tmp_path / "g.graph").write_text(GRAPH, encoding="utf-8")
    model = byoc.build(tmp_path / "g.graph", spec_path=[str(a)])
    with pytest.raises(RuntimeFailure, match="'absent.yaml', which is missing"):
        Model(replace(model.manifest, catalogs=("absent.yaml",)), model.members)
    data = json.loads(model.manifest.with_members(model.members).to_json())
    data["catalogs"] = "user_ops_1.yaml"
    with pytest.raises(RuntimeFailure, match="'catalogs' is not a list of strings"):
        Manifest.from_json(json.dumps(data), "g.byoc")


def test_check_says_a_bad_catalog_once(tmp_path, capsys):
    """Every spec on the path is checked against the directory's catalog; when the
    catalog is bad each check fails on it, and byoc check says so once, not per spec."""
    a = user_dir(tmp_path, "a", {"cube": {**unary(CUBE), "shape_rule": "nosuch"}})
    with_op("json", a, "relu", {"kernel": "relu"})
    status, out, err = run_cli(capsys, "check", "--spec-path", a)
    assert status == 2
    assert err.count("unknown key 'shape_rule' in op cube") == 1, err
