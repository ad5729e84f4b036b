"""The text of a ``main`` that streams records through an exchange for ever, for the tests that run it in processes.

The fault tests start it in a cluster, then kill, stop or lose one of its
processes while records are in flight; each adds its own lines at the end of
the loop (a pause, a line printed once the processes stream).
"""

from __future__ import annotations

import textwrap

EXCHANGE_LOOP = """\
def main(worker):
    def build(scope):
        handle, stream = scope.new_input()
        return handle, stream.exchange(lambda x: x).probe()
    handle, probe = worker.dataflow(build)
    epoch = 0
    while True:
        handle.send_batch(list(range({records})))
        epoch += 1
        handle.advance_to(epoch)
        worker.step_while(lambda: probe.less_than(epoch))
"""


def exchange_loop(records: int, then: str = "") -> str:
    """``main``'s source: every epoch sends ``records`` numbers through an exchange and waits for them; ``then``
    (statements written at the loop's indentation, dedented here) ends each round.  Braces in the result are
    doubled, so that it can go into a script template that is filled with ``str.format``."""
    body = EXCHANGE_LOOP.format(records=records) + textwrap.indent(textwrap.dedent(then).strip("\n"), " " * 8)
    return body.replace("{", "{{").replace("}", "}}") + "\n"
