"""The name tables an interpreter reads from a backend spec: ExampleJSON op tokens or
JSON kernel names, each mapped back to catalog ops."""

from __future__ import annotations

from typing import Any

from byoc.errors import ByocError, RuntimeFailure


def spec_table(backend: str, spec_path: Any, kind: str, what: str) -> dict[str, str]:
    """``what`` ("tokens" or "kernels") of the ``kind`` backend spec ``backend``."""
    from byoc.spec import load_backend

    try:
        spec = load_backend(backend, spec_path)
    except ByocError as exc:
        raise RuntimeFailure(
            f"cannot read the {'op tokens' if what == 'tokens' else what} of backend {backend!r}: {exc.message}",
            hint=f"pass spec_path= (the spec's directory) or {what}=",
        ) from None
    if spec.kind.name != kind:
        article = "an" if kind[0] in "aeiou" else "a"
        raise RuntimeFailure(f"backend {backend!r} is a {spec.kind.name} backend, not {article} {kind} one")
    return spec.op_names()
