"""TLS for the cluster mesh: every connection encrypted, and both ends' certificates checked against a CA.

``--tls CERT KEY --tls-ca CA`` (or :func:`tls_config`) gives every process a
certificate and key, and the certificate authority that signed the cluster's
certificates.  The accepting side of each connection is the TLS server, the
connecting side the client, and each requires the other's certificate to be
signed by that CA (mutual TLS, version 1.2 at least).  Host names are not
checked (processes are named by their index, and the token handshake that
follows still proves membership), so use a CA that signs only this cluster's
certificates.  The keyed MAC on every record (:mod:`runtime.communication.seal`)
stays on inside TLS.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from pathlib import Path

from runtime.errors import ConfigurationError


@dataclass(frozen=True)
class TlsConfig:
    """One process's certificate, key, and the CA its peers' certificates must be signed by."""

    cert: str
    key: str
    ca: str
    server: ssl.SSLContext = field(repr=False, compare=False)
    """The context of the accepting side of a connection."""
    client: ssl.SSLContext = field(repr=False, compare=False)
    """The context of the connecting side."""


def _context(purpose: int, cert: str, key: str, ca: str) -> ssl.SSLContext:
    context = ssl.SSLContext(purpose)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert, key)
    context.load_verify_locations(cafile=ca)
    context.verify_mode = ssl.CERT_REQUIRED
    if purpose == ssl.PROTOCOL_TLS_CLIENT:
        context.check_hostname = False  # peers are known by index; the CA should sign only this cluster
    else:
        context.num_tickets = 0  # nothing arrives after the handshake but the records
    return context


def tls_config(cert: str, key: str, ca: str) -> TlsConfig:
    """Load ``cert``, ``key`` and ``ca`` (PEM files); a :class:`ConfigurationError` says what is wrong."""
    for name, path in (("certificate", cert), ("key", key), ("CA certificate", ca)):
        if not Path(path).is_file():
            raise ConfigurationError(f"TLS: the {name} file {path!r} does not exist")
    try:
        server = _context(ssl.PROTOCOL_TLS_SERVER, cert, key, ca)
        client = _context(ssl.PROTOCOL_TLS_CLIENT, cert, key, ca)
    except (ssl.SSLError, OSError, ValueError) as error:
        raise ConfigurationError(
            f"TLS: cannot use certificate {cert!r}, key {key!r} and CA {ca!r}: {error}; give PEM files, "
            "the key matching the certificate"
        ) from None
    return TlsConfig(cert, key, ca, server, client)
