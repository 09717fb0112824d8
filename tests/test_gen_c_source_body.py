"""The layout of the C that c_source generates: its kernels (one per distinct use, each
naming its nodes and sources), the memory plan, calls in parts, C++ linkage and the
order of an entry's arguments; each compiled and run against numpy."""

from __future__ import annotations

import tvm_ffi
from compile_util import compile_library
from gen_c_source_support import BACKEND, build, check_against_reference, externals_of, generate

from byoc.api import load_backend, load_catalog, parse
from byoc.generator.lowering import lower


def test_guide_structure():
    text = generate(externals_of("guide_subgraph"))
    assert "#define CSOURCE_BINARY_OP_2D(p_ID_, p_OP_, p_DIM1_, p_DIM2_, p_DTYPE_) \\\n" in text
    for k, op in enumerate("+-*"):
        assert f"\nCSOURCE_BINARY_OP_2D(ccompiler_0_{k}, {op}, 10, 10, float)\n" in text
    assert "float* const buf0 = (float*)(ws + 0);" in text
    assert "float* const buf1 = (float*)(ws + 448);" in text  # 400 bytes, rounded up to 64
    assert "ccompiler_0_2(buf1, in3, out0);" in text
    assert "static int ccompiler_0_wrapper_(\n    DLTensor* arg0,\n" in text
    assert "TVM_FFI_DLL_EXPORT int __tvm_ffi_ccompiler_0(" in text


def test_every_function_names_its_source():
    text = generate(externals_of("dag"))
    text = text[text.index("/* ---- ccompiler_0: ") :]  # after the shared helpers
    functions = [line for line in text.splitlines() if line.startswith(("static int", "TVM_FFI_DLL_EXPORT"))]
    kernels = [line for line in text.splitlines() if line.startswith("CSOURCE_BINARY_OP_2D(")]
    assert len(kernels) == 3 and functions  # the two multiplies share a kernel
    for line in kernels + functions:
        before = text[: text.index(line)].rsplit("*/", 1)[0].rsplit("/*", 1)[1]
        assert "tests/data/gen/dag.graph:" in before, line


def test_one_kernel_per_distinct_use_called_in_topological_order():
    (fn,) = externals_of("dag")
    text = generate([fn])
    body = text[text.index(f"static int {fn.name}_(") :]
    calls = [line.split("(")[0].strip() for line in body.splitlines()[1:] if line.startswith(f"  {fn.name}_")]
    # add, multiply, subtract, then the second multiply (same op, type and attributes).
    assert calls == [f"{fn.name}_{k}" for k in (0, 1, 2, 1)]
    assert text.count(f"\nCSOURCE_BINARY_OP_2D({fn.name}_") == 3


def test_a_shared_kernel_names_the_nodes_it_serves(tmp_path, rng):
    """Ten identical adds are one kernel, whose comment names the first four nodes and
    counts the rest; softmax over another axis is a kernel of its own."""
    lines = ["graph main(x: float32[3, 5], y: float32[3, 5]) {", "  s = @ccompiler {", "    t0 = add(x, y)"]
    lines += [f"    t{i} = add(t{i - 1}, y)" for i in range(1, 10)]
    lines += ["    u = softmax(t9, axis=0)", "    return softmax(u, axis=1)", "  }", "  return s", "}"]
    program = parse("\n".join(lines), "graph", file="shared.graph")
    (fn,) = lower(program, load_backend, load_catalog()).externals_for(BACKEND)
    text = generate((fn,))
    assert (
        "/* ccompiler_0_0: float32[3, 5], for 10 nodes:\n"
        "     t0 = add(...) at shared.graph:3:5\n"
        "     t1 = add(...) at shared.graph:4:5\n"
        "     t2 = add(...) at shared.graph:5:5\n"
        "     t3 = add(...) at shared.graph:6:5\n"
        "     ... and 6 more */\n"
        "CSOURCE_BINARY_OP_2D(ccompiler_0_0, +, 3, 5, float)\n"
    ) in text
    assert "/* ccompiler_0_1: u = softmax(...) at shared.graph:13:5, float32[3, 5] */" in text
    assert "/* ccompiler_0_2: (nested call) = softmax(...) at shared.graph:14:12, float32[3, 5] */" in text
    assert "ccompiler_0_3" not in text
    assert text.count("  ccompiler_0_0(") == 10
    check_against_reference(build(text, tmp_path), fn, rng)


def test_intermediates_share_buffers_by_lifetime(tmp_path, rng):
    """A chain of 40 ops needs two intermediate buffers, not 39 (the memory plan)."""
    lines = ["graph main(x: float32[3, 3], y: float32[3, 3]) {", "  s = @ccompiler {", "    t0 = add(x, y)"]
    lines += [f"    t{i} = {('subtract', 'multiply', 'add')[i % 3]}(t{i - 1}, y)" for i in range(1, 40)]
    lines += ["    return t39", "  }", "  return s", "}"]
    program = parse("\n".join(lines), "graph", file="chain.graph")
    (fn,) = lower(program, load_backend, load_catalog()).externals_for(BACKEND)
    text = generate((fn,))
    assert text.count("= (float*)(ws + ") == 2
    assert "byoc_workspace(128, &spare);" in text  # two buffers of 36 bytes, each 64-byte aligned
    assert "holds t0, t2, t4, ... t38 (20 values)" in text
    check_against_reference(build(text, tmp_path), fn, rng)


def test_a_long_body_calls_its_kernels_in_parts(tmp_path, rng, monkeypatch):
    """A body of more than PART_CALLS calls is split into noinline parts of at most that
    many, each taking exactly the pointers its calls pass; the results are the same."""
    from byoc.generator.c_source import body as c_source_body

    monkeypatch.setattr(c_source_body, "PART_CALLS", 4)
    lines = ["graph main(x: float32[3, 3], y: float32[3, 3]) {", "  s = @ccompiler {", "    t0 = add(x, y)"]
    lines += [f"    t{i} = {('subtract', 'multiply', 'add')[i % 3]}(t{i - 1}, x)" for i in range(1, 10)]
    lines += ["    return t9", "  }", "  return s", "}"]
    program = parse("\n".join(lines), "graph", file="parts.graph")
    (fn,) = lower(program, load_backend, load_catalog()).externals_for(BACKEND)
    text = generate((fn,))
    assert "ccompiler_0_part2_" in text and "ccompiler_0_part3_" not in text
    assert (
        "/* ccompiler_0_part1_: kernel calls 4 to 7 of ccompiler_0_ (nodes t4 to t7);\n"
        "   the body's calls in parts of at most 4, each optimised on its own. */\n"
        "__attribute__((noinline)) static void ccompiler_0_part1_(float* buf1, float* in0, float* buf0) {\n"
    ) in text
    body = text[text.index("static int ccompiler_0_(") :]
    body = body[: body.index("\n}\n")]
    assert "  ccompiler_0_part2_(buf1, in0, buf0, out0);" in body
    assert not [
        line for line in body.splitlines() if line.startswith("  ccompiler_0_") and "part" not in line
    ]
    check_against_reference(build(text, tmp_path), fn, rng)


def test_a_cplusplus_compiler_keeps_the_entry_names(tmp_path, rng):
    """TVM builds a C-source module with a C++ compiler: the guards around the exported
    entries give them C linkage, so they are found under their names (and run)."""
    externals = externals_of("dag")
    text = generate(externals)
    assert text.count('#ifdef __cplusplus\nextern "C"\n#endif\nTVM_FFI_DLL_EXPORT int __tvm_ffi_') == len(
        externals
    )
    module = tvm_ffi.load_module(
        str(compile_library({f"{BACKEND}.cc": text}, f"{BACKEND}.cc", tmp_path, cplusplus=True))
    )
    for fn in externals:
        check_against_reference(module, fn, rng)


def test_a_listed_parameter_order_is_the_entry_argument_order(tmp_path, rng):
    """`@ccompiler as blk(b, w, x)`: the exported entry takes b, w, x in that order."""
    program = parse(
        """graph main(x: float32[3, 4], w: float32[3, 4], b: float32[3, 4]) {
          s = @ccompiler as blk(b, w, x) { return add(subtract(x, w), multiply(b, b)) }
          return s
        }""",
        "graph",
    )
    (fn,) = lower(program, load_backend, load_catalog()).externals_for(BACKEND)
    assert [p.name for p in fn.params] == ["b", "w", "x"]
    text = generate((fn,))
    assert "0: input b: float32[3, 4]" in text and "2: input x: float32[3, 4]" in text
    check_against_reference(build(text, tmp_path), fn, rng)
