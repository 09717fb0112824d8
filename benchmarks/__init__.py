"""byoc benchmarks: run with `python -m benchmarks` (see README, "Benchmarks")."""
