"""Validated catalogs and backend specs kept in the disk cache (byoc/spec/validated_cache.py):
a second process takes them from there and validates nothing; the same objects come
back (references included); an edit to the spec or a file beside it, a spec that reads
an environment variable, a spec with an error and a damaged entry are validated again."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from mini_spec import C_SOURCE

import byoc
from byoc.errors import SpecError
from byoc.spec import backend_loader, ops_loader, search, validated_cache
from byoc.warm_keys import value_digest


@pytest.fixture
def fresh_process(private_cache, monkeypatch):
    """What a new process has: no spec or catalog loaded yet (the in-process caches
    emptied, now and afterwards), and a count of the validations from here on."""
    counts = {"catalog": 0, "backend": 0}
    real_catalog, real_backend = ops_loader.load_catalog_text, backend_loader.load_backend_file

    def catalog(*args, **kwargs):
        counts["catalog"] += 1
        return real_catalog(*args, **kwargs)

    def backend(*args, **kwargs):
        counts["backend"] += 1
        return real_backend(*args, **kwargs)

    monkeypatch.setattr(ops_loader, "load_catalog_text", catalog)
    monkeypatch.setattr(backend_loader, "load_backend_file", backend)

    def clear() -> None:
        ops_loader._load_cached.cache_clear()
        search._load_cached.cache_clear()

    clear()
    counts["clear"] = clear  # type: ignore[assignment]
    yield counts
    clear()


def test_the_second_process_validates_nothing_and_gets_the_same_objects(fresh_process):
    catalog = byoc.load_catalog()
    specs = {name: byoc.load_backend(name, catalog=catalog) for name in ("ccompiler", "fused")}
    assert (fresh_process["catalog"], fresh_process["backend"]) == (1, 2)
    fresh_process["clear"]()
    again = byoc.load_catalog()
    kept = {name: byoc.load_backend(name, catalog=again) for name in specs}
    assert (fresh_process["catalog"], fresh_process["backend"]) == (1, 2)
    assert again is not catalog and again.key == catalog.key
    assert value_digest(again) == value_digest(catalog)
    for name, spec in specs.items():
        assert kept[name] is not spec and kept[name] == spec
        assert kept[name].kind is spec.kind  # the registry's instance (byoc.spec.kinds.KINDS)
    # the references were made again, and compute what the originals do
    x = np.linspace(-3, 3, 12).reshape(3, 4)
    for op in ("add", "relu", "softmax", "sigmoid"):
        inputs = [x, x[::-1]] if op == "add" else [x]
        attrs = {"axis": -1} if op == "softmax" else {}
        want = catalog[op].reference(inputs, attrs)
        np.testing.assert_array_equal(again[op].reference(inputs, attrs), want)


def user_spec(tmp_path):
    folder = tmp_path / "specs"
    folder.mkdir()
    (folder / "mini.yaml").write_text(C_SOURCE)
    return folder


def test_an_edit_to_the_spec_or_a_file_beside_it_is_validated_again(tmp_path, fresh_process):
    folder = user_spec(tmp_path)
    byoc.load_backend("mini", spec_path=[folder])
    fresh_process["clear"]()
    byoc.load_backend("mini", spec_path=[folder])
    assert fresh_process["backend"] == 1
    (folder / "notes.h").write_text("/* a file the spec might read */\n")
    fresh_process["clear"]()
    byoc.load_backend("mini", spec_path=[folder])
    assert fresh_process["backend"] == 2
    (folder / "mini.yaml").write_text(
        C_SOURCE.replace("opt_level: {type: int, default: 2}", "opt_level: {type: int, default: 3}")
    )
    fresh_process["clear"]()
    spec = byoc.load_backend("mini", spec_path=[folder])
    assert fresh_process["backend"] == 3
    assert spec.options["opt_level"].default == 3


def test_a_spec_that_reads_an_environment_variable_is_never_kept(tmp_path, fresh_process, monkeypatch):
    from standin_support import standin_spec

    spec = standin_spec(tmp_path / "specs", "standin_kept", "${STANDIN_KEPT}/include", "${STANDIN_KEPT}/lib")
    found = []
    for where in ("/opt/a", "/opt/b"):
        monkeypatch.setenv("STANDIN_KEPT", where)
        fresh_process["clear"]()
        (req,) = byoc.load_backend("standin_kept", spec_path=[str(spec.parent)]).requires.values()
        found.append(req.where["dirs"]["lib"])
    assert found == [("/opt/a/lib",), ("/opt/b/lib",)]
    assert fresh_process["backend"] == 2


def test_a_spec_with_an_error_raises_it_in_every_process(tmp_path, fresh_process):
    folder = user_spec(tmp_path)
    (folder / "mini.yaml").write_text(C_SOURCE.replace("ranks: [1, 2]", "ranks: [1, 99]"))
    for _ in range(2):
        fresh_process["clear"]()
        with pytest.raises(SpecError):
            byoc.load_backend("mini", spec_path=[folder])
    assert fresh_process["backend"] == 2


def test_a_damaged_entry_is_validated_again_and_replaced(tmp_path, fresh_process, private_cache):
    folder = user_spec(tmp_path)
    byoc.load_backend("mini", spec_path=[folder])
    key = validated_cache._key("backend", folder / "mini.yaml", byoc.load_catalog().key)
    entry = private_cache / validated_cache.KIND / key[:2] / key
    header = entry.read_bytes().split(b"\n", 1)[0]
    entry.write_bytes(header + b"\nnot a pickle")
    fresh_process["clear"]()
    spec = byoc.load_backend("mini", spec_path=[folder])
    assert fresh_process["backend"] == 2 and spec.name == "mini"
    fresh_process["clear"]()
    byoc.load_backend("mini", spec_path=[folder])
    assert fresh_process["backend"] == 2  # the entry was replaced


def test_what_does_not_pickle_is_not_kept():
    assert validated_cache.dumps(lambda: 1) is None
    assert validated_cache.dumps({"a": (1, 2)}) is not None


def test_a_kept_spec_loads_in_a_new_process(private_cache):
    """Across processes (the point of it): a spec kept by one loads in the next, which
    validates nothing, and both see the same spec."""
    code = (
        "import byoc; from byoc.spec import backend_loader as b; from byoc.warm_keys import value_digest; "
        "calls = []; real = b.load_backend_file; "
        "b.load_backend_file = lambda *a, **k: calls.append(1) or real(*a, **k); "
        "spec = byoc.load_backend('fused'); print(len(calls), value_digest(spec))"
    )
    run = [sys.executable, "-c", code]
    outs = [subprocess.run(run, capture_output=True, text=True, check=True).stdout.split() for _ in range(2)]
    assert outs[0][0] == "1" and outs[1][0] == "0"
    assert outs[0][1] == outs[1][1]
