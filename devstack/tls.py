"""A throw-away certificate authority for the local stack's TLS listeners (openssl)."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from devstack.procs import StackError, require_binary

__all__ = ["KEYSTORE_PASSWORD", "Pki", "make_pki"]

KEYSTORE_PASSWORD = "devstack-keystore"


@dataclass(frozen=True)
class Pki:
    """A CA and certificates it signed: `cert(name)` / `key(name)` are PEM files (keys unencrypted PKCS#8)."""

    dir: Path

    @property
    def ca(self) -> Path:
        return self.dir / "ca.crt"

    def cert(self, name: str) -> Path:
        return self.dir / f"{name}.crt"

    def key(self, name: str) -> Path:
        return self.dir / f"{name}.key"

    def keystore(self, name: str) -> Path:
        """Key and certificate in one PEM file (Kafka's `ssl.keystore.type=PEM`)."""
        return self.dir / f"{name}.pem"

    def pkcs12(self, name: str) -> Path:
        """Key and certificate as a PKCS#12 keystore with password KEYSTORE_PASSWORD (Jetty, Java clients)."""
        return self.dir / f"{name}.p12"


def _openssl(*args: str) -> None:
    done = subprocess.run([require_binary("openssl", "openssl"), *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise StackError(f"openssl {args[0]} failed: {done.stderr.strip()[-400:]}")


def make_pki(directory: Path, names: tuple[str, ...] = ("server",), ca_name: str = "cdcwatch devstack CA",
             alt_names: str = "IP:127.0.0.1,DNS:localhost") -> Pki:
    """A new CA and one certificate per name, valid for `alt_names` (127.0.0.1 and localhost), for one day."""
    pki = Pki(directory)
    directory.mkdir(parents=True, exist_ok=True)
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(directory / "ca.key"), "-out", str(pki.ca),
             "-days", "1", "-subj", f"/CN={ca_name}")
    for name in names:
        csr = directory / f"{name}.csr"
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(pki.key(name)), "-out", str(csr),
                 "-subj", f"/CN={name}", "-addext", f"subjectAltName={alt_names}")
        _openssl("x509", "-req", "-in", str(csr), "-CA", str(pki.ca), "-CAkey", str(directory / "ca.key"),
                 "-CAcreateserial", "-out", str(pki.cert(name)), "-days", "1", "-copy_extensions", "copy")
        pki.keystore(name).write_text(pki.key(name).read_text() + pki.cert(name).read_text())
        _openssl("pkcs12", "-export", "-in", str(pki.cert(name)), "-inkey", str(pki.key(name)), "-out", str(pki.pkcs12(name)),
                 "-passout", f"pass:{KEYSTORE_PASSWORD}", "-name", name)
    return pki
