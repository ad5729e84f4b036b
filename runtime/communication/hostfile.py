"""Where the processes of a cluster listen: ``host:port`` endpoints, and the hostfile that lists them.

Every process reads the same hostfile (one ``host:port`` per line, process ``P``
on line ``P``); a malformed line is refused naming the file and the line, and
nothing longer than :data:`MAX_HOSTFILE_LINE` characters is read whole.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Endpoint:
    """Where one process listens."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


MAX_HOSTFILE_LINE = 4096
"""The longest line of a hostfile, in characters; a longer one is refused rather than read whole."""


def port_number(text: str) -> int | None:
    """The port ``text`` says: 1 to 5 ASCII digits, at most 65535 (0 included); ``None`` for anything else."""
    if not (text.isascii() and text.isdigit() and len(text) <= 5):
        return None
    port = int(text)
    return port if port <= 65535 else None


def parse_endpoint(text: str, where: str = "address") -> Endpoint:
    """Parse ``host:port`` (an IPv6 host may be in brackets); ``ValueError`` naming ``where`` if malformed.

    The host must be non-empty and free of whitespace and control characters
    (an empty host would listen on every interface, a NUL fails deep in the
    socket library), and the port ASCII digits from 1 to 65535.
    """
    host, sep, port = text.strip().rpartition(":")
    host = host.strip("[]")
    valid_host = host.isprintable() and not any(character.isspace() for character in host)
    number = port_number(port)
    if not sep or not host or not valid_host or not number:  # port 0 is no place to connect to
        raise ValueError(f"{where}: expected host:port, got {text.strip()!r}")
    return Endpoint(host, number)


def read_hostfile(path: str) -> list[Endpoint]:
    """The ``host:port`` lines of a hostfile (blank lines and ``#`` comments skipped).

    ``ValueError`` (naming the file and line) for a malformed line, one longer
    than :data:`MAX_HOSTFILE_LINE` characters, or bytes that are not UTF-8.
    """
    endpoints = []
    with open(path, encoding="utf-8") as file:
        number = 0
        while True:
            try:
                line = file.readline(MAX_HOSTFILE_LINE + 1)
            except UnicodeDecodeError as error:
                raise ValueError(f"{path}, at or after line {number + 1}: not UTF-8 text ({error.reason})") from None
            if not line:
                break
            number += 1
            if len(line) > MAX_HOSTFILE_LINE:
                raise ValueError(f"{path}, line {number}: longer than {MAX_HOSTFILE_LINE} characters")
            text = line.split("#", 1)[0].strip()
            if text:
                endpoints.append(parse_endpoint(text, f"{path}, line {number}"))
    return endpoints
