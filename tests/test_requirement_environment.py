"""A requirement's ``environment:`` (spec/requirements.py): variables a library reads
when it is loaded, set by byoc before it loads the library unless the process sets
them. A stand-in vendor library reads one in its constructor and scales its results
by it, so the outputs show which value the library saw when it loaded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from conftest import run_cli
from standin_support import standin_sdk, standin_spec

from byoc.api import load_backend
from byoc.errors import SpecError
from byoc.spec.requirements import Requirement, load_requirements, requirements_from_record
from byoc.spec.yaml_doc import YamlDoc

LIBM = """\
m:
  headers: [math.h]
  libraries: [m]
  install: it comes with the C library
  from: {dirs: {lib: [/usr/lib]}}
"""


def requirement(body: str) -> Requirement:
    doc = YamlDoc("req.yaml", "requires:\n" + textwrap.indent(textwrap.dedent(body), "  "))
    (req,) = load_requirements(doc, doc.root).values()
    return req


def test_environment_values_are_strings_and_survive_the_bundle_record():
    req = requirement(LIBM + "  environment: {BYOC_A: '10', BYOC_B: 16}\n")
    assert dict(req.environment) == {"BYOC_A": "10", "BYOC_B": "16"}
    record = json.loads(json.dumps({req.name: req.record()}))
    assert record["m"]["environment"] == {"BYOC_A": "10", "BYOC_B": "16"}
    assert requirements_from_record(record, "manifest.json") == (req,)
    assert "environment" not in requirement(LIBM).record()


@pytest.mark.parametrize(
    ("entry", "message", "line"),
    [
        ("environment: [GOMP_SPINCOUNT]", "requirement m: environment must be a mapping", 7),
        ("environment: {1ABC: '1'}", "'1ABC' is not the name of an environment variable", 7),
        ("environment: {A-B: '1'}", "'A-B' is not the name of an environment variable", 7),
        ("environment: {GOMP_SPINCOUNT: true}", "the value must be a string or an integer, got True", 7),
        ("environment: {GOMP_SPINCOUNT: [1]}", "the value must be a string or an integer", 7),
        ("environment: {GOMP_SPINCOUNT: null}", "the value must be a string or an integer, got None", 7),
    ],
)
def test_a_bad_environment_is_a_located_error(entry, message, line):
    with pytest.raises(SpecError) as caught:
        requirement(LIBM + "  " + entry + "\n")
    assert message in caught.value.message
    assert caught.value.location is not None and caught.value.location.line == line


def test_the_shipped_library_specs_bound_their_idle_threads(capsys):
    """oneDNN's GNU OpenMP and OpenBLAS spin for milliseconds after each call unless
    told otherwise; their specs tell them, and `byoc backends` says so."""
    (onednn,) = load_backend("dnnl").requires.values()
    assert onednn.environment["GOMP_SPINCOUNT"] == "10000"
    (openblas,) = load_backend("cblas").requires.values()
    assert openblas.environment["OPENBLAS_THREAD_TIMEOUT"] == "16"
    rc, out, _ = run_cli(capsys, "backends", "dnnl")
    assert rc == 0
    assert "environment (set before it loads, unless already set): GOMP_SPINCOUNT=10000" in out


def test_apply_environment_sets_only_what_the_process_does_not(monkeypatch):
    req = requirement(LIBM + "  environment: {BYOC_TEST_UNSET: '2', BYOC_TEST_SET: '2'}\n")
    monkeypatch.delenv("BYOC_TEST_UNSET", raising=False)
    monkeypatch.setenv("BYOC_TEST_SET", "3")
    assert req.apply_environment() == {"BYOC_TEST_UNSET": "2"}
    assert os.environ["BYOC_TEST_UNSET"] == "2" and os.environ["BYOC_TEST_SET"] == "3"
    assert req.apply_environment() == {}


# ----------------------------------------------- end to end: what the library saw at load

SCALED_C = """\
#include <math.h>
#include <stdlib.h>
#include "NAME.h"
static float scale = 1.0f;
/* read once, when the library is loaded, as GNU OpenMP reads GOMP_SPINCOUNT */
__attribute__((constructor)) static void read_scale(void) {
  const char* text = getenv("SCALED_FACTOR");
  if (text != NULL) scale = (float)atof(text);
}
void NAME_exp(const float* x, float* out, int64_t n) {
  for (int64_t k = 0; k < n; ++k) out[k] = scale * expf(x[k]);
}
"""
RUN = """\
import sys
import numpy as np
import byoc
from byoc.api import parse
specs = sys.argv[1]
graph = "graph main(x: float32[3, 5]) {\\n  y = @scaled { return exp(x) }\\n  return y\\n}\\n"
model = byoc.build(parse(graph, "graph", spec_path=[specs]), spec_path=[specs])
x = np.linspace(-1, 1, 15, dtype=np.float32).reshape(3, 5)
(y,) = model(x=x)
np.save(sys.argv[2], y / np.exp(x.astype(np.float64)))
"""


@pytest.mark.parametrize(("given", "factor"), [(None, 2.0), ("3", 3.0)])
def test_the_library_reads_the_spec_value_unless_the_user_set_one(tmp_path, given, factor):
    """In a fresh process (a library reads its environment once per process): the
    spec's SCALED_FACTOR reaches the library's constructor; a value the user exported
    wins over it."""
    sdk = standin_sdk(tmp_path, "scaled", SCALED_C)
    specs = tmp_path / "specs"
    standin_spec(specs, "scaled", str(sdk / "include"), str(sdk / "lib"), '{SCALED_FACTOR: "2"}')
    env = {k: v for k, v in os.environ.items() if k != "SCALED_FACTOR"}
    env["BYOC_CACHE_DIR"] = str(tmp_path / "cache")
    if given is not None:
        env["SCALED_FACTOR"] = given
    ratio = tmp_path / "ratio.npy"
    script = tmp_path / "run.py"
    script.write_text(RUN)
    out = subprocess.run(
        [sys.executable, str(script), str(specs), str(ratio)], capture_output=True, text=True, env=env
    )
    assert out.returncode == 0, out.stderr
    np.testing.assert_allclose(np.load(ratio), factor, rtol=1e-6)
