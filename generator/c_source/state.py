"""Per-function state of the ``c_source`` codegen: the spec's ``state``, ``init`` and
``teardown`` templates (in the spirit of TVM's ``__init_<symbol>``).

For a function ``<sym>`` of a backend whose spec has any of them, the generated C has::

    typedef struct { <state> } <sym>_state_t;     the spec's members
    static <sym>_state_t <sym>_state;
    static int <sym>_init_(<sym>_state_t* state)   the spec's init, then return 0
    static void <sym>_teardown_(void)              the spec's teardown on `state`, at unload
                                                   (a destructor), only after a good init

A macro may add its own ``state``, ``init`` and ``teardown`` for each kernel expanded
from it (a library primitive per kernel, created once): rendered with ``${symbol}`` the
kernel's name, its members join the struct after the spec's, its init runs after the
spec's init in kernel order, and its teardown before the spec's teardown in reverse
kernel order. The struct comes before the kernels (which read it); the init and the
teardown come after them (so that they may call helpers a macro body defines). A
kernel's init and teardown are functions of their own; when a kernel's init fails,
the function's init tears down the kernels before it and the spec's state, so a
failed init leaks nothing. A macro's templates may read ``${in<k>_const}``, the C
array of the kernel's constant input k (for patterns that require it constant).

and ``<sym>_wrapper_`` first runs the init once per loaded library, under
``pthread_once``, so that concurrent first calls from several threads run it exactly
once and every caller sees its result; a failed init (a non-zero return) makes every
call raise ``RuntimeError``. After the init the state is read-only: kernels read it
through the macro placeholder ``${state}`` (``(&<sym>_state)``) and must not write it,
so calls from several threads need no lock.

Module state (the spec's ``module_state``, ``module_init`` and ``module_teardown``) is
the same once per loaded library rather than per function, for what every function
shares (a device handle opened once, not once per offloaded region)::

    typedef struct { <module_state> } byoc_module_state_t;   before every function
    static byoc_module_state_t byoc_module_state;
    static int byoc_module_init_(byoc_module_state_t* state) the spec's module_init
    static void byoc_module_teardown_(void)                  at unload, after a good init,
                                                             after the functions' teardowns

Every wrapper runs the module init under ``pthread_once`` before its own function's
init (which may therefore read ``${module_state}``); a failed module init makes every
call of every function raise RuntimeError with what the init said through
``byoc_error`` (kept in ``byoc_module_message_``, written once under the once-control).
Kernels, macro setup templates and the per-function templates read it through
``${module_state}`` (``(&byoc_module_state)``), read-only after the init as the
function's state is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from byoc.spec.backend import BackendSpec, MacroDef
from byoc.spec.macro_args import const_input
from byoc.spec.template import placeholder_names, render

from ..c.text import block_comment, c_string

SLOTS = ("state", "init", "teardown")
"""The c_source templates of per-function state."""
MODULE_SLOTS = ("module_state", "module_init", "module_teardown")
"""The c_source templates of module state."""
MODULE_POINTER = "(&byoc_module_state)"
"""What ``${module_state}`` stands for."""
MODULE_NAMES = (
    "byoc_module_state_t",
    "byoc_module_state",
    "byoc_module_once_",
    "byoc_module_status_",
    "byoc_module_message_",
    "byoc_module_init_",
    "byoc_module_init_once_",
    "byoc_module_teardown_",
)
"""The names :func:`module_state_text` defines, which no generated name may take."""


def stateful(spec: BackendSpec) -> bool:
    """Whether the spec gives its functions (or a macro its kernels) state, an init or a teardown."""
    return any(spec.templates.get(slot, "").strip() for slot in SLOTS) or any(
        text.strip() for m in spec.macros.values() for text in m.setup.values()
    )


def module_stateful(spec: BackendSpec) -> bool:
    """Whether the spec gives its modules state, an init or a teardown."""
    return any(spec.templates.get(slot, "").strip() for slot in MODULE_SLOTS)


def module_state_text(spec: BackendSpec, values: Mapping[str, object]) -> str:
    """The module's state struct, its init (run once, under ``pthread_once``) and its
    teardown (a destructor of priority 101: it runs after the functions' teardowns,
    plain destructors, which may still use the module's state)."""
    members = _lines(render(spec.templates.get("module_state", ""), values), "  ")
    init = _lines(render(spec.templates.get("module_init", ""), values), "  ")
    teardown = _lines(render(spec.templates.get("module_teardown", ""), values), "  ")
    note = [
        "---- The module's state (byoc generator/c_source/state.py) ----",
        "byoc_module_state: the spec's module_state, set up once per loaded library by its module_init",
        "(on the first call of any function, before that function's init), shared by every function",
        "and kernel as ${module_state}, read-only afterwards; the spec's module_teardown releases it",
        "when the library is unloaded, after the functions' teardowns, and only after a good init.",
    ]
    return "\n".join(
        [
            block_comment(note),
            "typedef struct {",
            *(members or ["  char none_;  /* the spec declares no module_state */"]),
            "} byoc_module_state_t;",
            "static byoc_module_state_t byoc_module_state;",
            "static pthread_once_t byoc_module_once_ = PTHREAD_ONCE_INIT;",
            "static int byoc_module_status_ = -1;  /* the module_init's result; 0 when it succeeded */",
            "static char byoc_module_message_[256];  /* what a failed module_init said (byoc_error) */",
            "",
            "static int byoc_module_init_(byoc_module_state_t* state) {",
            "  (void)state;",
            *init,
            "  return 0;",
            "}",
            "",
            "static void byoc_module_init_once_(void) {",
            "  byoc_error_message_[0] = '\\0';",
            "  byoc_module_status_ = byoc_module_init_(&byoc_module_state);",
            "  if (byoc_module_status_ != 0) {",
            "    memcpy(byoc_module_message_, byoc_error_message_, sizeof byoc_module_message_);",
            "  }",
            "}",
            "",
            "static void byoc_module_teardown_(void) __attribute__((destructor(101)));",
            "static void byoc_module_teardown_(void) {",
            "  byoc_module_state_t* state = &byoc_module_state;",
            "  (void)state;",
            "  if (byoc_module_status_ != 0) return;",
            *teardown,
            "}",
            "",
        ]
    )


def module_guard(sym: str) -> list[str]:
    """The wrapper's first lines in a module with state: run the module init once, and
    fail every call after a failed one, with what the init said."""
    message = c_string(f"{sym}: the backend's module_init failed")
    return [
        "  if (pthread_once(&byoc_module_once_, byoc_module_init_once_) != 0 || byoc_module_status_ != 0) {",
        f"    return byoc_raise_failure({message}, byoc_module_message_);",
        "  }",
    ]


@dataclass(frozen=True, slots=True)
class KernelSetup:
    """One kernel's own state members, init and teardown (rendered, from its macro)."""

    kernel: str
    state: str
    init: str
    teardown: str


def kernel_setup(
    macro: MacroDef, kernel: str, values: Mapping[str, object], constants: Mapping[int, str]
) -> KernelSetup | None:
    """What the macro adds to its function's state for the kernel ``kernel``; None if
    nothing. ``constants`` names the C array of each input that is a constant, by the
    input's position: ``${in<k>_const}`` (the spec loader lets only patterns whose input
    k must be a constant use a macro that reads it)."""
    if not macro.setup:
        return None
    values = {**values, "symbol": kernel, **{f"in{k}_const": name for k, name in constants.items()}}
    text = {slot: render(macro.setup.get(slot, ""), values) for slot in SLOTS}
    return KernelSetup(kernel, text["state"], text["init"], text["teardown"])


def setup_constants(macro: MacroDef, inputs: Sequence[int], constants: Mapping[int, str]) -> dict[int, str]:
    """The C arrays of a kernel's constant inputs that its macro's ``state``, ``init``
    or ``teardown`` read as ``${in<k>_const}``, by the input's position k; ``inputs``
    are the kernel's values, ``constants`` the C array of each value that is one."""
    read = {const_input(name) for text in macro.setup.values() for name in placeholder_names(text)}
    return {k: constants[i] for k, i in enumerate(inputs) if k in read and i in constants}


def state_pointer(sym: str) -> str:
    """What ``${state}`` stands for in the macro arguments of ``sym``'s kernels."""
    return f"(&{sym}_state)"


def state_text(
    spec: BackendSpec, sym: str, values: Mapping[str, object], kernels: Sequence[KernelSetup]
) -> str:
    """The state struct of the function ``sym`` (its kernels' members after the spec's)."""
    values = {**values, "symbol": sym}
    members = _lines(render(spec.templates.get("state", ""), values), "  ")
    for k in kernels:
        own = _lines(k.state, "  ")
        members += [f"  /* {k.kernel} */", *own] if own else []
    note = [
        f"{sym}_state: set up once per loaded library by {sym}_init_ (the spec's state and init),",
        "read-only afterwards, released by the spec's teardown when the library is unloaded.",
    ]
    return "\n".join(
        [
            block_comment(note),
            "typedef struct {",
            *(members or ["  char none_;  /* the spec declares no state */"]),
            f"}} {sym}_state_t;",
            f"static {sym}_state_t {sym}_state;",
            f"static pthread_once_t {sym}_once_ = PTHREAD_ONCE_INIT;",
            f"static int {sym}_status_ = -1;  /* the init's result; 0 when it succeeded */",
            f"static char {sym}_message_[256];  /* what a failed init said (byoc_error) */",
            "",
        ]
    )


def setup_text(
    spec: BackendSpec, sym: str, values: Mapping[str, object], kernels: Sequence[KernelSetup]
) -> str:
    """The init and the teardown of the function ``sym``: the spec's, and its kernels'.

    Each kernel's init and teardown is a function of its own, ``<kernel>_init_`` and
    ``<kernel>_teardown_``. When a kernel's init fails, the function's init tears down
    the kernels set up before it and then the spec's state, so a failed init leaks
    nothing (a kernel's own init releases what it made before it fails)."""
    values = {**values, "symbol": sym}
    spec_teardown = _lines(render(spec.templates.get("teardown", ""), values), "  ")
    lines: list[str] = []
    for k in kernels:
        if k.init.strip():
            lines += _function(f"static int {k.kernel}_init_({sym}_state_t* state)", k.init, "  return 0;")
        if k.teardown.strip():
            lines += _function(f"static void {k.kernel}_teardown_({sym}_state_t* state)", k.teardown)
    init = _lines(render(spec.templates.get("init", ""), values), "  ")
    # undo_<kernel>: (where a failed kernel init jumps) falls through the teardowns of
    # every kernel before it, last first, to the spec's teardown.
    undo: list[str] = []
    since = 0
    for j, k in enumerate(kernels):
        if k.init.strip():
            init.append(f"  if ({k.kernel}_init_(state) != 0) goto undo_{k.kernel};")
            undo = [f"undo_{k.kernel}:", *_teardown_calls(kernels[since:j]), *undo]
            since = j
    teardown = _teardown_calls(kernels) + spec_teardown
    return "\n".join(
        [
            *lines,
            f"static int {sym}_init_({sym}_state_t* state) {{",
            "  (void)state;",
            *init,
            "  return 0;",
            *(undo + spec_teardown + ["  return 1;"] if undo else []),
            "}",
            "",
            f"static void {sym}_init_once_(void) {{",
            "  byoc_error_message_[0] = '\\0';",
            f"  {sym}_status_ = {sym}_init_(&{sym}_state);",
            f"  if ({sym}_status_ != 0) {{",
            f"    memcpy({sym}_message_, byoc_error_message_, sizeof {sym}_message_);",
            "  }",
            "}",
            "",
            f"static void {sym}_teardown_(void) __attribute__((destructor));",
            f"static void {sym}_teardown_(void) {{",
            f"  {sym}_state_t* state = &{sym}_state;",
            "  (void)state;",
            f"  if ({sym}_status_ != 0) return;",
            *teardown,
            "}",
            "",
        ]
    )


def init_guard(sym: str) -> list[str]:
    """The wrapper's first lines: run the init once, and fail every call after a failed
    one, with what the init said through ``byoc_error``."""
    message = c_string(f"{sym}: the backend's init failed")
    return [
        f"  if (pthread_once(&{sym}_once_, {sym}_init_once_) != 0 || {sym}_status_ != 0) {{",
        f"    return byoc_raise_failure({message}, {sym}_message_);",
        "  }",
    ]


def _function(head: str, text: str, *tail: str) -> list[str]:
    """A kernel's init or teardown statements as a function of its own."""
    return [f"{head} {{", "  (void)state;", *_lines(text, "  "), *tail, "}", ""]


def _teardown_calls(kernels: Sequence[KernelSetup]) -> list[str]:
    """Calls of the teardowns of ``kernels``, in reverse order."""
    return [f"  {k.kernel}_teardown_(state);" for k in reversed(kernels) if k.teardown.strip()]


def _lines(text: str, indent: str) -> list[str]:
    return [(indent + line).rstrip() for line in text.rstrip().splitlines()]
