"""The exported entry of every compiled external function: TVM FFI's safe-call ABI.

    int __tvm_ffi_<sym>(void* self, const TVMFFIAny* args, int32_t num_args, TVMFFIAny* result)

Arguments are the function's inputs, then its outputs, each either a ``DLTensor*``
(``kTVMFFIDLTensorPtr``) or a tvm_ffi Tensor object (``kTVMFFITensor``). The entry
checks the count of its arguments, then the kind, dtype, rank, shape, contiguity and
device of each one (``byoc_check_arg``, in byoc's ``support/byoc_entry.c``); a problem is
raised with ``TVMFFIErrorSetRaisedFromCStr`` and the entry returns -1, so a bad call
from Python is a Python exception, never a crash.

The text is valid C99 and C++17 (for the engine codegen), warning-free under
``-Wall -Wextra -Werror``.
"""

from __future__ import annotations

from collections.abc import Sequence

from byoc.ir import Function

from .support_files import include
from .text import DLPACK_CODES, c_string, comment_text, function_origin, int64_array


def arguments(fn: Function) -> list[tuple[str, str, object]]:
    """(role, C name, type) of every argument: inputs, then outputs."""
    out = [(f"input {p.name}", f"arg{i}", p.type) for i, p in enumerate(fn.params)]
    out += [(f"output {k}", f"out{k}", t) for k, t in enumerate(fn.output_types)]
    return out


C_LINKAGE_GUARD = ("#ifdef __cplusplus", 'extern "C"', "#endif")
"""Before an exported definition of a C module: C linkage when it is compiled as C++
(TVM builds a C-source module with a C++ compiler), so that its name stays as is."""


def exported(definition: str, cplusplus: bool) -> list[str]:
    """The first line of an exported definition (``TVM_FFI_DLL_EXPORT int f(...) {``)
    with C linkage: ``extern "C"`` before it in a C++ module, :data:`C_LINKAGE_GUARD`
    in a C one."""
    return [f'extern "C" {definition}'] if cplusplus else [*C_LINKAGE_GUARD, definition]


def entry(fn: Function, wrapper: str, *, cplusplus: bool = False) -> str:
    """The exported ``__tvm_ffi_<sym>`` of ``fn``; it calls ``wrapper(DLTensor*...)``."""
    sym = fn.name
    assert sym is not None
    args = arguments(fn)
    n_in, n_out = len(fn.params), len(fn.outputs)
    lines = []
    signature = f"int __tvm_ffi_{sym}(void* self, const TVMFFIAny* args, int32_t num_args, TVMFFIAny* result)"
    where = comment_text(function_origin(fn))
    lines.append(f"/* {sym}: the exported TVM FFI function (safe-call ABI) of {where}.")
    lines.append(f"   Arguments: {n_in} input(s), then {n_out} output(s):")
    for k, (role, _, t) in enumerate(args):
        lines.append(comment_text(f"     {k}: {role}: {t}"))
    lines.append("*/")
    lines += exported(f"TVM_FFI_DLL_EXPORT {signature} {{", cplusplus)
    for k, (_, _, t) in enumerate(args):
        if t.rank:
            lines.append(f"  static const int64_t shape{k}[{t.rank}] = {int64_array(t.shape)};")
    lines.append(f"  DLTensor* t[{len(args)}];")
    lines.append("  char msg[256];")
    lines.append("  (void)self;")
    lines.append("  (void)result;")
    lines.append(f"  if (num_args != {len(args)}) {{")
    lines.append(
        f'    snprintf(msg, sizeof msg, "%s: expected {len(args)} arguments ({n_in} input(s), then {n_out} output(s)), got %d", {c_string(sym)}, (int)num_args);'
    )
    lines.append('    return byoc_raise("TypeError", msg);')
    lines.append("  }")
    for k, (role, _, t) in enumerate(args):
        code, bits = DLPACK_CODES[t.dtype]
        shape = f"shape{k}" if t.rank else "NULL"
        lines.append(
            f"  if (byoc_check_arg({c_string(sym)}, args, {k}, {c_string(role)}, {code}, {bits}, "
            f"{c_string(t.dtype)}, {t.rank}, {shape}, &t[{k}]) != 0) return -1;"
        )
    call_args = ", ".join(f"t[{k}]" for k in range(len(args)))
    lines.append(f"  return {wrapper}({call_args});")
    lines.append("}")
    return "\n".join(lines) + "\n"


def includes(used: Sequence[str] = (), *, cplusplus: bool = False) -> str:
    """The standard headers of a module, TVM FFI's and DLPack's, then byoc's own
    (:data:`~byoc.generator.c.support_files.HEADER`), with a comment naming the support
    files the module links (byoc_entry.c and the ``used`` ones)."""
    std = (
        ("<cstdint>", "<cstdio>", "<cstdlib>", "<cstring>")
        if cplusplus
        else ("<stdint.h>", "<stdio.h>", "<stdlib.h>", "<string.h>")
    )
    return (
        "".join(f"#include {h}\n" for h in std)
        + "#include <dlpack/dlpack.h>\n#include <tvm/ffi/c_api.h>\n"
        + include(used, cplusplus=cplusplus)
    )
