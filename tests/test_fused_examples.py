"""The shipped networks on `--backend fused`: every op offloaded, outputs match numpy."""

from __future__ import annotations

import pytest
from conftest import EXAMPLES, run_cli
from e2e_support import assert_run_ok

from byoc.api import load_backend, parse
from byoc.generator.partition import partition
from byoc.ir import CALL_OP

NETWORKS = {
    "resnet_basic_block": ["conv", "batch_norm", "relu", "conv", "batch_norm", "add", "relu"],
    "mlp": ["dense", "bias_add", "relu", "dense", "bias_add", "relu", "dense", "bias_add", "softmax"],
}


@pytest.mark.parametrize("name", NETWORKS)
def test_every_op_is_offloaded_into_one_region(name):
    path = EXAMPLES / f"{name}.graph"
    (fn,) = partition(parse(path.read_text(), "graph", file=str(path)), [load_backend("fused")]).functions
    assert [n.op for n in fn.nodes if n.op != CALL_OP] == []  # nothing left on the host
    (region,) = [n.callee for n in fn.nodes if n.op == CALL_OP]
    assert region.backend == "fused" and [n.op for n in region.nodes] == NETWORKS[name]


@pytest.mark.parametrize("name", NETWORKS)
def test_byoc_run_matches_the_reference(name, capsys):
    rc, out, err = run_cli(capsys, "run", EXAMPLES / f"{name}.graph", "--backend", "fused")
    assert_run_ok(rc, out, err)
    assert "(backends: fused)" in out
