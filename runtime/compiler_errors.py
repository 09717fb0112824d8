"""What a build error shows of a compiler's failure: its first lines, the generated
source around the first error, and the line of the spec (or of the spec's support
file) that the erring line copies (:mod:`byoc.spec_lines`)."""

from __future__ import annotations

import re
from collections.abc import Mapping

from byoc.spec_lines import SpecLine, SpecText, spec_line

CONTEXT_LINES = 3
"""Generated lines shown on each side of the first error."""
MESSAGE_LINES = 20
"""The compiler's lines shown at most."""

_LOCATION = re.compile(
    r"^(?P<file>[^:\n]+):(?P<line>\d+):(?:(?P<column>\d+):)?\s*(?P<what>fatal error|error|warning)?"
)


def compiler_excerpt(
    stderr: str,
    sources: Mapping[str, str | bytes],
    main: str = "",
    spec_text: SpecText | None = None,
    shown_as: Mapping[str, str] | None = None,
) -> tuple[str, SpecLine | None]:
    """The compiler's first lines, plus the generated source around its first error, and
    the spec line that error's line copies (:mod:`byoc.spec_lines`), or the line of the
    file a source was copied from (``shown_as``), if any."""
    lines = stderr.strip().splitlines()
    message = "\n".join(lines[:MESSAGE_LINES] + (["..."] if len(lines) > MESSAGE_LINES else []))
    found: tuple[str, int, int] | None = None
    for line in lines:
        m = _LOCATION.match(line)
        if m and isinstance(sources.get(m.group("file")), str):
            if found is None or (m.group("what") or "").endswith("error"):
                found = (m.group("file"), int(m.group("line")), int(m.group("column") or 1))
            if (m.group("what") or "").endswith("error"):
                break
    if found is None:
        return message, None
    name, n, column = found
    source = sources[name]
    assert isinstance(source, str)
    text = source.splitlines()
    lo, hi = max(1, n - CONTEXT_LINES), min(len(text), n + CONTEXT_LINES)
    shown = "\n".join(f"{'>' if i == n else ' '}{i:5} | {text[i - 1]}" for i in range(lo, hi + 1))
    copied = spec_line(text, n, spec_text, column) if spec_text is not None and name == main else None
    if shown_as and name in shown_as:
        copied = SpecLine(shown_as[name], n, "spec's C files", column)
    where = f"\n\nline {n} is {copied}" if copied else ""
    return f"{message}\n\ngenerated {name}, around line {n}:\n{shown}{where}", copied


LEVEL_FLAG_REFUSED = re.compile(r"-mneeded|-march=x86-64-v\d|march=.*x86-64-v\d")
"""A compiler's refusal of the flags of option ``host_isa`` (gcc before 11, other compilers)."""


def failure_hint(stderr: str, copied: SpecLine | None) -> str:
    """What to do about a failed compile: fix the spec's C where the error is in it; turn
    ``host_isa`` off for a compiler that knows no x86-64 levels; else report a bug."""
    if copied is not None:
        return f"fix the C at {copied}"
    if LEVEL_FLAG_REFUSED.search(stderr):
        return (
            "this compiler does not know the x86-64 levels (gcc 11 or later does): "
            "build with --option host_isa=false, or use a newer compiler ($CC)"
        )
    return "this is a bug in a spec's C text or in byoc; `byoc gen -o DIR` writes the sources to inspect"
