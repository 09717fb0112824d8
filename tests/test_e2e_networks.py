"""The shipped networks through ``byoc run`` on the macro backends (ccompiler, engine):
the results match the numpy reference, and conv / dense really ran on the backend."""

from __future__ import annotations

import pytest
from conftest import EXAMPLES, run_cli

from byoc.api import parse

pytestmark = pytest.mark.network

OFFLOADED = {
    "resnet_basic_block": {"conv", "batch_norm", "relu", "add"},
    "mlp": {"dense", "bias_add", "relu", "softmax"},
}


@pytest.mark.parametrize("backend", ["ccompiler", "engine"])
@pytest.mark.parametrize("name", list(OFFLOADED))
def test_network_runs_on_the_backend(name, backend, capsys):
    path = EXAMPLES / f"{name}.graph"
    rc, out, err = run_cli(capsys, "partition", path, "--backend", backend)
    assert rc == 0, err
    (fn,) = parse(out, "graph").functions
    assert [n.op for n in fn.nodes] == ["call"]  # nothing left on the host
    region = fn.nodes[0].callee
    assert region.backend == backend
    # ops inside a composite (a chain the backend's patterns run as one kernel) count too
    ops = {n.op for node in region.nodes for n in (node.callee.nodes if node.callee else (node,))}
    assert ops == OFFLOADED[name]
    rc, out, err = run_cli(capsys, "run", path, "--backend", backend, "--seed", "5")
    assert rc == 0, err
    assert f"(backends: {backend})" in out
    assert "result: every output matches the numpy reference" in out
