"""``sys.exit()`` inside an operator's user function: a failure naming the operator, at every worker count.

Found by an audit: ``sys.exit(3)`` (or ``raise SystemExit``) in a ``map``,
``unary`` or ``inspect`` function was reported as ``worker 0 of 1 failed:
SystemExit: 3``, naming no operator, time or line, while an exception there
names them all.  It now fails the run as an exception does, naming the operator,
and says that the function called ``sys.exit`` and what to do instead; one
worker, two threads and two processes report it alike.  Ctrl-C
(``KeyboardInterrupt``) still stops the whole run, and ``sys.exit`` outside
the operators keeps its meaning.
"""

from __future__ import annotations

import functools
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from runtime import WorkerFailed, execute
from scopes import Pipeline
from scopes.errors import OperatorFailed

ROOT = Path(__file__).resolve().parent.parent

MODES = [("workers", 1), ("workers", 2), ("processes", 2)]


class Halt(BaseException):
    """A BaseException that is not an Exception, as some libraries raise to unwind."""


def leave(record: int, how: str) -> int:
    """Return ``record``, except for record 2: end the way ``how`` says."""
    if record == 2:
        if how == "sys.exit(3)":
            sys.exit(3)
        if how == "sys.exit()":
            sys.exit()
        if how == "SystemExit('bye')":
            raise SystemExit("bye")
        if how == "Halt":
            raise Halt("unwinding")
        if how == "KeyboardInterrupt":
            raise KeyboardInterrupt
    return record


def quitting_main(worker, family: str, how: str) -> None:
    """Build one operator of ``family`` named 'Quitter' whose user function ends the way ``how`` says on record 2."""

    def build(scope):
        handle, stream = scope.new_input()
        if family == "map":
            stream.map(lambda record: leave(record, how), name="Quitter").probe()
        elif family == "inspect":
            stream.inspect(lambda record: leave(record, how), name="Quitter").probe()
        elif family == "exchange":
            stream.exchange(lambda record: leave(record, how), name="Quitter").probe()
        else:

            def constructor(capability, info):
                capability.drop()

                def logic(input, output):
                    for ref, batch in input:
                        output.give_batch(ref, [leave(record, how) for record in batch])

                return logic

            stream.unary(Pipeline, "Quitter", constructor).probe()
        return handle

    handle = worker.dataflow(build)
    handle.advance_to(4)
    if worker.index == worker.peers - 1:
        handle.send_batch([1, 2, 3])


def run(main, mode: tuple[str, int]):
    kind, count = mode
    if kind == "processes":
        return execute(main, processes=count, stall_timeout=20)
    return execute(main, workers=count, stall_timeout=20)


@pytest.mark.parametrize("mode", MODES, ids=lambda mode: f"{mode[1]} {mode[0]}")
@pytest.mark.parametrize("family", ["map", "unary", "inspect", "exchange"])
def test_sys_exit_in_an_operator_fails_naming_the_operator(mode, family):
    with pytest.raises(WorkerFailed) as failed:
        run(functools.partial(quitting_main, family=family, how="sys.exit(3)"), mode)
    message = str(failed.value)
    peers = mode[1]
    assert f"worker {peers - 1} of {peers} failed in operator 'Quitter'" in message, message
    assert "built at test_user_exit.py:" in message and "at time 4" in message, message
    assert "the function called sys.exit(3)" in message, message
    assert "raise an exception to fail the run, or return and close the dataflow's inputs to end it" in message
    if mode[0] == "workers":  # in this process: the chain holds the operator's failure and the SystemExit
        cause = failed.value.__cause__
        assert isinstance(cause, OperatorFailed) and cause.operator == "Quitter" and cause.time == 4
        assert isinstance(cause.__cause__, SystemExit) and cause.__cause__.code == 3


@pytest.mark.parametrize("mode", MODES, ids=lambda mode: f"{mode[1]} {mode[0]}")
@pytest.mark.parametrize(
    ("how", "said"),
    [
        ("sys.exit()", "the function called sys.exit()"),
        ("SystemExit('bye')", "the function called sys.exit('bye')"),
        ("Halt", "Halt: unwinding (Halt is a BaseException, not an Exception"),
    ],
)
def test_every_way_out_of_a_map_names_the_operator(mode, how, said):
    with pytest.raises(WorkerFailed) as failed:
        run(functools.partial(quitting_main, family="map", how=how), mode)
    message = str(failed.value)
    assert "failed in operator 'Quitter'" in message and said in message, message


@pytest.mark.parametrize("workers", [1, 2])
def test_keyboard_interrupt_in_an_operator_still_stops_the_whole_run(workers, capsys):
    """Ctrl-C arrives as KeyboardInterrupt wherever the main thread is, often inside a user function: it
    stops every worker, prints one line and exits with status 130, as before."""
    with pytest.raises(SystemExit) as stopped:
        execute(functools.partial(quitting_main, family="map", how="KeyboardInterrupt"), workers=workers)
    assert stopped.value.code == 130
    assert f"pytimely: interrupted (Ctrl-C); stopped {workers} worker(s)" in capsys.readouterr().err


def test_sys_exit_outside_the_operators_keeps_its_meaning(tmp_path):
    """The program's own sys.exit, after a run, still ends it with its status."""
    script = tmp_path / "exits.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import sys
            sys.path.insert(0, {str(ROOT)!r})
            from runtime import execute

            def main(worker):
                worker.dataflow(lambda scope: scope.to_stream([1, 2]).map(lambda x: x).probe())

            if __name__ == "__main__":
                execute(main, workers=2)
                sys.exit(7)
            """
        )
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 7 and done.stderr == "", done.stderr
