"""`/metrics` security from a web config file in the format Prometheus exporters use
(exporter-toolkit): TLS with an optional client CA, and basic auth with bcrypt-hashed passwords.

    tls_server_config:
      cert_file: server.crt
      key_file: server.key
      client_ca_file: ca.crt                     # optional
      client_auth_type: RequireAndVerifyClientCert
    basic_auth_users:
      prometheus: $2b$12$...                     # htpasswd -nBC 12 "" | tr -d ':'
"""

from __future__ import annotations

import _ssl
import base64
import binascii
import ctypes
import hashlib
import re
import ssl
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Annotated, Any, Literal

import bcrypt
from pydantic import AfterValidator, Field, model_validator

from cdcwatch.config import ConfigError, StrictModel, load_yaml_model

__all__ = ["TlsServerConfig", "WebConfig", "load_web_config", "require_basic_auth", "server_ssl_context"]

ClientAuth = Literal["NoClientCert", "RequestClientCert", "RequireAnyClientCert", "VerifyClientCertIfGiven",
                     "RequireAndVerifyClientCert"]


def _bcrypt(hashed: str) -> str:
    if not hashed.startswith(("$2a$", "$2b$", "$2y$")):
        raise ValueError("the password is not a bcrypt hash")
    return hashed


BcryptHash = Annotated[str, AfterValidator(_bcrypt)]


class TlsServerConfig(StrictModel):
    cert_file: str
    key_file: str
    client_ca_file: str | None = None
    client_auth_type: ClientAuth = "NoClientCert"
    min_version: Literal["TLS12", "TLS13"] = "TLS12"

    @model_validator(mode="after")
    def _client_ca_needs_client_auth(self) -> TlsServerConfig:
        if self.client_ca_file and self.client_auth_type == "NoClientCert":  # exporter-toolkit refuses it too
            raise ValueError("client_ca_file is set but client_auth_type is NoClientCert")
        return self


class WebConfig(StrictModel):
    tls_server_config: TlsServerConfig | None = None
    basic_auth_users: dict[str, BcryptHash] = Field(default_factory=dict)


def load_web_config(path: str | Path) -> WebConfig:
    """The web config, checked: keys, types, bcrypt hashes, and that the TLS files load (relative names are read
    next to the web config). A ConfigError otherwise, one line per problem naming its key path."""
    source = str(path)
    web = load_yaml_model(path, WebConfig)
    tls = web.tls_server_config
    if tls is None:
        return web
    base = Path(path).parent
    files = {"cert_file": tls.cert_file, "key_file": tls.key_file, "client_ca_file": tls.client_ca_file}
    problems = []
    for key, name in files.items():
        if name is None:
            continue
        try:
            (base / name).read_bytes()
        except OSError as exc:
            problems.append(f"tls_server_config.{key}: cannot read {base / name}: {exc.strerror}")
    if problems:
        raise ConfigError(source, problems)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(base / tls.cert_file, base / tls.key_file)
    except ssl.SSLError as exc:
        problems.append(f"tls_server_config: cert_file and key_file are not a PEM certificate and its key: {_reason(exc)}")
    if tls.client_ca_file:
        try:
            context.load_verify_locations(base / tls.client_ca_file)
        except ssl.SSLError as exc:
            problems.append(f"tls_server_config.client_ca_file: not PEM CA certificates: {_reason(exc)}")
    if problems:
        raise ConfigError(source, problems)
    try:
        server_ssl_context(tls, base)
    except ValueError as exc:
        raise ConfigError(source, [f"tls_server_config.client_auth_type: {exc}"]) from None
    return web


def _reason(exc: ssl.SSLError) -> str:
    """OpenSSL's reason, without the C source line: `[X509: KEY_VALUES_MISMATCH] key values mismatch`."""
    return re.sub(r"\s*\(_ssl\.c:\d+\)$", "", str(exc.strerror or exc))


def server_ssl_context(tls: TlsServerConfig, base: Path) -> ssl.SSLContext:
    """A server context; relative file names are read next to the web config file.

    client_auth_type means what it means in exporter-toolkit (Go's crypto/tls): RequestClientCert and
    RequireAnyClientCert ask for a client certificate (the latter insists on one) but never verify it;
    VerifyClientCertIfGiven and RequireAndVerifyClientCert verify it against client_ca_file.
    """
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_3 if tls.min_version == "TLS13" else ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(base / tls.cert_file, base / tls.key_file)
    if tls.client_ca_file:
        context.load_verify_locations(base / tls.client_ca_file)
    context.verify_mode = {"RequireAndVerifyClientCert": ssl.CERT_REQUIRED, "RequireAnyClientCert": ssl.CERT_REQUIRED,
                           "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
                           "RequestClientCert": ssl.CERT_OPTIONAL}.get(tls.client_auth_type, ssl.CERT_NONE)
    if tls.client_auth_type in ("RequestClientCert", "RequireAnyClientCert"):
        _accept_unverified_client_certificates(context)
    return context


_VerifyCallback = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_void_p)
_ACCEPT_ANY = _VerifyCallback(lambda preverify_ok, store: 1)


def _accept_unverified_client_certificates(context: ssl.SSLContext) -> None:
    """Keep the context's request for a client certificate but accept any certificate sent.

    Python's ssl module verifies every peer certificate it asks for; OpenSSL's verify callback, set on
    the context's SSL_CTX (the first field after the object header), is the only way to ask without
    verifying. The verify mode read back through OpenSSL must match the one Python set, or the pointer
    is not the SSL_CTX and nothing is written.
    """
    unavailable = ValueError("client_auth_type RequestClientCert or RequireAnyClientCert: this Python's ssl module "
                             "cannot be made to accept unverified client certificates")
    try:  # OpenSSL's functions as _ssl links them (absent where it is linked statically)
        libssl = ctypes.CDLL(_ssl.__file__)
        get_mode, set_verify = libssl.SSL_CTX_get_verify_mode, libssl.SSL_CTX_set_verify
    except (OSError, AttributeError):
        raise unavailable from None
    get_mode.argtypes, get_mode.restype = [ctypes.c_void_p], ctypes.c_int
    set_verify.argtypes, set_verify.restype = [ctypes.c_void_p, ctypes.c_int, _VerifyCallback], None
    ssl_ctx = ctypes.c_void_p.from_address(id(context) + object.__basicsize__).value
    mode = {ssl.CERT_OPTIONAL: 0x01, ssl.CERT_REQUIRED: 0x03}[context.verify_mode]  # SSL_VERIFY_PEER, + FAIL_IF_NO_PEER_CERT
    if not ssl_ctx or get_mode(ssl_ctx) != mode:
        raise unavailable
    set_verify(ssl_ctx, mode, _ACCEPT_ANY)


def require_basic_auth(app: Callable[..., Iterable[bytes]], users: dict[str, str]) -> Callable[..., Iterable[bytes]]:
    """`app` behind basic auth; a bcrypt check per new (user, password), then remembered (bcrypt is slow on purpose)."""
    verified: set[str] = set()
    lock = threading.Lock()

    def allowed(header: str) -> bool:
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "basic":
            return False
        try:
            user, _, password = base64.b64decode(token, validate=True).decode("utf-8").partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return False
        hashed = users.get(user)
        if hashed is None:
            return False
        key = hashlib.sha256(f"{user}\0{password}\0{hashed}".encode()).hexdigest()
        with lock:
            if key in verified:
                return True
        if bcrypt.checkpw(password.encode(), hashed.encode()):
            with lock:
                verified.add(key)
            return True
        return False

    def guarded(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if allowed(environ.get("HTTP_AUTHORIZATION", "")):
            return app(environ, start_response)
        start_response("401 Unauthorized", [("Content-Type", "text/plain"), ("WWW-Authenticate", 'Basic realm="cdcwatch"')])
        return [b"Unauthorized\n"]

    return guarded
