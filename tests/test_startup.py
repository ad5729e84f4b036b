"""Start-up cost: ``import runtime`` leaves NumPy and Arrow alone until a columnar batch needs them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PROGRAM = """
import json, sys
import runtime
from runtime import execute

def main(worker):
    def build(scope):
        handle, stream = scope.new_input()
        return handle, stream.exchange(lambda x: x).map(lambda x: x + 1).probe()
    handle, probe = worker.dataflow(build)
    handle.send_batch(list(range(100)))
    handle.advance_to(1)
    worker.step_while(lambda: probe.less_than(1))
    return 'numpy' in sys.modules

loaded = execute(main, workers=2)
print(json.dumps({"modules": [m for m in ("numpy", "pyarrow") if m in sys.modules], "workers": loaded}))
"""


def run(program: str) -> dict[str, object]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    done = subprocess.run(
        [sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=60, check=True
    )
    result: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    return result


def test_import_runtime_and_a_record_wise_dataflow_do_not_import_numpy_or_arrow() -> None:
    assert run(PROGRAM) == {"modules": [], "workers": [False, False]}


def test_numpy_is_imported_when_a_columnar_batch_is_used() -> None:
    program = PROGRAM.replace(
        "handle.send_batch(list(range(100)))", "import numpy; handle.send_batch(numpy.arange(100))"
    ).replace("stream.exchange(lambda x: x).map(lambda x: x + 1)", "stream.exchange_batch(lambda b: b)")
    assert run(program) == {"modules": ["numpy"], "workers": [True, True]}
