"""A codec registered without a name in the script being run works on several processes.

The readings travel as main's argument, between workers, and back as results.

The script is ``__main__`` in the process that runs it and ``__mp_main__`` in the
processes started for it; the codec's default name must be the same in both.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = textwrap.dedent(
    """
    import functools
    from dataclasses import dataclass

    from runtime import execute, register_codec


    @dataclass(frozen=True)
    class Reading:
        sensor: str
        value: float


    register_codec(Reading, lambda r: [r.sensor, r.value], lambda v: Reading(*v))


    def main(worker, given):
        seen = []

        def build(scope):
            readings, stream = scope.new_input()
            stream.exchange(lambda r: r.sensor).inspect(seen.append)
            return readings

        readings = worker.dataflow(build)
        if worker.index == 0:
            readings.send_batch(given)
        readings.close()
        worker.run_to_completion()
        return seen


    if __name__ == "__main__":
        given = [Reading(f"s{i}", i / 2) for i in range(8)]
        results = execute(functools.partial(main, given=given), processes=2, workers=1)
        print(sorted((r.sensor, r.value) for result in results for r in result))
    """
)


def test_a_codec_registered_in_the_script_without_a_name_works_across_processes(tmp_path: Path) -> None:
    script = tmp_path / "readings.py"
    script.write_text(SCRIPT)
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr
    expected = sorted((f"s{i}", i / 2) for i in range(8))
    assert done.stdout.strip() == str(expected)
