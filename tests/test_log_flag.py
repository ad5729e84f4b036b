"""``--log`` and ``PYTIMELY_LOG`` turn instrumentation on for programs started through ``execute_from_args``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from runtime import execute_from_args
from runtime.instrument import read_events
from runtime.worker import Worker

ROOT = Path(__file__).resolve().parent.parent


def count_main(worker: Worker) -> int:
    """Count ten records through an exchange; return how many this worker saw."""
    seen: list[int] = []

    def build(scope):  # type: ignore[no-untyped-def]
        handle, stream = scope.new_input("numbers")
        stream.exchange(lambda x: x).inspect(seen.append)
        return handle

    handle = worker.dataflow(build)
    if worker.index == 0:
        handle.send_batch(range(10))
    handle.close()
    worker.step_while(lambda: bool(worker.dataflows))
    return len(seen)


def test_log_flag_writes_a_recording_of_the_run(tmp_path: Path) -> None:
    path = tmp_path / "run.msgpack"
    assert sum(execute_from_args(count_main, ["-w", "2", "--log", str(path)])) == 10
    kinds = {type(event).__name__ for event in read_events(path)}
    assert any("Input" in kind for kind in kinds), kinds
    assert any("Frontier" in kind for kind in kinds), kinds


def test_the_environment_variable_reaches_every_process_of_a_local_cluster(tmp_path: Path) -> None:
    script = (
        f"import sys; sys.path.insert(0, {str(ROOT)!r}); sys.path.insert(0, {str(ROOT / 'tests')!r})\n"
        "from test_log_flag import count_main\n"
        "from runtime import execute_from_args\n"
        "print(sum(execute_from_args(count_main, ['-n', '2', '-w', '1'])))\n"
    )
    env = dict(os.environ, PYTIMELY_LOG=str(tmp_path / "cluster.msgpack"))
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "10"
    files = sorted(path.name for path in tmp_path.iterdir())
    assert files == ["cluster.0.msgpack", "cluster.1.msgpack"], files
    for name in files:
        assert read_events(tmp_path / name), name
