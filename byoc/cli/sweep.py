"""``byoc sweep``: the conformance run of one backend (:mod:`byoc.testing.sweep`)."""

from __future__ import annotations

import argparse
import json
import sys

DEFAULT_CASES = 2
"""Random cases per op, dtype and rank: :func:`byoc.testing.sweep.sweep`'s default too
(tests/test_sweep.py checks that they agree). A literal, so that the start of every
command does not import the testing kit (20 ms of a warm ``byoc run``)."""

SWEEP_EPILOG = """\
examples:
  byoc sweep --backend ccompiler                        every op, dtype and rank it maps
  byoc sweep --backend acme --spec-path acme_specs      your own backend, acme_specs/acme.yaml
  byoc sweep --backend fused --op conv --op add --dtype float32 float16
  byoc sweep --backend fused --cases 5 --seed 3 -o fused-sweep.json
  byoc sweep --backend fused --option host_isa=false   # one build configuration

For every op the backend's spec maps (its `ops:`), every dtype the spec, the op's
mapping and the catalog's op allow, and every rank the spec and the mapping allow,
the sweep draws --cases random one-op cases: small inputs of random shapes and random
attributes that the catalog's type inference accepts (by the op's shape rule:
convolutions with random strides, pads, dilations and groups, reductions over random
axes, ...). Each case the spec takes becomes a region of the backend; all of them are
built as one module (one compile), run once, and each output is compared with the
numpy reference at its dtype's tolerance (integers and bool: equal). A case the spec
refuses (a `when:` condition, a macro that does not broadcast, a dtype this machine's
probe lacks) is "not applicable", with the reason. A build or a run that fails is
split until the failing cases are found.

The rank of a case is its output's (what the spec's `ranks:` are checked against).
The same --seed draws the same cases, and --op or --dtype narrow a sweep without
changing the cases it draws: a failure reproduces with
`byoc sweep --backend NAME --op OP --dtype DTYPE`.

output: a table with a row per op and dtype (--by-rank: per rank): cases, passed,
failed and not applicable; then every failure with its op, dtype, rank, input shapes,
attributes and error (the largest difference, or the build's or the run's error).
-o FILE also writes the whole report as JSON.

exit status: 0 when no case failed, 1 when one did, 2 on bad input (an unknown
backend, an --op the backend does not map, a --dtype its spec lacks)
"""


def add_commands(sub, parents) -> None:
    s = sub.add_parser(
        "sweep",
        parents=parents,
        help="check a backend on every op, dtype and rank its spec maps, against numpy",
        description=(
            "The conformance run of one backend: random one-op graphs of every op its spec "
            "maps, at every dtype and rank it allows, built as one module, run, and compared "
            "with the numpy reference."
        ),
        epilog=SWEEP_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    s.add_argument(
        "--backend", required=True, metavar="NAME", help="the backend to sweep (`byoc backends` lists them)"
    )
    s.add_argument(
        "--op",
        dest="ops",
        action="append",
        default=[],
        metavar="OP",
        help="sweep only this op (repeatable; default: every op the spec maps)",
    )
    s.add_argument(
        "--dtype",
        dest="dtypes",
        action="extend",
        nargs="+",
        default=[],
        metavar="D",
        help="sweep only these dtypes (default: every dtype the spec takes)",
    )
    s.add_argument(
        "--cases",
        type=_natural(1),
        default=DEFAULT_CASES,
        metavar="N",
        help=f"random cases per op, dtype and rank (default {DEFAULT_CASES})",
    )
    s.add_argument("--seed", type=_natural(0), default=0, help="seed of the random cases (default 0)")
    s.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a build option of the backend, as for byoc run (sweep each configuration you ship)",
    )
    s.add_argument("--by-rank", action="store_true", help="a table row per rank, not per op and dtype")
    s.add_argument("-o", "--output", metavar="FILE", help="also write the report as JSON to FILE")
    s.set_defaults(run=_cmd_sweep)


def _natural(minimum: int):
    """An argparse type: an integer of at least ``minimum``."""

    def convert(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid value {text!r}: not an integer") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"invalid value {text!r}: at least {minimum}")
        return value

    return convert


def _cmd_sweep(args: argparse.Namespace) -> int:
    from ..atomic import write_file
    from ..testing.sweep import sweep
    from .gen import parse_options

    options = parse_options(args.option)
    report = sweep(
        args.backend,
        spec_path=args.spec_path,
        seed=args.seed,
        dtypes=args.dtypes,
        ops=args.ops,
        cases=args.cases,
        options=options,
    )
    sys.stdout.write(report.table(by_rank=args.by_rank))
    if args.output:
        write_file(args.output, json.dumps(report.to_json(), indent=1) + "\n")
    return 0 if report.ok else 1
