"""Malformed backend specs: each must raise a SpecError at the right line and column.

Every case starts from a small valid spec of one kind, changes one thing, and asserts
the message, the 1-based line and column, and (where it matters) the hint.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from mini_spec import C_SOURCE

from byoc.errors import SpecError
from byoc.spec import load_backend_file

ENGINE = """\
version: 1
name: mini
kind: engine
dtypes: [float32]
ranks: [2]
compile: {language: c++}
macros:
  BIN:
    params: {p_ID_: "${layer}", p_OP_: "${operator}"}
    body: |
      inline void p_ID_(const int64_t* d, const ${ctype}* const* in, ${ctype}* out) {
        for (int64_t k = 0; k < d[0] * d[1]; ++k) out[k] = in[0][k] p_OP_ in[1][k];
      }
layers:
  add_2d: {macro: BIN, inputs: 2, rank: 2, vars: {operator: "+"}}
ops:
  add: {layers: {2: add_2d}}
graph_line: "${layer};${output};${inputs};${dims}"
layer_entry: '{"${layer}", &${layer}, ${inputs}, ${rank}},'
invoke: "return Engine().run(${graph}, {${args}});"
engine: |
  // the engine, with its layer table:
  ${layer_table}
"""

EXAMPLEJSON = """\
version: 1
name: mini
kind: examplejson
dtypes: [float32]
ranks: [1, 2]
ops:
  add: {token: add}
  subtract: {token: sub}
"""

JSON = """\
version: 1
name: mini
kind: json
dtypes: [float32, int32]
ranks: [1, 2]
ops:
  add: {kernel: add}
  relu: {kernel: nn.relu}
"""

C_SOURCE_LAYOUTS = """\
version: 1
name: mini
kind: c_source
dtypes: [float32]
ranks: [1, 2]
compile:
  language: c
layouts:
  swapped:
    permutation: [1, 0]
macros:
  BIN_2D:
    inputs: 2
    layouts: {in0: [swapped], out: [swapped]}
    params: {p_ID_: "${symbol}", p_N_: "${size}", p_A_: "${in0_layout}", p_OUT_: "${out_layout}"}
    body: |
      static void p_ID_(const float* a, const float* b, float* out) {
        for (int i = 0; i < p_N_; ++i) out[i] = a[i] + b[i] + p_A_ + p_OUT_;
      }
ops:
  add:
    macros: {2: BIN_2D}
"""

BASES = {"c_source": C_SOURCE, "engine": ENGINE, "examplejson": EXAMPLEJSON, "json": JSON}


def write_spec(directory: Path, text: str, name: str = "mini") -> Path:
    path = directory / f"{name}.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def edit(base: str, old: str, new: str) -> str:
    assert base.count(old) == 1, f"{old!r} must occur once in the base spec"
    return base.replace(old, new)


@pytest.mark.parametrize("kind", list(BASES))
def test_base_specs_are_valid(tmp_path, kind):
    spec = load_backend_file(write_spec(tmp_path, BASES[kind]))
    assert spec.kind.name == kind and spec.name == "mini"


def test_layouts_base_spec_is_valid(tmp_path):
    spec = load_backend_file(write_spec(tmp_path, C_SOURCE_LAYOUTS))
    assert spec.layouts["swapped"].permutation == (1, 0) and spec.layouts["swapped"].rank == 2
    assert dict(spec.macros["BIN_2D"].layouts) == {"in0": ("swapped",), "out": ("swapped",)}


# (id, base, old text, new text, line, column, message fragment)
# fmt: off
CASES = [
    ("unknown-key", C_SOURCE, "symbol_prefix: mini", "symbol_prefx: mini", 4, 1, "unknown key 'symbol_prefx'"),
    ("missing-key", C_SOURCE, "ranks: [1, 2]\n", "", 1, 1, "missing the required key 'ranks'"),
    ("missing-kind", JSON, "kind: json\n", "", 1, 1, "missing the required key 'kind'"),
    ("bad-identifier", C_SOURCE, "symbol_prefix: mini", "symbol_prefix: 9lives", 4, 16, "not a valid C identifier"),
    ("c-keyword-symbol", C_SOURCE, "symbol_prefix: mini", "symbol_prefix: static", 4, 16, "C or C++ keyword"),
    ("reserved-symbol", C_SOURCE, "symbol_prefix: mini", "symbol_prefix: __mini", 4, 16, "reserved in C"),
    ("unknown-op", C_SOURCE, "  add:\n", "  addd:\n", 21, 3, "unknown op 'addd'"),
    (
        "undefined-placeholder-in-body",
        C_SOURCE,
        "out[i] = a[i]",
        "out[i] = ${nope} + a[i]",
        18,
        49,
        "undefined placeholder ${nope}",
    ),
    (
        "undefined-placeholder-in-argument",
        C_SOURCE,
        'p_OP_: "${operator}"',
        'p_OP_: "${operatr}"',
        15,
        42,
        "undefined placeholder ${operatr}",
    ),
    ("duplicate-op", JSON, "  relu: {kernel: nn.relu}\n", "  add: {kernel: plus}\n", 8, 3, "duplicate key 'add'"),
    ("wrong-type-ranks", C_SOURCE, "ranks: [1, 2]", "ranks: 2", 6, 8, "ranks must be a list"),
    ("wrong-type-version", JSON, "version: 1", "version: one", 1, 10, "version must be an integer"),
    ("unsupported-version", JSON, "version: 1", "version: 2", 1, 10, "unsupported backend spec version"),
    ("unknown-kind", JSON, "kind: json", "kind: cuda", 3, 7, "unknown codegen kind 'cuda'"),
    ("undefined-macro", C_SOURCE, "macros: {1: BIN_1D}", "macros: {1: BIN_1DD}", 22, 17, "undefined macro 'BIN_1DD'"),
    ("undefined-layer", ENGINE, "{layers: {2: add_2d}}", "{layers: {2: add2d}}", 17, 21, "undefined layer 'add2d'"),
    ("kind-cannot-dtype", EXAMPLEJSON, "dtypes: [float32]", "dtypes: [float32, float64]", 4, 19, "cannot generate float64"),
    ("engine-one-dtype", ENGINE, "dtypes: [float32]", "dtypes: [float32, int32]", 4, 19, "exactly one dtype"),
    ("unknown-dtype", JSON, "dtypes: [float32, int32]", "dtypes: [float32, complex64]", 4, 19, "unknown dtype 'complex64'"),
    ("rank-out-of-range", JSON, "ranks: [1, 2]", "ranks: [1, 40]", 5, 12, "rank 40 is out of range"),
    ("op-rank-not-declared", C_SOURCE, "macros: {1: BIN_1D}", "macros: {3: BIN_1D}", 22, 14, "rank 3 is not one of"),
    ("macro-name-keyword", C_SOURCE, "  BIN_1D:\n", "  int:\n", 13, 3, "C or C++ keyword"),
    ("layer-bad-identifier", ENGINE, "  add_2d: {macro", "  add-2d: {macro", 15, 3, "not a valid C identifier"),
    ("layer-named-like-macro", ENGINE, "  add_2d: {macro", "  BIN: {macro", 15, 3, "duplicate name 'BIN'"),
    ("duplicate-macro", C_SOURCE, "ops:\n", "  BIN_1D: {params: {}, body: x}\nops:\n", 20, 3, "duplicate key 'BIN_1D'"),
    (
        "rank-too-low-for-dim",
        C_SOURCE,
        'p_N_: "${dim0}"',
        'p_N_: "${dim1}"',
        22,
        17,
        "uses macro BIN_1D at rank 1, but its argument p_N_ needs ${dim1}",
    ),
    (
        "missing-var",
        C_SOURCE,
        '    vars: {operator: "+"}\n',
        '  subtract:\n    macros: {1: BIN_1D}\n    vars: {operator: "-"}\n',
        22,
        17,
        "op add uses macro BIN_1D, whose argument p_OP_ needs ${operator}, but op add has no var 'operator'",
    ),
    ("duplicate-token", EXAMPLEJSON, "{token: sub}", "{token: add}", 8, 21, "duplicate token 'add'"),
    ("reserved-token", EXAMPLEJSON, "{token: sub}", "{token: input}", 8, 21, "token 'input' is not valid"),
    ("duplicate-kernel", JSON, "{kernel: nn.relu}", "{kernel: add}", 8, 18, "duplicate kernel 'add'"),
    ("option-default-type", C_SOURCE, "default: 2}", "default: two}", 11, 35, "must be int"),
    ("option-shadows-builtin", C_SOURCE, "  opt_level: {type", "  symbol: {type", 11, 3, "taken by a placeholder"),
    ("name-not-file-name", JSON, "name: mini", "name: other", 2, 7, "must be in a file named other.yaml"),
    ("stray-dollar-in-flag", C_SOURCE, '"-O${opt_level}", -Wall', '"-O${opt_level}", -W$all', 9, 31, "a '$' that starts no"),
    ("kind-cannot-op", C_SOURCE, "  add:\n", "  concatenate:\n", 21, 3, "cannot implement concatenate"),
    ("kind-cannot-attrs", EXAMPLEJSON, "  subtract: {token", "  concatenate: {token", 8, 3, "cannot carry the attributes"),
    ("wrong-language", C_SOURCE, "language: c\n", "language: c++\n", 8, 13, "language is c, not 'c++'"),
    ("unused-param", C_SOURCE, 'p_N_: "${dim0}"}', 'p_N_: "${dim0}", p_X_: "${size}"}', 15, 73, "p_X_ is not used"),
    ("body-backslash", C_SOURCE, "++i) out[i]", "++i) \\\n        out[i]", 18, 40, "do not end body lines with a backslash"),
    ("body-directive", ENGINE, "      inline void", "      #include <x>\n      inline void", 11, 7, "preprocessor directive"),
    ("layer-arity", ENGINE, "inputs: 2, rank: 2", "inputs: 1, rank: 2", 17, 21, "takes 1 inputs but add takes 2"),
    ("missing-template", ENGINE, 'invoke: "return Engine().run(${graph}, {${args}});"\n', "", 1, 1, "missing the required key 'invoke'"),
    ("undefined-in-template", ENGINE, "{${args}}", "{${argv}}", 20, 41, "undefined placeholder ${argv} in invoke"),
    ("bad-kernel-name", JSON, "{kernel: nn.relu}", "{kernel: nn..relu}", 8, 18, "kernel 'nn..relu' is not valid"),
    ("ops-not-mapping", JSON, "  add: {kernel: add}\n  relu: {kernel: nn.relu}\n", "", 6, 1, "ops must be a mapping"),
    ("ops-is-a-list", JSON, "  add: {kernel: add}\n  relu: {kernel: nn.relu}\n", "  - add\n", 7, 3, "ops must be a mapping"),
    ("macro-arity", C_SOURCE, '    vars: {operator: "+"}\n', '    vars: {operator: "+"}\n  relu: {macros: {1: BIN_1D}}\n', 24, 22, "macro BIN_1D takes 2 inputs but relu takes 1"),
    ("macro-inputs-type", C_SOURCE, "    inputs: 2\n", "    inputs: two\n", 14, 13, "inputs must be an integer"),
    ("invalid-yaml", JSON, "ranks: [1, 2]", "ranks: [1, 2", 6, 4, "invalid YAML"),
    ("layout-unknown", C_SOURCE_LAYOUTS, "{in0: [swapped], out", "{in0: [swaped], out", 14, 21, "unknown layout 'swaped' for in0"),
    ("layout-port-out-of-range", C_SOURCE_LAYOUTS, "{in0: [swapped], out", "{in2: [swapped], out", 14, 15, "'in2' is not a port of its kernel"),
    ("layout-lists-plain", C_SOURCE_LAYOUTS, "{in0: [swapped], out", "{in0: [plain], out", 14, 21, "in0 lists plain"),
    ("layout-lists-none", C_SOURCE_LAYOUTS, "{in0: [swapped], out", "{in0: [], out", 14, 20, "the layouts of in0 list none"),
    ("layout-twice", C_SOURCE_LAYOUTS, "{in0: [swapped], out", "{in0: [swapped, swapped], out", 14, 30, "lists layout swapped twice"),
    ("layout-not-a-permutation", C_SOURCE_LAYOUTS, "permutation: [1, 0]", "permutation: [1, 1]", 10, 18, "[1, 1] is not a permutation of the axes 0 to 1"),
    ("layout-identity", C_SOURCE_LAYOUTS, "permutation: [1, 0]", "permutation: [0, 1]", 10, 18, "the identity permutation is the plain layout"),
    ("layout-no-such-rank", C_SOURCE_LAYOUTS, "permutation: [1, 0]", "permutation: [2, 0, 1]", 10, 18, "no rank 3"),
    ("layout-not-a-list", C_SOURCE_LAYOUTS, "permutation: [1, 0]", "permutation: 10", 10, 18, "permutation must be a list"),
    ("layout-named-plain", C_SOURCE_LAYOUTS, "  swapped:\n    perm", "  plain:\n    perm", 9, 3, "layout name 'plain' is byoc's own"),
    ("layout-unread", C_SOURCE_LAYOUTS, 'p_OUT_: "${out_layout}"', 'p_OUT_: "${size}"', 14, 31, "no argument reads ${out_layout}"),
    ("layout-placeholder-index", C_SOURCE_LAYOUTS, 'p_N_: "${size}"', 'p_N_: "${in2_layout}"', 15, 41, "the kernel takes 2 input(s)"),
    ("layout-rank-mismatch", C_SOURCE_LAYOUTS, "macros: {2: BIN_2D}", "macros: {1: BIN_2D}", 22, 17, "at rank 1, but its result takes layout swapped, of rank 2"),
    ("layout-on-engine", ENGINE, "  BIN:\n", "  BIN:\n    layouts: {}\n", 9, 5, "unknown key 'layouts'"),
    ("mixed-layouts-type", C_SOURCE_LAYOUTS, "out: [swapped]}\n", "out: [swapped]}\n    mixed_layouts: 0\n", 15, 20, "mixed_layouts must be a boolean, got an integer 0"),
    ("mixed-layouts-one-port", C_SOURCE_LAYOUTS, ", out: [swapped]}\n", "}\n    mixed_layouts: false\n", 15, 20, "layouts lists only in0"),
    ("mixed-layouts-on-engine", ENGINE, "  BIN:\n", "  BIN:\n    mixed_layouts: false\n", 9, 5, "unknown key 'mixed_layouts'"),
    ("overwrites-no-such-input", C_SOURCE_LAYOUTS, "    inputs: 2\n", "    inputs: 2\n    overwrites: in2\n", 14, 17, "'in2' is not an input of its kernel"),
    ("overwrites-the-result", C_SOURCE_LAYOUTS, "    inputs: 2\n", "    inputs: 2\n    overwrites: out\n", 14, 17, "'out' is not an input"),
    ("overwrites-not-a-name", C_SOURCE_LAYOUTS, "    inputs: 2\n", "    inputs: 2\n    overwrites: 1\n", 14, 17, "overwrites must be a string"),
    ("overwrites-on-engine", ENGINE, "  BIN:\n", "  BIN:\n    overwrites: in0\n", 9, 5, "unknown key 'overwrites'"),
]
# fmt: on


@pytest.mark.parametrize(
    ("base", "old", "new", "line", "column", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_malformed_spec_is_located(tmp_path, base, old, new, line, column, message):
    path = write_spec(tmp_path, edit(base, old, new))
    with pytest.raises(SpecError) as info:
        load_backend_file(path)
    err = info.value
    assert message in err.message
    assert err.location is not None
    assert (err.location.file, err.location.line, err.location.column) == (str(path), line, column), (
        err.render()
    )


def test_enough_malformed_cases():
    assert len(CASES) >= 15
    assert len({c[0] for c in CASES}) == len(CASES)


def test_unknown_key_lists_the_allowed_keys(tmp_path):
    path = write_spec(tmp_path, edit(C_SOURCE, "symbol_prefix: mini", "symbol_prefx: mini"))
    with pytest.raises(SpecError) as info:
        load_backend_file(path)
    assert "symbol_prefix" in info.value.hint and "macros" in info.value.hint


def test_unknown_op_suggests_a_catalog_op(tmp_path):
    path = write_spec(tmp_path, edit(C_SOURCE, "  add:\n", "  ad:\n"))
    with pytest.raises(SpecError) as info:
        load_backend_file(path)
    assert "did you mean add" in info.value.hint


def test_error_renders_with_a_caret(tmp_path):
    path = write_spec(tmp_path, edit(C_SOURCE, "out[i] = a[i]", "out[i] = ${nope} + a[i]"))
    with pytest.raises(SpecError) as info:
        load_backend_file(path)
    lines = info.value.render().splitlines()
    assert f"{path}:18:49" in lines[1]
    source = next(i for i, ln in enumerate(lines) if ln.lstrip().startswith("18 |"))
    assert lines[source + 1].index("^") == lines[source].index("${nope}")


def test_placeholder_column_in_explicit_indent_block(tmp_path):
    text = edit(C_SOURCE, "    body: |\n", "    body: |2\n").replace("a[i] p_OP_", "${oops} p_OP_")
    path = write_spec(tmp_path, text)
    with pytest.raises(SpecError) as info:
        load_backend_file(path)
    # |2 makes the block's indentation 4 + 2 = 6, as with auto-detection here
    assert (info.value.location.line, info.value.location.column) == (18, 49)


def test_root_must_be_a_mapping(tmp_path):
    path = write_spec(tmp_path, "- just\n- a list\n")
    with pytest.raises(SpecError) as info:
        load_backend_file(path)
    assert (info.value.location.line, info.value.location.column) == (1, 1)


def test_unreadable_file_is_a_spec_error(tmp_path):
    with pytest.raises(SpecError) as info:
        load_backend_file(tmp_path / "absent.yaml")
    assert "cannot read" in info.value.message


@pytest.mark.parametrize(
    ("style", "body"),
    [
        (
            "double-quoted",
            '"static void p_ID_(const float* a, const float* b, float* out) {\n'
            '      for (int i = 0; i < p_N_; ++i) out[i] = a[i] p_OP_ ${oops};\n      }"',
        ),
        (
            "single-quoted",
            "'static void p_ID_(const float* a, const float* b, float* out) {\n"
            "      for (int i = 0; i < p_N_; ++i) out[i] = a[i] p_OP_ ${oops};\n      }'",
        ),
        (
            "double-quoted-escapes",
            '"static void p_ID_(const float* a, const float* b, float* out) {\\n\\t\n'
            '      for (int i = 0; i < p_N_; ++i) out[i] = a[i] p_OP_ ${oops};\\n\n      }"',
        ),
    ],
)
def test_placeholder_in_a_folded_scalar_is_located_on_its_own_line(tmp_path, style, body):
    """A quoted scalar over several lines folds its breaks and indentation into
    spaces (and reads escapes): the error points at the placeholder's line and column,
    not into the scalar's first line."""
    start = C_SOURCE.index("    body: |\n")
    end = C_SOURCE.index("ops:\n")
    text = C_SOURCE[:start] + f"    body: {body}\n" + C_SOURCE[end:]
    path = write_spec(tmp_path, text)
    with pytest.raises(SpecError, match=r"\$\{oops\}") as info:
        load_backend_file(path)
    line = text.splitlines()[info.value.location.line - 1]
    assert info.value.location.line == 17  # the body's second line, the for loop
    assert line[info.value.location.column - 1 :].startswith("${oops}")


def test_an_error_in_a_merged_key_is_located_where_the_anchor_wrote_it(tmp_path):
    """A YAML merge key (``<<: *anchor``, as the shipped dnnl spec shares macro fields)
    puts keys in a mapping that its own positions do not know: an error in one is located
    in the anchored mapping, where the text is, and is never a traceback."""
    text = edit(
        C_SOURCE,
        "  BIN_1D:\n    inputs: 2\n",
        '  BIN_1D:\n    <<: &fields\n      inputs: 2\n      teardown: "${nope}"\n',
    )
    path = write_spec(tmp_path, text)
    with pytest.raises(SpecError) as info:
        load_backend_file(path)
    assert "${nope}" in info.value.message
    lines = text.splitlines()
    line = next(n for n, text_line in enumerate(lines, 1) if "${nope}" in text_line)
    assert (info.value.location.line, info.value.location.column) == (
        line,
        lines[line - 1].index("${nope}") + 1,
    )
    (tmp_path / "valid").mkdir()
    valid = write_spec(tmp_path / "valid", text.replace("${nope}", "free(${symbol}_scratch);"))
    assert load_backend_file(valid).macros["BIN_1D"].inputs == 2
