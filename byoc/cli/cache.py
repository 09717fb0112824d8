"""``byoc cache``: what the cache holds, and making room (info, prune, clear)."""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter

CACHE_EPILOG = """\
examples:
  byoc cache info                    where the cache is, what it holds, its bound
  byoc cache prune                   evict least-recently-used entries down to the bound
  byoc cache prune --max 500M        ... down to 500 MiB instead
  byoc cache clear                   remove every entry
  BYOC_CACHE_MAX=1G byoc run m.onnx  bound the cache at 1 GiB for this run's builds

The cache is $BYOC_CACHE_DIR, else $XDG_CACHE_HOME/byoc, else ~/.cache/byoc. It holds
compiled libraries (build), libraries unpacked from bundles (bundle), and parsed and
validated specs, parser tables, compiler banners and the ONNX checker's passes by model
digest (spec, validated, parser, compiler, check). A second build of the same .onnx file reads its import
(import: the Program, its weights read back from the model file), and a second build of
the same .onnx, .graph or .examplejson file its build's record (record: what it
generated, to find its libraries), instead of doing them again; a .graph or .examplejson
file's Program is kept too (parsed: the text is not parsed again); model files' digests
are remembered by their status (digest). Every entry can be made
again: removing one costs the next build time, never correctness. After a build, byoc
evicts the least recently used entries while the cache is over $BYOC_CACHE_MAX
(default 2G; 0 for no bound), sparing those used in the last minute.
"""


def add_commands(sub, parents) -> None:
    c = sub.add_parser(
        "cache",
        parents=parents,
        help="show or trim the compile cache (info, prune, clear)",
        description="Show what byoc's cache holds, or evict entries from it.",
        epilog=CACHE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    c.add_argument(
        "action",
        choices=("info", "prune", "clear"),
        help="info: the cache's place, entries and bound; prune: evict least-recently-used "
        "entries down to the bound; clear: remove every entry",
    )
    c.add_argument(
        "--max",
        dest="max_size",
        metavar="SIZE",
        help="prune down to SIZE (500M, 2G; units of 1024) instead of $BYOC_CACHE_MAX",
    )
    c.set_defaults(run=_cmd_cache)


def _cmd_cache(args: argparse.Namespace) -> int:
    from ..disk_cache import cache_dir
    from ..errors import UsageError
    from ..runtime import cache_store

    if args.max_size is not None and args.action != "prune":
        raise UsageError(f"--max applies to prune, not {args.action}", hint="byoc cache prune --max 500M")
    root = cache_dir()
    if args.action == "info":
        sys.stdout.write(_info(root, cache_store))
        return 0
    if args.action == "prune":
        limit = cache_store.parse_size(args.max_size, "--max") if args.max_size else cache_store.bound()
        if limit <= 0:
            sys.stdout.write("no bound ($BYOC_CACHE_MAX is 0): nothing to prune\n")
            return 0
        gone = cache_store.prune(limit, root)
        freed = cache_store.human(sum(e.size for e in gone))
        sys.stdout.write(f"evicted {_entries(len(gone)).strip()} ({freed}) from {root}\n")
        return 0
    gone = [e for e in cache_store.entries(root) if cache_store.remove(e, root)]
    freed = cache_store.human(sum(e.size for e in gone))
    sys.stdout.write(f"removed {_entries(len(gone)).strip()} ({freed}) from {root}\n")
    return 0


def _info(root, cache_store) -> str:
    found = cache_store.entries(root)
    lines = [f"cache: {root}" + ("" if root.is_dir() else " (not created yet)")]
    counts, sizes = Counter(e.kind for e in found), Counter()
    for e in found:
        sizes[e.kind] += e.size
    for kind in cache_store.KINDS:
        if counts[kind]:
            lines.append(f"  {kind:<9} {_entries(counts[kind])}  {cache_store.human(sizes[kind]):>10}")
    total = sum(sizes.values())
    lines.append(f"  {'total':<9} {_entries(len(found))}  {cache_store.human(total):>10}")
    limit = cache_store.bound()
    lines.append(
        "bound: none ($BYOC_CACHE_MAX=0)"
        if limit <= 0
        else f"bound: {cache_store.human(limit)} ($BYOC_CACHE_MAX"
        + (")" if cache_store.bound_is_set() else ", default)")
        + (": over it; the next build, or `byoc cache prune`, evicts" if total > limit else "")
    )
    if found:
        oldest = min(e.used for e in found)
        lines.append(f"least recently used entry: {_ago(time.time() - oldest)} ago")
    return "\n".join(lines) + "\n"


def _entries(n: int) -> str:
    return f"{n:>6} entr{'y' if n == 1 else 'ies'}"


def _ago(seconds: float) -> str:
    for unit, size in (("days", 86400), ("hours", 3600), ("minutes", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit}"
    return f"{seconds:.0f} seconds"
