"""The body, its parts and the wrapper of a ``c_source`` function
(:mod:`byoc.generator.c_source.function`).

The body ``<sym>_`` places the intermediate buffers in the thread's workspace, makes
the kernel calls in order (a long body calls ``noinline`` parts instead, so that the
compiler optimises each part alone) and copies the outputs that are not written in
place; the wrapper ``<sym>_wrapper_`` calls it on the data of the checked DLTensors.

A kernel whose macro says ``status: true`` returns an ``int``, 0 on success. The body
checks each such call: on a failure it skips the rest (``goto done``, where the
workspace is released) and returns 1 + the kernel's number, and the wrapper raises
RuntimeError with that kernel's message (:func:`failure_table`), followed by what the
kernel said about it, if anything (``byoc_error``, byoc's ``support/byoc_errors.c``). Kernels
without a status are called as plain statements, as in the guide.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from byoc.ir import C_TYPES, Function, TensorType

from ..c.profile import timed
from ..c.text import block_comment, c_string, comment, function_origin, item_list, value_label
from ..c.workspace import RELEASE, layout


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
    fails: bool = False,
) -> list[str]:
    """The body's lines; ``calls`` are its statements that call kernels or parts;
    ``laid_out`` notes its values that are not plain; ``fails`` says whether a call may
    report a failure (the body then returns what it reported, after ``done:``)."""
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
    if fails:
        lines.append(f"  int failed = 0; {comment('1 + the number of the kernel that reported a failure')}")
    lines += calls
    lines += copies
    lines += ["done:"] if fails else []
    lines += [RELEASE] if buffers else []
    lines += ["  return failed;" if fails else "  return 0;", "}", ""]
    return lines


PART_CALLS = 256
"""The most kernel calls a body makes itself; a longer one is split into parts of this
many calls. A C compiler's optimiser grows faster than linearly in the size of one
function: gcc -O2 took 14.5 s over a body of 10,000 calls and 4.4 s over the same calls
in parts of 256."""


@dataclass(frozen=True, slots=True)
class Call:
    """One kernel call of the body: the kernel, the arguments it passes, its node, and
    what the body returns when the kernel reports a failure (0: it reports none)."""

    kernel: str
    args: list[str]
    node: int
    failure: int = 0
    site: int | None = None
    """Its profiling site (:mod:`byoc.generator.c.profile`) in a build with profiling, else None."""
    note: str = ""
    """What the call computes, for the profiling block's comment."""

    @property
    def pointers(self) -> list[str]:
        """The arguments that are variables (inputs, outputs, buffers), not cast constants."""
        return [a for a in self.args if a[0] != "("]

    def statement(self, on_failure: str) -> str:
        """The call; a kernel with a status runs ``on_failure`` when it returns non-zero.
        With a profiling site, the call is timed (a failure leaves no event)."""
        if not self.failure:
            text = item_list(f"  {self.kernel}(", self.args, ");")
        else:
            call = item_list(f"  if ({self.kernel}(", self.args, ") != 0) {")
            then = "".join(f"\n    {line}" for line in on_failure.format(failed=self.failure).split("\n"))
            text = f"{call}{then}\n  }}"
        return text if self.site is None else "\n".join(timed([text], self.site, self.note))


def body_parts(
    fn: Function, sym: str, calls: Sequence[Call], ctypes: Mapping[str, str]
) -> tuple[list[str], list[str]]:
    """The part functions of a long body, and the statements that call them in order;
    a body of at most :data:`PART_CALLS` calls has no parts and makes its calls itself.

    A part ``<sym>_part<j>_`` takes exactly the pointers its calls pass (inputs, outputs
    and buffers), and is ``noinline`` so that the compiler optimises each part alone. A
    part with a call that may fail returns what the body returns then (0 when none did)."""
    in_body = "failed = {failed};\ngoto done;"
    if len(calls) <= PART_CALLS:
        return [], [c.statement(in_body) for c in calls]
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
        fails = any(c.failure for c in chunk)
        parts += [
            block_comment(note),
            item_list(
                f"__attribute__((noinline)) static {'int' if fails else 'void'} {name}(",
                [f"{ctypes[p]}* {p}" for p in pointers],
                ") {",
            ),
            *(c.statement("return {failed};") for c in chunk),
            *(["  return 0;"] if fails else []),
            "}",
            "",
        ]
        if fails:
            statements.append(
                item_list(f"  failed = {name}(", pointers, ");") + "\n  if (failed != 0) goto done;"
            )
        else:
            statements.append(item_list(f"  {name}(", pointers, ");"))
    return ["\n".join(parts)], statements


def holds_text(labels: list[str]) -> str:
    """The values a shared buffer holds, in order, for its comment."""
    if len(labels) <= 4:
        return "holds " + ", ".join(labels)
    return f"holds {', '.join(labels[:3])}, ... {labels[-1]} ({len(labels)} values)"


def failure_table(sym: str, messages: Mapping[int, str], kernels: int) -> str:
    """``<sym>_failures_``: the RuntimeError message of each kernel (by number) that may
    report a failure; the wrapper raises entry ``k`` when the body returns ``k + 1``."""
    note = f"{sym}_failures_: what a call raises when kernel {sym}_<k> reports a failure."
    entries = [f"  [{k}] = {c_string(message)}," for k, message in sorted(messages.items())]
    return "\n".join(
        [comment(note), f"static const char* const {sym}_failures_[{kernels}] = {{", *entries, "};", ""]
    )


def wrapper_text(fn: Function, sym: str, guard: list[str], failures: Mapping[int, str], kernels: int) -> str:
    params = [f"DLTensor* arg{i}" for i in range(len(fn.params))]
    params += [f"DLTensor* out{i}" for i in range(len(fn.outputs))]
    types = [p.type for p in fn.params] + list(fn.output_types)
    args = [
        f"({C_TYPES[t.dtype]}*)((char*){name}->data + {name}->byte_offset)"
        for name, t in zip((p.split()[-1] for p in params), types)
    ]
    note = [
        f"{sym}_wrapper_: runs {sym}_ on the data of the DLTensor arguments the entry checked,",
        f"raising MemoryError when {sym}_ cannot have its workspace and RuntimeError when a kernel\n"
        f"reports a failure; {function_origin(fn)}."
        if failures
        else f"raising MemoryError when {sym}_ fails; {function_origin(fn)}.",
    ]
    message = c_string(f"{sym}: cannot allocate the intermediate buffers")
    if failures:
        call = [
            f"  byoc_error_message_[0] = '\\0';  {comment('what a failing kernel says (byoc_error)')}",
            item_list(f"  const int failed = {sym}_(", args, ");"),
            "  if (failed < 0) {",
            f'    return byoc_raise("MemoryError", {message});',
            "  }",
            "  if (failed > 0) {",
            f"    return byoc_raise_failure({sym}_failures_[failed - 1], byoc_error_message_);",
            "  }",
        ]
    else:
        call = [
            item_list(f"  if ({sym}_(", args, ") != 0) {"),
            f'    return byoc_raise("MemoryError", {message});',
            "  }",
        ]
    return "\n".join(
        [
            *([failure_table(sym, failures, kernels)] if failures else []),
            block_comment(note),
            item_list(f"static int {sym}_wrapper_(", params, ") {"),
            *guard,
            *call,
            "  return 0;",
            "}",
            "",
        ]
    )
