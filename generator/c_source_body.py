"""The body, its parts and the wrapper of a ``c_source`` function
(:mod:`byoc.generator.c_source_function`).

The body ``<sym>_`` places the intermediate buffers in the thread's workspace, makes
the kernel calls in order (a long body calls ``noinline`` parts instead, so that the
compiler optimises each part alone) and copies the outputs that are not written in
place; the wrapper ``<sym>_wrapper_`` calls it on the data of the checked DLTensors.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from byoc.ir import C_TYPES, Function, TensorType

from .c_text import block_comment, function_origin, item_list, value_label
from .c_workspace import RELEASE, layout


def body_lines(
    fn: Function,
    sym: str,
    output_types: Sequence[TensorType],
    buffers: Sequence[tuple[str, TensorType, list[str]]],
    calls: Sequence[str],
    kernel_calls: int,
    copies: Sequence[str],
    unused_inputs: Sequence[int],
    laid_out: Sequence[str] = (),
) -> list[str]:
    """The body's lines; ``calls`` are its statements that call kernels or parts;
    ``laid_out`` notes its values that are not plain."""
    params = [f"{C_TYPES[p.type.dtype]}* in{i}" for i, p in enumerate(fn.params)]
    params += [f"{C_TYPES[t.dtype]}* out{i}" for i, t in enumerate(output_types)]
    note = [
        f"{sym}_: the body of {function_origin(fn)},",
        f"with {kernel_calls} kernel call(s) and {len(buffers)} intermediate buffer(s), shared where lifetimes allow:",
    ]
    note += [f"  in{i}: {p.name}: {p.type}" for i, p in enumerate(fn.params)]
    note += [
        f"  out{i}: {value_label(name)}: {t}" for i, (name, t) in enumerate(zip(fn.outputs, output_types))
    ]
    note += laid_out
    lines = [block_comment(note), item_list(f"static int {sym}_(", params, ") {")]
    if buffers:
        lines += layout(
            [(buf, t, holds_text(holds), k) for k, (buf, t, holds) in enumerate(buffers)], "return -1;"
        )
    lines += [f"  (void)in{i};" for i in unused_inputs]
    lines += calls
    lines += copies
    lines += [RELEASE] if buffers else []
    lines += ["  return 0;", "}", ""]
    return lines


PART_CALLS = 256
"""The most kernel calls a body makes itself; a longer one is split into parts of this
many calls. A C compiler's optimiser grows faster than linearly in the size of one
function: gcc -O2 took 14.5 s over a body of 10,000 calls and 4.4 s over the same calls
in parts of 256."""


@dataclass(frozen=True, slots=True)
class Call:
    """One kernel call of the body: its statement, the pointers it passes, its node."""

    text: str
    pointers: list[str]
    node: int


def body_parts(
    fn: Function, sym: str, calls: Sequence[Call], ctypes: Mapping[str, str]
) -> tuple[list[str], list[str]]:
    """The part functions of a long body, and the statements that call them in order;
    a body of at most :data:`PART_CALLS` calls has no parts and makes its calls itself.

    A part ``<sym>_part<j>_`` takes exactly the pointers its calls pass (inputs, outputs
    and buffers), and is ``noinline`` so that the compiler optimises each part alone."""
    if len(calls) <= PART_CALLS:
        return [], [c.text for c in calls]
    parts: list[str] = []
    statements: list[str] = []
    for j, first in enumerate(range(0, len(calls), PART_CALLS)):
        chunk = calls[first : first + PART_CALLS]
        pointers = list(dict.fromkeys(p for c in chunk for p in c.pointers))
        name = f"{sym}_part{j}_"
        nodes = [value_label(fn.nodes[c.node].name) for c in (chunk[0], chunk[-1])]
        note = [
            f"{name}: kernel calls {first} to {first + len(chunk) - 1} of {sym}_ (nodes {nodes[0]} to {nodes[1]});",
            f"the body's calls in parts of at most {PART_CALLS}, each optimised on its own.",
        ]
        parts += [
            block_comment(note),
            item_list(
                f"__attribute__((noinline)) static void {name}(",
                [f"{ctypes[p]}* {p}" for p in pointers],
                ") {",
            ),
            *(c.text for c in chunk),
            "}",
            "",
        ]
        statements.append(item_list(f"  {name}(", pointers, ");"))
    return ["\n".join(parts)], statements


def holds_text(labels: list[str]) -> str:
    """The values a shared buffer holds, in order, for its comment."""
    if len(labels) <= 4:
        return "holds " + ", ".join(labels)
    return f"holds {', '.join(labels[:3])}, ... {labels[-1]} ({len(labels)} values)"


def wrapper_text(fn: Function, sym: str, guard: list[str]) -> str:
    params = [f"DLTensor* arg{i}" for i in range(len(fn.params))]
    params += [f"DLTensor* out{i}" for i in range(len(fn.outputs))]
    types = [p.type for p in fn.params] + list(fn.output_types)
    args = [
        f"({C_TYPES[t.dtype]}*)((char*){name}->data + {name}->byte_offset)"
        for name, t in zip((p.split()[-1] for p in params), types)
    ]
    note = [
        f"{sym}_wrapper_: runs {sym}_ on the data of the DLTensor arguments the entry checked,",
        f"raising MemoryError when {sym}_ fails; {function_origin(fn)}.",
    ]
    message = f"{sym}: cannot allocate the intermediate buffers"
    return "\n".join(
        [
            block_comment(note),
            item_list(f"static int {sym}_wrapper_(", params, ") {"),
            *guard,
            item_list(f"  if ({sym}_(", args, ") != 0) {"),
            f'    return byoc_raise("MemoryError", "{message}");',
            "  }",
            "  return 0;",
            "}",
            "",
        ]
    )
