"""ONNX's own backend test suite, ``onnx.backend.test.BackendTest``, run against byoc
(:mod:`byoc.onnx.backend`) on the model tests shipped in the installed onnx wheel
(``onnx/backend/test/data``), in four configurations:

* ``Json``: every op offloaded to the json backend. ``host_fallback=False`` makes an op
  that json does not take an error, so a passing test ran all of its ops on json.
* ``FusedCcompiler``: partitioned over fused, then ccompiler; the host runs the rest.
* ``DnnlFused`` and ``CblasFused``: a library backend first (oneDNN, OpenBLAS), fused
  next, the host the rest; left out when the library is not installed.

How BackendTest (onnx 1.23, ``onnx/backend/test/runner`` and ``loader``) loads each
group, and names its tests ``test_<name>_<device>`` in a class per group:

* ``Real``: ``data/real/*/data.json`` names a light model, ``data/light/light_*.onnx``
  (real architectures whose weights ConstantOfShape makes); the input is BackendTest's
  dummy data (arange / n, written under ``$ONNX_HOME/models/light``), the expected
  output the shipped ``light_*_output_0.pb``.
* ``Simple``, ``PyTorchConverted``, ``PyTorchOperator``: ``data/<kind>/test_*/model.onnx``
  with ``test_data_set_*/{input,output}_*.pb``.
* ``Node``, the node tests of every ONNX op, is out of scope here (tests/test_onnx_node_suite.py
  runs every applicable one). The runner always builds them, which runs every
  op's reference implementation (about 4.5 s, four times): :func:`_runner` hands it no
  node tests instead, and each other group's tests are loaded once for the four
  configurations. The include patterns name only the tests of the four groups above (a
  name such as ``test_shrink`` is both a node and a simple test).

The expected outputs are the judge: nothing here is compared with byoc itself.
"""

from __future__ import annotations

from functools import cache

import pytest

pytestmark = pytest.mark.onnx_suite
pytest.importorskip("onnx")
import onnx.backend.test  # noqa: E402
import onnx.backend.test.runner as runner_module  # noqa: E402
from libraries import missing_library  # noqa: E402
from onnx.backend.test.loader import load_model_tests  # noqa: E402

from byoc.onnx.backend import backend_for  # noqa: E402

CONFIGURATIONS = {
    "Json": backend_for("json", host_fallback=False),
    "FusedCcompiler": backend_for("fused,ccompiler"),
    "DnnlFused": backend_for("dnnl,fused"),
    "CblasFused": backend_for("cblas,fused"),
}
LIBRARIES = {"DnnlFused": "dnnl", "CblasFused": "cblas"}
"""The configurations led by a library backend, and that backend."""
GROUPS = {"Real": "real", "Simple": "simple", "PyTorchConverted": "pytorch-converted"}
GROUPS["PyTorchOperator"] = "pytorch-operator"
"""BackendTest's group (its test class ``OnnxBackend<group>ModelTest``) -> the data kind."""

EXCLUDED = {
    # what cannot apply to byoc, one reason each (matched against test names)
    r"_cuda$": "byoc's backends generate host code: CPU only",
    r"^test_gradient_of_add": "training: the Gradient op (ai.onnx.preview.training domain)",
    r"^test_sequence_model": "sequences: byoc's values are tensors",
    r"^test_strnorm_model": "strings: byoc has no string dtype",
    r"^test_expand_shape_model": "dynamic shapes: Expand's target shape is a model input, known at run time only",
}


@cache
def _model_tests(kind: str) -> tuple:
    """The model tests of one group, loaded once; none of the node group."""
    return () if kind == "node" else tuple(load_model_tests(kind=kind))


def _runner(backend) -> onnx.backend.test.BackendTest:
    """BackendTest for ``backend``, built from :func:`_model_tests` (its loader is
    looked up in its own module when it is built)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(runner_module, "load_model_tests", lambda kind: list(_model_tests(kind)))
        return onnx.backend.test.BackendTest(backend, __name__)


def _suite_names() -> list[str]:
    return sorted(t.name for kind in GROUPS.values() for t in _model_tests(kind))


def _collect() -> dict[str, type]:
    """The test classes of every configuration and group, named Test<config><group>."""
    include = "^(" + "|".join(_suite_names()) + ")_cpu$"
    classes = {}
    for config, backend in CONFIGURATIONS.items():
        if config in LIBRARIES and missing_library(LIBRARIES[config]):
            continue
        runner = _runner(backend).include(include)
        for pattern in EXCLUDED:
            runner.exclude(pattern)
        cases = runner.test_cases
        for group in GROUPS:
            name = f"Test{config}{group}"
            classes[name] = type(name, (cases[f"OnnxBackend{group}ModelTest"],), {"__module__": __name__})
    return classes


@pytest.fixture(autouse=True)
def _onnx_home(tmp_path_factory, monkeypatch):
    """BackendTest writes the light models' dummy inputs under $ONNX_HOME: keep them
    out of the user's home."""
    monkeypatch.setenv("ONNX_HOME", str(tmp_path_factory.getbasetemp() / "onnx_home"))


globals().update(_collect())
