"""Memory layouts (a c_source spec's ``layouts:``), generically: a backend of the user's
own (a temporary spec directory) whose kernels read and write a value of rank 4 either
row-major or with its axes in the order [0, 2, 3, 1], as ``${in<k>_layout}`` and
``${out_layout}`` tell them. A value keeps that order only between kernels that all take
it; parameters and outputs stay plain. Its elementwise kernels compute the same values
in any layout, so a layout passed wrongly (or two kernels of different layouts merged)
scrambles the result, which is compared with the numpy reference.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from conftest import random_array, run_cli

import byoc
from byoc.api import evaluate, load_backend, load_catalog, parse
from byoc.generator import generator_for
from byoc.generator.artifacts import Role
from byoc.generator.lowering import lower
from byoc.generator.partition import partition

SPEC = """\
version: 1
name: permuted
kind: c_source
symbol_prefix: permuted
dtypes: [float32]
ranks: [4]
compile:
  compiler: cc
  language: c
  std: c99
  flags: [-O1, -Wall, -Wextra, -Werror]
prelude: |
  #include <stdint.h>
  #define PERMUTED_ITEMS(...) __VA_ARGS__
  #define PERMUTED_LAYOUT_plain 0
  #define PERMUTED_LAYOUT_nhwc 1
  /* The offset of element (n, c, h, w) of a value of extents d stored in `layout`. */
  static inline int64_t permuted_at(const int64_t* d, int layout, int64_t n, int64_t c, int64_t h, int64_t w) {
    return layout ? ((n * d[2] + h) * d[3] + w) * d[1] + c : ((n * d[1] + c) * d[2] + h) * d[3] + w;
  }
layouts:
  nhwc:
    doc: channels last
    permutation: [0, 2, 3, 1]
macros:
  PERMUTED_UNARY:
    inputs: 1
    layouts: {in0: [nhwc], out: [nhwc]}
    params: {p_ID_: "${symbol}", p_SHAPE_: "${shape}", p_EXPR_: "${expr}", p_IN_: "${in0_layout}", p_OUT_: "${out_layout}"}
    body: |
      static void p_ID_(const float* x, float* out) {
        const int64_t d[4] = {PERMUTED_ITEMS p_SHAPE_};
        for (int64_t n = 0; n < d[0]; ++n)
          for (int64_t c = 0; c < d[1]; ++c)
            for (int64_t h = 0; h < d[2]; ++h)
              for (int64_t w = 0; w < d[3]; ++w) {
                const float v = x[permuted_at(d, PERMUTED_LAYOUT_ ## p_IN_, n, c, h, w)];
                out[permuted_at(d, PERMUTED_LAYOUT_ ## p_OUT_, n, c, h, w)] = p_EXPR_;
              }
      }
  PERMUTED_ADD:
    inputs: 2
    layouts: {in0: [nhwc], in1: [nhwc], out: [nhwc]}
    params:
      p_ID_: "${symbol}"
      p_SHAPE_: "${shape}"
      p_A_: "${in0_layout}"
      p_B_: "${in1_layout}"
      p_OUT_: "${out_layout}"
    body: |
      static void p_ID_(const float* a, const float* b, float* out) {
        const int64_t d[4] = {PERMUTED_ITEMS p_SHAPE_};
        for (int64_t n = 0; n < d[0]; ++n)
          for (int64_t c = 0; c < d[1]; ++c)
            for (int64_t h = 0; h < d[2]; ++h)
              for (int64_t w = 0; w < d[3]; ++w) {
                out[permuted_at(d, PERMUTED_LAYOUT_ ## p_OUT_, n, c, h, w)] =
                    a[permuted_at(d, PERMUTED_LAYOUT_ ## p_A_, n, c, h, w)]
                    + b[permuted_at(d, PERMUTED_LAYOUT_ ## p_B_, n, c, h, w)];
              }
      }
  PERMUTED_PLAIN:
    inputs: 1
    params: {p_ID_: "${symbol}", p_N_: "${size}", p_EXPR_: "${expr}"}
    body: |
      static void p_ID_(const float* x, float* out) {
        for (int64_t k = 0; k < p_N_; ++k) {
          const float v = x[k];
          out[k] = p_EXPR_;
        }
      }
ops:
  relu: {macros: {4: PERMUTED_UNARY}, vars: {expr: "v > 0.0f ? v : 0.0f"}}
  negative: {macros: {4: PERMUTED_UNARY}, vars: {expr: "-v"}}
  add: {macros: {4: PERMUTED_ADD}}
  abs: {macros: {4: PERMUTED_PLAIN}, vars: {expr: "v < 0.0f ? -v : v"}}
"""

# a feeds two kernels, b a kernel twice (once with a parameter), c only a kernel that
# takes no layout, f is both an output and read by a kernel, d, e and g are outputs;
# negative(a) is nhwc, negative(f) plain.
GRAPH = """\
graph main(x: float32[2, 3, 4, 5], y: float32[2, 3, 4, 5]) {
  a = relu(x)
  b = negative(a)
  c = add(a, b)
  d = abs(c)
  e = add(b, y)
  f = relu(y)
  g = add(negative(f), negative(a))
  return d, e, f, g
}
"""

WANT = {  # the layout of each value the graph names, as the body's comment shows them
    "a": "nhwc",
    "b": "nhwc",
    "c": "plain",
    "d": "plain",
    "e": "plain",
    "f": "plain",
    "g": "plain",
}


@pytest.fixture
def spec_dir(tmp_path: Path) -> Path:
    specs = tmp_path / "my_specs"  # generated files name the spec by this directory
    specs.mkdir()
    (specs / "permuted.yaml").write_text(SPEC, encoding="utf-8")
    return specs


def generate(spec_dir: Path, graph: str = GRAPH) -> str:
    spec = load_backend("permuted", [spec_dir])
    program = partition(parse(graph, "graph", file="layouts.graph"), [spec], load_catalog())
    externals = lower(program, lambda n: load_backend(n, [spec_dir]), load_catalog()).externals_for(
        "permuted"
    )
    artifacts = generator_for(spec.kind)(externals, spec, load_catalog(), {})
    (source,) = [a for a in artifacts if a.role is Role.MODULE]
    return source.text


def body_layouts(text: str) -> dict[str, str]:
    """Value -> layout, from the body's comment (values it does not list are plain)."""
    note = text[text.index("_: the body of") :]
    note = note[: note.index("*/")]
    found: dict[str, str] = {}
    layout = None
    for line in note.splitlines():
        m = re.search(r"stay in layout (\w+)", line)
        if m:
            layout = m.group(1)
        m = re.match(r"\s*buf\d+: (.*)", line)
        if m and layout is not None:
            found.update((name.strip(), layout) for name in m.group(1).split(","))
    return found


def test_values_keep_a_layout_only_between_kernels_that_all_take_it(spec_dir, golden):
    text = generate(spec_dir)
    assert text == golden("c")
    laid_out = body_layouts(text)
    assert {name: laid_out.get(name, "plain") for name in WANT} == WANT
    # relu(x) and relu(y) differ only in layout (a is nhwc, f an output): two kernels
    relus = [line for line in text.splitlines() if line.startswith("PERMUTED_UNARY(") and "v > 0.0f" in line]
    assert sorted(line.rsplit(",", 2)[1:] for line in relus) == [[" plain", " nhwc)"], [" plain", " plain)"]]


def test_runs_like_the_reference(spec_dir, rng):
    program = parse(GRAPH, "graph", file="layouts.graph")
    model = byoc.build(program, backends=["permuted"], spec_path=[str(spec_dir)])
    fn = program.functions[0]
    inputs = {p.name: random_array(rng, p.type.shape, p.type.dtype) for p in fn.params}
    got, want = model(**inputs), evaluate(fn, inputs)
    assert len(got) == len(want) == 4
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_a_spec_without_layouts_gives_plain_layouts(spec_dir):
    """``${in<k>_layout}`` and ``${out_layout}`` are ``plain`` where a spec has no layouts."""
    text = SPEC[: SPEC.index("layouts:\n  nhwc")] + SPEC[SPEC.index("macros:") :]
    text = text.replace("    layouts: {in0: [nhwc], out: [nhwc]}\n", "")
    text = text.replace("    layouts: {in0: [nhwc], in1: [nhwc], out: [nhwc]}\n", "")
    (spec_dir / "permuted.yaml").write_text(text, encoding="utf-8")
    generated = generate(spec_dir)
    assert "nhwc)" not in generated and "stay in layout" not in generated
    assert load_backend("permuted", [spec_dir]).layouts == {}


def test_byoc_run_with_the_spec_on_the_search_path(spec_dir, tmp_path, capsys):
    graph = tmp_path / "layouts.graph"
    graph.write_text(GRAPH, encoding="utf-8")
    rc, out, err = run_cli(capsys, "--spec-path", spec_dir, "run", graph, "--backend", "permuted")
    assert rc == 0, out + err
    assert "result: every output matches the numpy reference" in out


# ``mixed_layouts: false`` on the unary macro: its input and result take one layout.
TIED_SPEC = SPEC.replace(
    "    layouts: {in0: [nhwc], out: [nhwc]}\n",
    "    layouts: {in0: [nhwc], out: [nhwc]}\n    mixed_layouts: false\n",
)

CHAIN = """\
graph main(x: float32[{shape}]) {{
  a = relu(x)
  b = negative(a)
  c = relu(b)
  d = negative(c)
  return abs(d)
}}
"""


def unary_ports(text: str) -> list[tuple[str, str]]:
    """The (input, result) layouts of each unary kernel, in the order they are defined."""
    return [
        tuple(part.strip(" )") for part in line.rsplit(",", 2)[1:])
        for line in text.splitlines()
        if line.startswith("PERMUTED_UNARY(")
    ]


@pytest.mark.parametrize(
    ("spec", "want"),
    [(SPEC, {"a": "nhwc", "b": "nhwc", "c": "nhwc"}), (TIED_SPEC, {})],
    ids=["mixed", "tied"],
)
def test_a_tied_kernel_sends_its_values_back_to_plain_down_the_chain(spec_dir, spec, want, rng):
    """relu(x) reads a parameter (plain), so a tied relu keeps its result plain; then
    negative(a) reads a plain value, and so on: every value stays plain."""
    (spec_dir / "permuted.yaml").write_text(spec, encoding="utf-8")
    graph = CHAIN.format(shape="2, 3, 4, 5")
    text = generate(spec_dir, graph)
    assert body_layouts(text) == want
    if spec is TIED_SPEC:
        assert set(unary_ports(text)) == {("plain", "plain")}
    else:
        assert ("plain", "nhwc") in unary_ports(text)
    _check_runs(spec_dir, graph, rng)


def test_a_tied_kernel_takes_a_value_whose_bytes_are_the_same_in_its_layout(spec_dir, rng):
    """A (2, 3, 1, 1) value has the same bytes plain and nhwc: the tied relu(x) keeps its
    result nhwc, and gets ``nhwc`` for its plain parameter too; the last negative gets
    ``nhwc`` for its result, which abs reads plain."""
    (spec_dir / "permuted.yaml").write_text(TIED_SPEC, encoding="utf-8")
    graph = CHAIN.format(shape="2, 3, 1, 1")
    text = generate(spec_dir, graph)
    assert body_layouts(text) == {"a": "nhwc", "b": "nhwc", "c": "nhwc"}
    assert set(unary_ports(text)) == {("nhwc", "nhwc")}
    _check_runs(spec_dir, graph, rng)


def _check_runs(spec_dir: Path, graph: str, rng) -> None:
    program = parse(graph, "graph", file="layouts.graph")
    model = byoc.build(program, backends=["permuted"], spec_path=[str(spec_dir)])
    fn = program.functions[0]
    inputs = {p.name: random_array(rng, p.type.shape, p.type.dtype) for p in fn.params}
    (got,), (want,) = model(**inputs), evaluate(fn, inputs)
    np.testing.assert_array_equal(got, want)


def test_a_malformed_argument_of_a_macro_with_layouts_is_a_located_error(tmp_path):
    """The layouts of a macro are checked against its arguments before the arguments'
    own check: an unclosed placeholder there is a located SpecError, not a crash."""
    from byoc.errors import SpecError

    specs = tmp_path / "my_specs"
    specs.mkdir()
    broken = SPEC.replace('p_IN_: "${in0_layout}"', 'p_IN_: "${in0_layout"', 1)
    assert broken != SPEC
    (specs / "permuted.yaml").write_text(broken, encoding="utf-8")
    with pytest.raises(SpecError) as info:
        load_backend("permuted", [specs])
    assert "permuted.yaml:" in str(info.value) and "p_IN_" in str(info.value)


def test_a_malformed_shared_argument_of_a_macro_with_layouts_is_located_where_it_is_written(tmp_path):
    """An argument from the spec's shared ``params:`` (the macro's own leave it empty) is
    checked there too, and the error points at the shared entry (it was a KeyError:
    the check looked for the argument in the macro's own ``params``)."""
    from byoc.errors import SpecError

    specs = tmp_path / "my_specs"
    specs.mkdir()
    shared = SPEC.replace('p_OUT_: "${out_layout}"}', "p_OUT_: }", 1).replace(
        "macros:\n", 'params:\n  p_OUT_: "${out_layout"\nmacros:\n', 1
    )
    assert shared.count('${out_layout"') == 1
    (specs / "permuted.yaml").write_text(shared, encoding="utf-8")
    with pytest.raises(SpecError) as info:
        load_backend("permuted", [specs])
    line = shared.splitlines().index('  p_OUT_: "${out_layout"') + 1
    assert "params (shared): p_OUT_" in info.value.message
    assert (info.value.location.file, info.value.location.line) == (str(specs / "permuted.yaml"), line)
