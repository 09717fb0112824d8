"""Malformed broadcasting declarations of a c_source spec (``broadcast: true``, the
``${in<k>_stride<j>}`` / ``${in<k>_strides}`` placeholders): located errors when it loads."""

from __future__ import annotations

from pathlib import Path

import pytest
from c_source_broadcast_support import VENDOR, write_spec

from byoc.errors import SpecError
from byoc.spec import load_backend_file


def load_error(tmp_path: Path, text: str, needle: str) -> tuple[SpecError, int, int]:
    """The SpecError of loading ``text``, and the line and column of ``needle`` in it."""
    path = write_spec(tmp_path, text)
    with pytest.raises(SpecError) as info:
        load_backend_file(path)
    line = next(k for k, s in enumerate(text.splitlines(), 1) if needle in s)
    column = text.splitlines()[line - 1].index(needle) + 1
    assert info.value.location is not None and info.value.location.file == str(path)
    return info.value, line, column


def test_a_stride_without_broadcast_is_a_located_error(tmp_path):
    text = VENDOR.replace(
        '    broadcast: true\n    params:\n      p_ID_: "${symbol}"\n      p_RANK_',
        '    params:\n      p_ID_: "${symbol}"\n      p_RANK_',
    )
    assert text != VENDOR
    exc, line, column = load_error(tmp_path, text, "${in0_strides}")
    assert "${in0_strides}" in exc.message and "does not declare `broadcast: true`" in exc.message
    assert (exc.location.line, exc.location.column) == (line, column)
    assert exc.hint is not None and "broadcast: true" in exc.hint


def test_a_stride_beyond_the_rank_is_a_located_error(tmp_path):
    text = VENDOR.replace('p_CJ_: "${in2_stride1}"', 'p_CJ_: "${in2_stride2}"')
    exc, line, _ = load_error(tmp_path, text, "macros: {2: VENDOR_GEMM}")
    assert (
        exc.message
        == "pattern gemm uses macro VENDOR_GEMM at rank 2, but its argument p_CJ_ needs ${in2_stride2}"
    )
    assert exc.location.line == line
    assert exc.hint is not None and "${in2_stride0}, ${in2_stride1}" in exc.hint


def test_a_stride_of_an_input_the_kernel_lacks_is_a_located_error(tmp_path):
    text = VENDOR.replace('p_SB_: "${in1_strides}"', 'p_SB_: "${in2_strides}"')
    exc, line, column = load_error(tmp_path, text, "${in2_strides}")
    assert "the kernel takes 2 input(s)" in exc.message
    assert (exc.location.line, exc.location.column) == (line, column)


def test_broadcast_must_be_a_bool(tmp_path):
    text = VENDOR.replace("    broadcast: true\n", "    broadcast: yes please\n", 1)
    exc, line, _ = load_error(tmp_path, text, "broadcast: yes please")
    assert "VENDOR_ADD: broadcast" in exc.message
    assert exc.location.line == line


def test_broadcast_on_a_macro_of_ops_that_never_broadcast_is_a_located_error(tmp_path):
    text = VENDOR.replace(
        "  add: {macros: {default: VENDOR_ADD}}", "  add: {macros: {default: VENDOR_ADD_FLAT}}"
    ).replace(
        "    macros: {2: VENDOR_GEMM}",
        "    macros: {2: VENDOR_GEMM}\n  gemm_only:\n    inputs: [x, w]\n"
        "    match: |\n      return dense(x, w)\n    macros: {2: VENDOR_DENSE}",
    )
    text = text.replace(
        "ops:\n",
        "  VENDOR_DENSE:\n    inputs: 2\n    broadcast: true\n"
        '    params: {p_ID_: "${symbol}", p_M_: "${in0_dim0}"}\n'
        "    body: |\n      static void p_ID_(const float* x, const float* w, float* out) { (void)x; (void)w; (void)out; (void)p_M_; }\n"
        "ops:\n",
    )
    path = write_spec(tmp_path, text)
    with pytest.raises(SpecError) as info:
        load_backend_file(path)
    exc = info.value
    line = text.splitlines().index("  VENDOR_DENSE:") + 3  # its `broadcast: true`
    assert (
        exc.message
        == "macro VENDOR_DENSE declares `broadcast: true`, but nothing it serves broadcasts (pattern gemm_only)"
    )
    assert exc.location is not None and exc.location.line == line
    assert exc.hint is not None and "elementwise" in exc.hint


def test_a_c_source_spec_still_may_not_broadcast_as_a_whole(tmp_path):
    text = VENDOR.replace("kind: c_source\n", "kind: c_source\nbroadcast: true\n")
    exc, line, _ = load_error(tmp_path, text, "broadcast: true")
    assert "cannot broadcast" in exc.message
    assert exc.location.line == line
