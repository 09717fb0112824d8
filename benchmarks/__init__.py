"""byoc benchmarks: run with `python -m benchmarks` (see README, "Benchmarks").

Importing the package bounds how long GNU OpenMP's idle workers spin (GOMP_SPINCOUNT,
unless the environment sets it), before anything loads libgomp: oneDNN's wheel is
threaded by it, and its default spin (300,000 rounds, several milliseconds here) kept
the second core busy after every oneDNN call, so the system timed next in a round
lost that core (byoc's `fused` conv: 6.2 ms right after oneDNN, 3.4 ms with 10,000
rounds, and oneDNN itself was no slower; docs/performance.md). The setting applies to
every system of the run alike and is recorded with the machine's description.
"""

import os

OPENMP_SPIN_COUNT = "10000"
os.environ.setdefault("GOMP_SPINCOUNT", OPENMP_SPIN_COUNT)
