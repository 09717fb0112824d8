"""The ccompiler fast_math option must not change floating point for the whole process.

-ffast-math at link time pulls in crtfastmath.o, whose constructor turns on
flush-to-zero for every thread of the process that loads the library, numpy
included. The option therefore uses only the value-changing flags.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

from conftest import EXAMPLES


def test_loading_a_fast_math_library_keeps_subnormals(tmp_path):
    code = textwrap.dedent(
        f"""
        import numpy as np
        import byoc
        model = byoc.build({str(EXAMPLES / "guide_whole_graph.graph")!r}, options={{"fast_math": "true"}})
        tiny = np.array([1e-45], dtype=np.float32)
        assert (tiny * np.float32(1.0))[0] != 0, "flush-to-zero is on"
        inputs = {{n: np.ones((10, 10), np.float32) for n in model.executor().input_names}}
        (out,) = model(**inputs)
        assert (tiny * np.float32(1.0))[0] != 0, "flush-to-zero is on after a run"
        print("ok")
        """
    )
    env = {"BYOC_CACHE_DIR": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"
