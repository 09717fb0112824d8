"""The generated C and C++ under AddressSanitizer and UndefinedBehaviorSanitizer.

tests/sanitize_driver.py builds and runs the golden graphs and a batch of random
graphs on every compiled backend, with ``-fsanitize=address,undefined``, in a
subprocess that preloads the sanitizer runtimes. The run must be clean. Two
canaries (a heap overflow, a signed overflow) show that the setup does report.

Skipped when gcc's sanitizer runtimes are missing, unless ``BYOC_REQUIRE_SANITIZERS=1``
(which ``.ci/run`` sets, so CI cannot skip them silently).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
DRIVER = TESTS / "sanitize_driver.py"
FLAGS = "-fsanitize=address,undefined -fno-omit-frame-pointer"
REPORTS = ("runtime error", "AddressSanitizer", "LeakSanitizer", "UndefinedBehaviorSanitizer")


def runtime_library(name: str) -> Path | None:
    """gcc's sanitizer runtime ``name`` (libasan.so, libubsan.so), or None if missing."""
    if shutil.which("gcc") is None:
        return None
    out = subprocess.run(["gcc", f"-print-file-name={name}"], capture_output=True, text=True).stdout.strip()
    path = Path(out)
    return path if path.is_absolute() and path.exists() else None


ASAN, UBSAN = runtime_library("libasan.so"), runtime_library("libubsan.so")
MISSING = ASAN is None or UBSAN is None or shutil.which("g++") is None

if MISSING and os.environ.get("BYOC_REQUIRE_SANITIZERS") == "1":
    raise RuntimeError(
        "BYOC_REQUIRE_SANITIZERS=1 but gcc's sanitizer runtimes (libasan, libubsan) or g++ are missing; "
        "on Debian/Ubuntu: apt-get install gcc g++ (they come with libgcc-<version>-dev)"
    )
pytestmark = [
    pytest.mark.sanitizers,
    pytest.mark.skipif(MISSING, reason="gcc's sanitizer runtimes (libasan, libubsan) are not installed"),
]


def sanitizer_env(cache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("BYOC_SPEC_PATH", "LD_PRELOAD")}
    env.update(
        CC="gcc",
        CXX="g++",
        CFLAGS=FLAGS,
        CXXFLAGS=FLAGS,
        BYOC_CACHE_DIR=str(cache),
        LD_PRELOAD=f"{ASAN}:{UBSAN}",
        ASAN_OPTIONS="detect_leaks=0",
        UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1",
    )
    return env


def run_driver(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(DRIVER), *args],
        env=sanitizer_env(tmp / "cache"),
        cwd=tmp,
        capture_output=True,
        text=True,
        timeout=900,
    )


@pytest.mark.parametrize(
    ("canary", "report"),
    [("asan", "AddressSanitizer: heap-buffer-overflow"), ("ubsan", "runtime error: signed integer overflow")],
)
def test_the_sanitizers_report_a_canary(tmp_path, canary, report):
    proc = run_driver(tmp_path, "--canary", canary)
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert report in proc.stderr, proc.stderr[-3000:]


def test_generated_code_is_clean_under_the_sanitizers(tmp_path):
    proc = run_driver(tmp_path)
    shown = f"--- stdout:\n{proc.stdout[-4000:]}\n--- stderr:\n{proc.stderr[-6000:]}"
    assert proc.returncode == 0, shown
    for report in REPORTS:
        assert report not in proc.stderr, shown
    m = re.search(r"^sanitizer runs: (\d+) golden \+ (\d+) random$", proc.stdout, re.M)
    assert m, shown
    golden, random = int(m.group(1)), int(m.group(2))
    assert golden >= 20 and random >= 10, shown
