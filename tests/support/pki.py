"""A throwaway certificate authority, made per test with `cryptography`.

`make_pki(directory)` writes PEM files for a CA, a server certificate (localhost, 127.0.0.1) and
a client certificate signed by it, plus a client certificate from an unrelated CA that the
server must refuse; `renew_client_cert` rotates a client certificate in place.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class Pki:
    ca_cert: Path
    ca_key: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    stranger_cert: Path
    """A client certificate from another CA: the server must refuse it."""
    stranger_key: Path


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> Path:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)
    return path


def _write_cert(cert: x509.Certificate, path: Path) -> Path:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return path


def _ca(common_name: str) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(_name(common_name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )  # fmt: skip
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def _leaf(
    common_name: str,
    ca: tuple[x509.Certificate, ec.EllipticCurvePrivateKey],
    *,
    server: bool,
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    ca_cert, ca_key = ca
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
    )
    if server:
        builder = builder.add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
    return builder.sign(ca_key, hashes.SHA256()), key


def make_pki(directory: Path) -> Pki:
    directory.mkdir(parents=True, exist_ok=True)
    ca = _ca("reactive-temporal test CA")
    server_cert, server_key = _leaf("localhost", ca, server=True)
    client_cert, client_key = _leaf("reactive-temporal worker", ca, server=False)
    stranger_cert, stranger_key = _leaf("stranger", _ca("some other CA"), server=False)
    return Pki(
        ca_cert=_write_cert(ca[0], directory / "ca.pem"),
        ca_key=_write_key(ca[1], directory / "ca.key"),
        server_cert=_write_cert(server_cert, directory / "server.pem"),
        server_key=_write_key(server_key, directory / "server.key"),
        client_cert=_write_cert(client_cert, directory / "client.pem"),
        client_key=_write_key(client_key, directory / "client.key"),
        stranger_cert=_write_cert(stranger_cert, directory / "stranger.pem"),
        stranger_key=_write_key(stranger_key, directory / "stranger.key"),
    )


def renew_client_cert(pki: Pki, cert: Path, key: Path) -> int:
    """A new client certificate and key from the same CA, written over `cert` and `key` as a
    rotation does (the key first); returns its serial number."""
    ca_cert = x509.load_pem_x509_certificate(pki.ca_cert.read_bytes())
    ca_key = serialization.load_pem_private_key(pki.ca_key.read_bytes(), password=None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    renewed, renewed_key = _leaf("reactive-temporal worker", (ca_cert, ca_key), server=False)
    _write_key(renewed_key, key)
    _write_cert(renewed, cert)
    return renewed.serial_number
