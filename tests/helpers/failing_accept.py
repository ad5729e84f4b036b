"""A listening socket whose next ``accept`` fails, as it does when the process is out of descriptors (EMFILE)."""

from __future__ import annotations

import errno
import socket


class FailingAccept:
    """Wraps a listening socket: the next ``failures`` calls of ``accept`` raise EMFILE, the rest accept."""

    def __init__(self, sock: socket.socket, failures: int = 1) -> None:
        """Wrap ``sock``; its next ``failures`` accepts fail."""
        self.sock = sock
        self.failures = failures

    def accept(self) -> tuple[socket.socket, object]:
        """Fail while failures are left, then accept on the wrapped socket."""
        if self.failures:
            self.failures -= 1
            raise OSError(errno.EMFILE, "Too many open files")
        return self.sock.accept()

    def __getattr__(self, name: str) -> object:
        return getattr(self.sock, name)
