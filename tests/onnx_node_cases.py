"""ONNX's node tests, indexed without building them.

``onnx.backend.test.loader.load_model_tests(kind="node")`` builds every node test in
memory, a one-node model and its data sets, by running each op's reference
implementation: about 5 s on this project's machines. A module that parametrizes over
node tests needs only their names, ops and types to collect, so it reads them from the
index recorded in ``tests/data/onnx_node_cases.json`` for the onnx version installed
when it was written; under another onnx version the index is built from the tests
themselves, at collection. The tests are built once per process, when a test first
needs one (:func:`case`). ``test_onnx_node_suite.py`` checks the record against the
installed onnx; rewrite it with::

    .venv/bin/python tests/onnx_node_cases.py

The same module runs a node test through byoc (:func:`run_case`) and reads the two
data files of the suite: which node tests are not applicable
(``tests/data/onnx_node_exclusions.yaml``, written by hand, with reasons) and why each
applicable one that does not pass fails, per configuration
(``tests/data/onnx_node_outcomes.json``, written by a survey)::

    .venv/bin/python tests/onnx_node_cases.py --outcomes   # run them all, rewrite the record

The survey prints the counts per outcome and the ops with no passing test.
"""

from __future__ import annotations

import json
import signal
import sys
from collections import Counter
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
import onnx
from onnx.backend.test.loader import load_model_tests

DATA = Path(__file__).resolve().parent / "data"
RECORD = DATA / "onnx_node_cases.json"
EXCLUSIONS = DATA / "onnx_node_exclusions.yaml"
OUTCOMES = DATA / "onnx_node_outcomes.json"

CONFIGURATIONS = ("json", "fused,ccompiler")
"""The suite's configurations: every op on the ``json`` backend (no host fallback: an
op json does not take fails the case), and ``fused`` then ``ccompiler``, what neither
takes on the host."""


@dataclass(frozen=True)
class CaseInfo:
    """What collection needs of one node test: its name, the op of each node of its
    model, and the TensorProto type names it uses (inputs, outputs, Cast's ``to``)."""

    name: str
    ops: tuple[str, ...]
    types: tuple[str, ...]


def type_names(model) -> tuple[str, ...]:
    """The TensorProto type names a node test's model uses: its inputs', outputs' and
    any ``to`` attribute's (Cast)."""
    names = []
    graph = model.graph
    for value in (*graph.input, *graph.output):
        names.append(onnx.TensorProto.DataType.Name(value.type.tensor_type.elem_type))
    for node in graph.node:
        names += (onnx.TensorProto.DataType.Name(a.i) for a in node.attribute if a.name == "to")
    return tuple(names)


@cache
def cases() -> dict:
    """Every node test of the installed onnx, built (once per process), by name."""
    with np.errstate(all="ignore"):  # the loader's own data builders overflow on purpose
        return {c.name: c for c in load_model_tests(kind="node")}


def case(name: str):
    """The built node test ``name`` (``onnx.backend.test.loader``'s TestCase)."""
    return cases()[name]


def computed_index() -> dict[str, CaseInfo]:
    """The index of the installed onnx's node tests, from the built tests."""
    return {
        c.name: CaseInfo(c.name, tuple(n.op_type for n in c.model.graph.node), type_names(c.model))
        for c in cases().values()
    }


def recorded() -> tuple[str, dict[str, CaseInfo]]:
    """(onnx version, index) as tests/data/onnx_node_cases.json holds them."""
    data = json.loads(RECORD.read_text(encoding="utf-8"))
    return data["onnx"], {
        name: CaseInfo(name, tuple(row["ops"]), tuple(row["types"])) for name, row in data["cases"].items()
    }


@cache
def index() -> dict[str, CaseInfo]:
    """The node tests' index: the record when it is for the installed onnx, else built."""
    version, record = recorded() if RECORD.exists() else (None, {})
    return record if version == onnx.__version__ else computed_index()


def write_record() -> None:
    """Write the installed onnx's index to :data:`RECORD`, one test per line."""
    rows = sorted(computed_index().values(), key=lambda c: c.name)
    lines = [
        f"  {json.dumps(c.name)}: {json.dumps({'ops': list(c.ops), 'types': list(c.types)})}" for c in rows
    ]
    text = f'{{"onnx": {json.dumps(onnx.__version__)}, "cases": {{\n' + ",\n".join(lines) + "\n}}\n"
    RECORD.write_text(text, encoding="utf-8")


# ---------------------------------------------------------------- the suite's data


@dataclass(frozen=True)
class Exclusion:
    """One category of node tests that are not applicable: its reason, and the ops
    and name prefixes that select its tests."""

    category: str
    reason: str
    ops: tuple[str, ...]
    names: tuple[str, ...]

    def matches(self, info: CaseInfo) -> bool:
        return any(op in self.ops for op in info.ops) or info.name.startswith(self.names)


@cache
def exclusions() -> tuple[Exclusion, ...]:
    """The categories of tests/data/onnx_node_exclusions.yaml."""
    from ruamel.yaml import YAML

    table = YAML(typ="safe", pure=True).load(EXCLUSIONS.read_text(encoding="utf-8"))
    return tuple(
        Exclusion(
            name, " ".join(row["reason"].split()), tuple(row.get("ops", ())), tuple(row.get("names", ()))
        )
        for name, row in table.items()
    )


def excluded_by(info: CaseInfo) -> Exclusion | None:
    """The first category that leaves ``info`` out, or None when it is applicable."""
    return next((e for e in exclusions() if e.matches(info)), None)


def applicable() -> list[str]:
    """The names of the applicable node tests, sorted."""
    return sorted(name for name, info in index().items() if excluded_by(info) is None)


def recorded_outcomes() -> dict[str, dict[str, str]]:
    """Per configuration: the applicable node tests that do not pass, with why."""
    return json.loads(OUTCOMES.read_text(encoding="utf-8"))["failures"]


# ---------------------------------------------------------------- running a case


def typed(values, declared) -> list[np.ndarray]:
    """The loader's arrays in the dtypes the model declares, as its ``.pb`` files hold
    them (a Cast case's inputs are built from strings such as "NaN")."""
    out = []
    for value, info in zip(values, declared):
        dtype = onnx.helper.tensor_dtype_to_np_dtype(info.type.tensor_type.elem_type)
        if isinstance(value, onnx.TensorProto):
            value = onnx.numpy_helper.to_array(value)
        with np.errstate(all="ignore"):
            out.append(np.asarray(value).astype(dtype))
    return out


def check(got: np.ndarray, want: np.ndarray, rtol: float, atol: float, name: str) -> None:
    """``got`` equals ONNX's expected ``want``: same dtype and shape, floats within the
    case's tolerances (NaN where it has NaN), integers and bools exactly."""
    from byoc.ir import dtype_name, is_float

    assert got.dtype == want.dtype, (name, got.dtype, want.dtype)
    assert got.shape == want.shape, (name, got.shape, want.shape)
    if is_float(dtype_name(want.dtype) or ""):
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol)
    else:
        np.testing.assert_array_equal(got, want)


@cache
def backend(config: str):
    """The ONNX backend class of a configuration (see :data:`CONFIGURATIONS`)."""
    from byoc.onnx.backend import backend_for

    return backend_for(config, host_fallback=config != "json")


def run_case(config: str, name: str) -> None:
    """Import, build and run node test ``name`` on ``config``, checking every output
    of every data set; raises (ByocError, AssertionError, ...) when it does not pass."""
    node_test = case(name)
    rep = backend(config).prepare(node_test.model)
    graph = node_test.model.graph
    for inputs, outputs in node_test.data_sets:
        inputs, outputs = typed(inputs, graph.input), typed(outputs, graph.output)
        got = rep.run(inputs)
        assert len(got) == len(outputs), (name, len(got), len(outputs))
        for g, w in zip(got, outputs):
            check(np.asarray(g), np.asarray(w), node_test.rtol, node_test.atol, name)


# ---------------------------------------------------------------- the survey


SURVEY_SECONDS = 300
"""A case still running after this long is recorded as a failure (timeout)."""


def _why(exc: BaseException) -> str:
    """A failure's reason for the record: its kind and first line."""
    from byoc.errors import ByocError

    kind = (
        "refused" if isinstance(exc, ByocError) else "wrong" if isinstance(exc, AssertionError) else "error"
    )
    text = str(exc).strip().splitlines()
    first = text[0] if text else type(exc).__name__
    if kind == "error":
        first = f"{type(exc).__name__}: {first}"
    return f"{kind}: {first[:240]}"


def _timeout(signum, frame):
    raise TimeoutError(f"still running after {SURVEY_SECONDS} s")


def survey(config: str) -> dict[str, str]:
    """Run every applicable node test on ``config``: name -> why, for those that fail."""
    failures = {}
    signal.signal(signal.SIGALRM, _timeout)
    for name in applicable():
        signal.alarm(SURVEY_SECONDS)
        try:
            run_case(config, name)
        except Exception as exc:  # noqa: BLE001 - every failure is recorded, by kind
            failures[name] = _why(exc)
        finally:
            signal.alarm(0)
    return failures


def write_outcomes(results: dict[str, dict[str, str]]) -> None:
    """Write the survey's failures to :data:`OUTCOMES`, one test per line."""
    parts = []
    for config, failures in results.items():
        lines = [f"    {json.dumps(n)}: {json.dumps(failures[n])}" for n in sorted(failures)]
        parts.append(f"  {json.dumps(config)}: {{\n" + ",\n".join(lines) + "\n  }")
    text = f'{{"onnx": {json.dumps(onnx.__version__)}, "failures": {{\n' + ",\n".join(parts) + "\n}}\n"
    OUTCOMES.write_text(text, encoding="utf-8")


def report(results: dict[str, dict[str, str]]) -> str:
    """The survey in words: counts per outcome, the exclusions, the ops at zero."""
    everything = index()
    kept = applicable()
    lines = [f"onnx {onnx.__version__}: {len(everything)} node tests, {len(kept)} applicable"]
    for e in exclusions():
        count = sum(1 for info in everything.values() if excluded_by(info) is e)
        lines.append(f"  excluded, {e.category}: {count}")
    for config, failures in results.items():
        kinds = Counter(why.split(":", 1)[0] for why in failures.values())
        passed = len(kept) - len(failures)
        shown = ", ".join(f"{k} {n}" for k, n in sorted(kinds.items()))
        lines.append(f"{config}: {passed} of {len(kept)} pass ({100 * passed / len(kept):.1f}%); {shown}")
        by_op: dict[str, list[int]] = {}
        for name in kept:
            first = everything[name].ops[0] if everything[name].ops else "-"
            by_op.setdefault(first, [0, 0])[name in failures] += 1
        zero = sorted(op for op, (ok, _) in by_op.items() if ok == 0)
        lines.append(f"  ops with no passing test ({len(zero)}): {', '.join(zero)}")
    return "\n".join(lines)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--outcomes"]:
        configs = sys.argv[2:] or list(CONFIGURATIONS)
        results = recorded_outcomes() if OUTCOMES.exists() else {}
        for config in configs:
            results[config] = survey(config)
        write_outcomes({c: results[c] for c in CONFIGURATIONS if c in results})
        print(report({c: results[c] for c in configs}))
    else:
        write_record()
        print(f"wrote {RECORD} ({len(computed_index())} node tests of onnx {onnx.__version__})")
