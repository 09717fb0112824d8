"""ONNX import of a user catalog's own ops (issue 35): an op's ``onnx:`` key names the
ONNX op that imports as it (domain, type, opsets, attributes), read as a row of
byoc/onnx/ops.yaml. Imported models run on the numpy reference and on a copy of the
``fused`` backend, compared with onnxruntime on the same computation in ONNX's own
ops; bad ``onnx:`` keys are located errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import run_cli
from ruamel.yaml import YAML

onnx = pytest.importorskip("onnx")
onnxruntime = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402
from shipped_fused import FUSED_YAML, write_fused_copy  # noqa: E402

import byoc  # noqa: E402
from byoc.errors import GraphError, SpecError  # noqa: E402
from byoc.onnx.model_import import import_onnx, import_program  # noqa: E402
from byoc.spec import ENV_VAR  # noqa: E402

DOMAIN = "com.example"
SHAPE = [3, 4, 5]
CATALOG = """\
version: 1
ops:
  hard_swish:
    doc: x * clamp(alpha * x + beta, 0, 1), the vendor's activation unit.
    inputs: 1
    shape: elementwise
    dtypes: [float32, float64]
    attrs:
      alpha: {type: float}
      beta: {type: float, default: 0.5}
    numpy: multiply(x0, minimum(maximum(add(multiply(alpha, x0), beta), 0), 1))
    c: "${x0} * fmin(fmax(${alpha} * ${x0} + ${beta}, 0), 1)"
    onnx: ONNX
"""
ONNX_LINE = 13
"""The line of ``onnx:`` in CATALOG."""
IMPORTED = f"{{type: HardSwish, domain: {DOMAIN}, opsets: [1, null], attrs: {{alpha: [alpha, 0.16666666666666666], beta: [beta, 0.5]}}}}"


@pytest.fixture(autouse=True)
def no_env_spec_path(monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)


def spec_dir(root: Path, onnx_key: str = IMPORTED, name: str = "specs", op: str = "hard_swish") -> Path:
    """``root/name``: CATALOG with ``onnx_key`` (its op named ``op``), and a copy of the
    shipped fused backend that maps the op."""
    directory = root / name
    directory.mkdir()
    (directory / "ops.yaml").write_text(
        CATALOG.replace("ONNX", onnx_key).replace("hard_swish:", f"{op}:"), encoding="utf-8"
    )
    yaml = YAML(typ="rt")
    fused = yaml.load(FUSED_YAML)
    fused["ops"][op] = {}
    with write_fused_copy(directory).open("w", encoding="utf-8") as out:
        yaml.dump(fused, out)
    return directory


def vendor_model(alpha: float | None = None, version: int = 1):
    """y = HardSwish of com.example on x, with ``alpha`` when given; ONNX opset 14,
    the vendor domain at ``version``."""
    attrs = {} if alpha is None else {"alpha": alpha}
    node = helper.make_node("HardSwish", ["x"], ["y"], domain=DOMAIN, **attrs)
    return _model([node], [helper.make_opsetid("", 14), helper.make_opsetid(DOMAIN, version)])


def onnx_equivalent(alpha: float | None = None):
    """The same computation in ONNX's own ops, which onnxruntime runs: HardSwish, or
    x * HardSigmoid(x) for another slope."""
    if alpha is None:
        nodes = [helper.make_node("HardSwish", ["x"], ["y"])]
    else:
        nodes = [
            helper.make_node("HardSigmoid", ["x"], ["gate"], alpha=alpha, beta=0.5),
            helper.make_node("Mul", ["x", "gate"], ["y"]),
        ]
    return _model(nodes, [helper.make_opsetid("", 14)])


def _model(nodes, opsets):
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, SHAPE)],
    )
    model = helper.make_model(graph, opset_imports=opsets)
    onnx.checker.check_model(model)
    return model


def onnxruntime_output(model, x: np.ndarray) -> np.ndarray:
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (y,) = session.run(None, {"x": x})
    return y


def inputs(seed: int = 3) -> np.ndarray:
    """Values on both sides of the clamp's corners (-beta/alpha and (1-beta)/alpha)."""
    return np.random.default_rng(seed).uniform(-6, 6, SHAPE).astype(np.float32)


# ------------------------------------------------------------------ importing and running


@pytest.mark.parametrize("alpha", [None, 0.25])
def test_an_own_op_imports_and_matches_onnxruntime(tmp_path, alpha):
    specs = spec_dir(tmp_path)
    x = inputs()
    want = onnxruntime_output(onnx_equivalent(alpha), x)
    path = tmp_path / "vendor.onnx"
    path.write_bytes(vendor_model(alpha).SerializeToString())

    program = byoc.parse_file(path, spec_path=specs)
    (fn,) = program.functions
    assert [n.op for n in fn.nodes] == ["hard_swish"]
    (reference,) = byoc.evaluate(fn, {"x": x}, spec_path=specs)
    model = byoc.build(program, backends=["fused"], spec_path=[str(specs)])
    assert [m.backend for m in model.manifest.modules] == ["fused"]
    (fused,) = model(x=x)
    for where, got in (("reference", reference), ("fused", fused)):
        assert got.shape == want.shape and got.dtype == want.dtype, where
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6, err_msg=where)
    assert (want == 0).any() and (want == x).any() and ((want != 0) & (want != x)).any()


def test_onnx_defaults_are_written_where_the_node_leaves_them_out(tmp_path):
    """The op's alpha has no default of its own: ONNX's, from the row, is written; a
    value the node gives replaces it."""
    specs = spec_dir(tmp_path)
    plain = import_onnx(vendor_model(), spec_path=specs).text
    given = import_onnx(vendor_model(alpha=0.25), spec_path=specs).text
    assert "hard_swish(x, alpha=0.16666666666666666, beta=0.5)" in plain
    assert "hard_swish(x, alpha=0.25, beta=0.5)" in given


def test_without_the_spec_path_the_op_is_not_supported(tmp_path):
    spec_dir(tmp_path)
    with pytest.raises(GraphError) as info:
        import_program(vendor_model())
    assert f"byoc does not support op domain {DOMAIN!r}" in info.value.message
    assert "`onnx:` key" in info.value.hint


def test_an_opset_outside_the_range_is_refused_naming_the_entry(tmp_path):
    specs = spec_dir(tmp_path, IMPORTED.replace("[1, null]", "[1, 1]"))
    import_program(vendor_model(version=1), spec_path=specs)
    with pytest.raises(GraphError) as info:
        import_program(vendor_model(version=2), spec_path=specs)
    assert f"does not support {DOMAIN}.HardSwish at opset 2" in info.value.message
    assert f"hard_swish at opsets 1 to 1 ({specs / 'ops.yaml'}:{ONNX_LINE})" in info.value.hint


def test_ops_at_other_opsets_share_an_onnx_op(tmp_path):
    """Two directories' ops import one ONNX op at opsets that do not overlap: the
    model's opset of the domain picks one."""
    old = spec_dir(tmp_path, IMPORTED.replace("[1, null]", "[1, 1]"), "old", "hard_swish_v1")
    new = spec_dir(tmp_path, IMPORTED.replace("[1, null]", "[2, null]"), "new")
    for version, op in ((1, "hard_swish_v1"), (2, "hard_swish")):
        (fn,) = import_program(vendor_model(version=version), spec_path=[old, new]).functions
        assert [n.op for n in fn.nodes] == [op]


def test_two_ops_importing_one_onnx_op_at_one_opset_is_an_error(tmp_path):
    first = spec_dir(tmp_path, IMPORTED, "first")
    second = spec_dir(tmp_path, IMPORTED.replace("[1, null]", "[3, 4]"), "second", "hard_swish_too")
    with pytest.raises(SpecError) as info:
        byoc.load_catalog(spec_path=[first, second])
    error = info.value
    assert error.message == (
        f"op hard_swish_too: onnx: op hard_swish ({first / 'ops.yaml'}:{ONNX_LINE}) imports "
        f"{DOMAIN}.HardSwish already, at opset 1 and later"
    )
    assert (error.location.file, error.location.line) == (str(second / "ops.yaml"), ONNX_LINE)
    assert "split the opsets" in error.hint


# ------------------------------------------------------------------ bad `onnx:` keys


@pytest.mark.parametrize(
    ("key", "message", "at", "hint"),
    [
        ("HardSwish", "op hard_swish: onnx must be a mapping", "HardSwish", None),
        (
            f"{{domain: {DOMAIN}}}",
            "op hard_swish: onnx is missing the required key 'type'",
            "{",
            "add `type:`",
        ),
        ("{type: Foo, version: 3}", "unknown key 'version' in op hard_swish: onnx", "version", "opsets"),
        ("{type: 7}", "op hard_swish: onnx: type must be a string", "7", None),
        ("{type: Hard-Swish}", "type 'Hard-Swish' is not an ONNX op type", "Hard-Swish", "HardSwish"),
        (
            "{type: Foo, domain: com..example}",
            "domain 'com..example' is not an ONNX domain",
            "com..",
            "com.example",
        ),
        ("{type: Foo, opsets: [14]}", "opsets must be [first, last], got 1 entries", "[14]", "[14, null]"),
        ("{type: Foo, opsets: [0, null]}", "opsets: 0 is not an opset", "0,", "[14, null]"),
        ("{type: Foo, opsets: [14, 13]}", "opsets [14, 13] end before they begin", "[14, 13]", "[14, null]"),
        (
            "{type: Foo, attrs: {alpha: alpha}}",
            "attrs: alpha must be [attribute, default]",
            "alpha}",
            "[alpha, 0.2]",
        ),
        (
            "{type: Foo, attrs: {alpha: [gamma, 0.2]}}",
            "attrs: alpha names 'gamma', which is not an attribute of the op",
            "gamma",
            "alpha, beta",
        ),
        ("{type: Foo, attrs: {alpha: [alpha, fast]}}", "attrs: alpha: the default", "fast", "ONNX's default"),
        (
            "{type: Foo, attrs: {alpha: [alpha, 0.2], slope: [alpha, 0.3]}}",
            "attrs: two ONNX attributes set 'alpha'",
            "alpha, 0.3",
            None,
        ),
        ("{type: HardSwish}", "byoc imports ONNX HardSwish itself", "HardSwish", "pattern"),
        ("{type: HardSwish, domain: ai.onnx}", "byoc imports ONNX HardSwish itself", "HardSwish", "pattern"),
    ],
)
def test_a_bad_onnx_key_is_a_located_error(tmp_path, key, message, at, hint):
    specs = spec_dir(tmp_path, key)
    with pytest.raises(SpecError) as info:
        byoc.load_catalog(spec_path=specs)
    error = info.value
    assert message in error.message
    line = CATALOG.replace("ONNX", key).splitlines()[ONNX_LINE - 1]
    assert (error.location.file, error.location.line) == (str(specs / "ops.yaml"), ONNX_LINE)
    assert error.location.column == line.index(at) + 1, (error.location, line)
    if hint is not None:
        assert hint in error.hint


def test_a_complete_catalog_file_is_checked_the_same(tmp_path):
    """A catalog given whole (``byoc.load_catalog(path)``) reads ``onnx:`` keys too."""
    path = tmp_path / "whole.yaml"
    path.write_text(CATALOG.replace("ONNX", "{type: HardSwish}"), encoding="utf-8")
    with pytest.raises(SpecError, match="byoc imports ONNX HardSwish itself"):
        byoc.load_catalog(path)
    path.write_text(CATALOG.replace("ONNX", IMPORTED), encoding="utf-8")
    catalog = byoc.load_catalog(path)
    assert catalog["hard_swish"].onnx.type == "HardSwish"
    assert [n.op for n in import_program(vendor_model(), catalog=catalog).functions[0].nodes] == [
        "hard_swish"
    ]


def test_an_op_of_several_outputs_takes_no_onnx_key(tmp_path):
    specs = tmp_path / "specs"
    specs.mkdir()
    text = """\
version: 1
ops:
  my_top_k:
    inputs: 1
    outputs: 2
    shape: top_k
    attrs:
      k: {type: int}
      axis: {type: int, default: -1}
      largest: {type: bool, default: true}
      sorted: {type: bool, default: true}
    kernel: top_k
    onnx: {type: TopKOfMine, domain: com.example}
"""
    (specs / "ops.yaml").write_text(text, encoding="utf-8")
    with pytest.raises(SpecError) as info:
        byoc.load_catalog(spec_path=specs)
    error = info.value
    assert "op my_top_k: onnx: an op of several outputs does not import from ONNX" in error.message
    assert (error.location.line, error.location.column) == (13, 5)
    assert "remove `onnx:`" in error.hint


def test_byoc_import_and_run_take_the_op_from_the_spec_path(tmp_path, capsys):
    specs = spec_dir(tmp_path)
    path = tmp_path / "vendor.onnx"
    path.write_bytes(vendor_model().SerializeToString())
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    rc, _, err = run_cli(capsys, "import", path, "-o", out_dir, "--spec-path", specs)
    assert rc == 0, err
    assert "hard_swish(" in (out_dir / "vendor.graph").read_text()
    rc, out, err = run_cli(capsys, "run", path, "--backend", "fused", "--spec-path", specs)
    assert rc == 0 and "every output matches" in out, err
    rc, _, err = run_cli(capsys, "import", path, "-o", out_dir)  # without it: not supported
    assert rc == 2 and "HardSwish" in err
