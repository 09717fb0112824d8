"""byoc as a TVM relax external codegen ("bring your own codegen").

patterns = byoc.tvm.patterns("ccompiler")          # for FuseOpsByPattern
byoc.tvm.register("ccompiler")                     # relax.ext.byoc_ccompiler for RunCodegen
mod = byoc.tvm.offload(mod, "ccompiler")           # the three passes in one call

docs/tvm.md has a worked example; docs/architecture.md ("TVM relax") the design.
Importing this package imports ``tvm``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from byoc.errors import UsageError

from .codegen import link_flags, register, short_symbol
from .patterns import backend_list, codegen_name, patterns

__all__ = ["backend_list", "codegen_name", "link_flags", "offload", "patterns", "register", "short_symbol"]


def offload(
    mod,
    backends: str | Sequence[str],
    spec_path: str | Sequence[str] | None = None,
    options: Mapping[str, object] | Mapping[str, Mapping[str, object]] | None = None,
    *,
    merge: bool = True,
):
    """``mod`` with what ``backends`` take partitioned out and compiled by byoc.

    ``backends`` is one backend or several in order of preference (``"ccompiler,fused"``
    or a list): their pattern tables are joined in that order for one
    ``FuseOpsByPattern`` (relax partitions a module once; a second pass over a
    module that calls compiled regions fails), then ``MergeCompositeFunctions``
    when ``merge`` (else one region per composite), then ``RunCodegen``.
    ``options`` are one backend's ``--option`` values, or with several backends a
    mapping from backend name to its values."""
    from tvm import relax

    names = backend_list(backends)
    table = []
    for name in names:
        register(name, spec_path)
        table += patterns(name, spec_path)
    mod = relax.transform.FuseOpsByPattern(table, annotate_codegen=not merge)(mod)
    if merge:
        mod = relax.transform.MergeCompositeFunctions()(mod)
    return relax.transform.RunCodegen({codegen_name(n): dict(_options_of(n, names, options)) for n in names})(
        mod
    )


def _options_of(backend: str, names: Sequence[str], options) -> Mapping[str, object]:
    if not options:
        return {}
    if len(names) == 1 and not any(isinstance(v, Mapping) for v in options.values()):
        return options
    unknown = set(options) - set(names)
    if unknown:
        raise UsageError(
            f"options for {', '.join(sorted(unknown))}, which is not offloaded to",
            hint=f"with several backends, options map a backend ({', '.join(names)}) to its values",
        )
    return options.get(backend, {})
