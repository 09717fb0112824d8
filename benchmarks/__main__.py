"""`python -m benchmarks [parse|codegen] [options]`: run byoc's benchmarks.

Benchmarks measure; unit tests never time anything. Each suite prints a markdown
table and writes JSON under benchmarks/results/.
"""

from __future__ import annotations

import sys

from . import codegen_speed, parse_speed

SUITES = {"parse": parse_speed.main, "codegen": codegen_speed.main}


def main(argv: list[str]) -> int:
    if argv and argv[0] in ("-h", "--help"):
        print(__doc__)
        print("suites: " + ", ".join(SUITES))
        return 0
    names = [a for a in argv if a in SUITES] or list(SUITES)
    rest = [a for a in argv if a not in SUITES]
    status = 0
    for name in names:
        print(f"## {name}\n")
        status |= SUITES[name](rest)
    return status


sys.exit(main(sys.argv[1:]))
