"""byoc as a TVM relax external codegen ("bring your own codegen").

patterns = byoc.tvm.patterns("ccompiler")          # for FuseOpsByPattern
byoc.tvm.register("ccompiler")                     # relax.ext.byoc_ccompiler for RunCodegen
mod = byoc.tvm.offload(mod, "ccompiler")           # the three passes in one call

docs/tvm.md has a worked example; docs/architecture.md ("TVM relax") the design.
Importing this package imports ``tvm``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .codegen import link_flags, register, short_symbol
from .patterns import codegen_name, patterns

__all__ = ["codegen_name", "link_flags", "offload", "patterns", "register", "short_symbol"]


def offload(
    mod,
    backend: str,
    spec_path: str | Sequence[str] | None = None,
    options: Mapping[str, object] | None = None,
    *,
    merge: bool = True,
):
    """``mod`` with what ``backend`` takes partitioned out (``FuseOpsByPattern`` with
    the backend's patterns, then ``MergeCompositeFunctions`` when ``merge``, else one
    region per composite) and compiled by byoc (``RunCodegen``)."""
    from tvm import relax

    register(backend, spec_path)
    table = patterns(backend, spec_path)
    mod = relax.transform.FuseOpsByPattern(table, annotate_codegen=not merge)(mod)
    if merge:
        mod = relax.transform.MergeCompositeFunctions()(mod)
    return relax.transform.RunCodegen({codegen_name(backend): dict(options or {})})(mod)
