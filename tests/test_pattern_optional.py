"""Families of patterns (`optional:` and `variants:` in a spec's pattern,
spec/pattern_families.py): one pattern with an optional op stands for two, the larger
tried first, with the entry's vars, the op after the result or after a node of the
pattern; a suffix variant (other constants, macros, vars) comes before its pattern and
combines with the optional ops; a graph partitions into each and runs like the
reference; bad entries get located errors."""

from __future__ import annotations

import numpy as np
import pytest

import byoc
from byoc.api import load_backend, load_catalog, parse
from byoc.errors import SpecError
from byoc.generator.partition import partition

SPEC = """\
version: 1
name: fam
kind: c_source
dtypes: [float32]
ranks: [2]
compile: {compiler: cc, language: c, std: c99, flags: [-O1, -Wall, -Wextra, -Werror]}
macros:
  SCALE_ADD:
    inputs: 2
    params: {p_ID_: "${symbol}", p_N_: "${size}", p_ACT_: "${act}"}
    body: |
      static void p_ID_(const float* a, const float* b, float* out) {
        for (int64_t k = 0; k < p_N_; ++k) { const float v = a[k] + b[k]; out[k] = p_ACT_; }
      }
ops:
  add: {macros: {2: SCALE_ADD}, vars: {act: "v"}}
patterns:
  add2:
    doc: an add of two tensors.
    inputs: [a, b]
    match: |
      return add(a, b)
    macros: {2: SCALE_ADD}
    vars: {act: "v"}
    optional:
      relu: {vars: {act: "v > 0 ? v : 0"}}
      negative: {name: add2_negated, vars: {act: "-v"}, doc: "an add, negated."}
"""

GRAPH = """\
graph main(a: float32[3, 4], b: float32[3, 4]) {
  s = add(a, b)
  r = relu(s)
  t = add(r, b)
  n = negative(t)
  u = add(n, a)
  return u
}
"""


def spec_dir(tmp_path, text: str = SPEC):
    (tmp_path / "fam.yaml").write_text(text)
    return [str(tmp_path)]


def test_one_pattern_with_optional_ops_is_three(tmp_path):
    spec = load_backend("fam", spec_dir(tmp_path))
    assert list(spec.patterns) == ["add2_relu", "add2_negated", "add2"]
    relu, negated, base = spec.patterns.values()
    assert [n.op for n in relu.nodes] == ["add", "relu"] and relu.binding.vars == {"act": "v > 0 ? v : 0"}
    assert [n.op for n in negated.nodes] == ["add", "negative"] and negated.binding.vars == {"act": "-v"}
    assert [n.op for n in base.nodes] == ["add"] and base.binding.vars == {"act": "v"}
    assert {p.written_as for p in spec.patterns.values()} == {"add2"}
    assert (relu.doc, negated.doc) == ("an add of two tensors, then relu.", "an add, negated.")
    assert relu.inputs == base.inputs and relu.binding.by_rank == base.binding.by_rank


def test_the_variants_partition_and_run_like_the_reference(tmp_path, rng):
    path = spec_dir(tmp_path)
    program = partition(parse(GRAPH, "graph"), [load_backend("fam", path)], load_catalog())

    def composites(fn) -> list[str]:
        found = []
        for node in fn.nodes:
            if node.callee is not None:
                found += [node.callee.composite] if node.callee.composite else []
                found += composites(node.callee)
        return found

    assert sorted(c for fn in program.functions for c in composites(fn)) == [
        "add2",
        "add2_negated",
        "add2_relu",
    ]
    model = byoc.build(program, spec_path=path)
    a, b = (rng.standard_normal((3, 4)).astype(np.float32) for _ in range(2))
    (got,) = model.run(a=a, b=b)
    np.testing.assert_array_equal(got, byoc.evaluate(parse(GRAPH, "graph").functions[0], {"a": a, "b": b})[0])


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("{nonsense: {}}", "unknown op 'nonsense'"),
        ("{add: {}}", "add does not take one input"),
        ("{relu: {name: add2}}", "makes pattern add2, which the spec defines too"),
        ("{relu: {name: Bad-Name}}", "pattern name 'Bad-Name' must be"),
        ("{relu: {colour: red}}", "colour"),
        ("{relu: 3}", "relu must map to what its pattern changes"),
        ("{}", "lists no op"),
        ("{relu: {vars: {size: x}}}", "size"),
    ],
)
def test_a_bad_optional_entry_is_a_located_spec_error(tmp_path, entry, message):
    text = SPEC.split("    optional:\n")[0] + f"    optional: {entry}\n"
    with pytest.raises(SpecError) as info:
        load_backend("fam", spec_dir(tmp_path, text))
    assert message in info.value.message
    assert info.value.location.file == str(tmp_path / "fam.yaml")
    assert info.value.location.line == text.count("\n")  # the optional: line, the last


def test_the_shipped_specs_families_keep_their_patterns():
    """dnnl's and ccompiler's relu variants are the patterns they wrote out before."""
    dnnl = load_backend("dnnl").patterns
    relu = dnnl["conv_bias_relu_const"]
    assert (relu.written_as, relu.written_in) == ("conv_bias", ("variants", "const"))
    assert [n.op for n in relu.nodes] == ["conv", "bias_add", "relu"]
    assert relu.binding.by_rank == {4: "DNNL_CONV2D_BIAS_PACKED"}
    assert dnnl["conv_bias_relu"].binding.by_rank == {4: "DNNL_CONV2D_BIAS"}
    assert relu.binding.vars == {"relu": "1"} and dnnl["conv_bias_const"].binding.vars == {"relu": "0"}
    assert relu.constants == frozenset({"w"}) and [c.text for c in relu.when] == ["bias_add.axis == 1"]
    dense = load_backend("ccompiler").patterns["dense_bias_relu"]
    assert dense.written_as == "dense_bias" and [n.op for n in dense.nodes] == ["dense", "bias_add", "relu"]


MIDDLE = (
    SPEC[: SPEC.index("    match: |\n")]
    + """    match: |
      s = add(a, b)
      return negative(s)
    macros: {2: SCALE_ADD}
    vars: {act: "-v"}
    optional:
      relu: {after: s, vars: {act: "-(v > 0 ? v : 0)"}}
    variants:
      const: {constants: [b], vars: {act: "-v + 0.0f"}}
"""
)

MIDDLE_GRAPH = """\
graph main(a: float32[3, 4]) {
  b = const float32[3, 4] [0.25, -0.5, 1, 2, -3, 0.75, 0, 4, -1, 0.5, 1.5, -2]
  s = add(a, b)
  r = relu(s)
  n = negative(r)
  t = add(n, a)
  u = negative(t)
  return u
}
"""


def test_an_optional_op_after_a_node_and_a_suffix_variant(tmp_path, rng):
    spec = load_backend("fam", spec_dir(tmp_path, MIDDLE))
    assert list(spec.patterns) == ["add2_relu_const", "add2_relu", "add2_const", "add2"]
    relu = spec.patterns["add2_relu"]
    assert [(n.op, n.inputs) for n in relu.nodes] == [
        ("add", ("a", "b")),
        ("relu", ("s",)),
        ("negative", ("%relu",)),
    ]
    both = spec.patterns["add2_relu_const"]
    assert both.constants == frozenset({"b"}) and both.binding.vars == {"act": "-(v > 0 ? v : 0)"}
    assert spec.patterns["add2_const"].binding.vars == {"act": "-v + 0.0f"}
    assert spec.patterns["add2"].constants == frozenset()
    program = partition(parse(MIDDLE_GRAPH, "graph"), [spec], load_catalog())
    composites = [n.callee.composite for fn in program.functions for n in fn.nodes if n.callee is not None]
    nested = [
        m.callee.composite
        for fn in program.functions
        for n in fn.nodes
        if n.callee
        for m in n.callee.nodes
        if m.callee
    ]
    assert sorted(c for c in composites + nested if c) == ["add2", "add2_relu_const"]
    model = byoc.build(program, spec_path=spec_dir(tmp_path, MIDDLE))
    a = rng.standard_normal((3, 4)).astype(np.float32)
    (got,) = model.run(a=a)
    np.testing.assert_array_equal(got, byoc.evaluate(parse(MIDDLE_GRAPH, "graph").functions[0], {"a": a})[0])


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("    optional: {relu: {after: nowhere}}\n", "after 'nowhere' names no node"),
        ("    variants: {}\n", "lists no variant"),
        ("    variants: {Bad: {}}\n", "suffix 'Bad' must be"),
        ("    variants: {const: {constants: [zz]}}\n", "'zz' is not an input"),
        ("    variants: {const: {colour: red}}\n", "colour"),
        ("    variants: {const: {macros: {2: NO_SUCH}}}\n", "NO_SUCH"),
    ],
)
def test_a_bad_family_entry_is_a_located_spec_error(tmp_path, entry, message):
    text = MIDDLE.split("    optional:\n")[0] + entry
    with pytest.raises(SpecError) as info:
        load_backend("fam", spec_dir(tmp_path, text))
    assert message in info.value.message
    assert info.value.location.file == str(tmp_path / "fam.yaml")
    assert info.value.location.line == text.count("\n")
