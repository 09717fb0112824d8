"""byoc benchmarks: run with `python -m benchmarks` (see README, "Benchmarks").

Importing the package bounds how long idle worker threads spin, before anything loads
the libraries that own them, unless the environment already sets the variable:

* GNU OpenMP (GOMP_SPINCOUNT): oneDNN's wheel is threaded by it, and its default spin
  (300,000 rounds, several milliseconds here) kept the second core busy after every
  oneDNN call, so the system timed next in a round lost that core (byoc's `fused`
  conv: 6.2 ms right after oneDNN, 3.4 ms with 10,000 rounds, and oneDNN itself was
  no slower).
* OpenBLAS (OPENBLAS_THREAD_TIMEOUT, a power of two of cycles): numpy's OpenBLAS and
  the cblas backend's each keep their worker spinning (yielding) for 2^28 cycles,
  tens of milliseconds, after every call. oneDNN's dense, timed after them, swung
  between 4.6 and 10.7 ms and numpy's matmul took 17 ms; with 2^16 cycles (about
  16 µs) they take 4.7 and 9.3 ms, and OpenBLAS itself is no slower.

Both settings apply to every system of the run alike and are recorded with the
machine's description (docs/performance.md).
"""

import os

OPENMP_SPIN_COUNT = "10000"
OPENBLAS_THREAD_TIMEOUT = "16"
os.environ.setdefault("GOMP_SPINCOUNT", OPENMP_SPIN_COUNT)
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", OPENBLAS_THREAD_TIMEOUT)
