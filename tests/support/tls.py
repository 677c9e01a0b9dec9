"""A throw-away certificate authority for HTTPS tests, made at test time.

:func:`make_ca` writes ``ca.pem`` (the CA certificate a client trusts, e.g. through
``SSL_CERT_FILE``) and ``server.pem``/``server.key`` (a server certificate the CA signed
for ``localhost``, ``127.0.0.1`` and any extra names) into a folder, and returns the paths;
:func:`server_context` loads the server side into an ``ssl.SSLContext``.
"""

import datetime
import ipaddress
import ssl
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


@dataclass
class Authority:
    ca: Path
    cert: Path
    key: Path


def _name(text):
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, text)])


def _pem(path, data):
    path.write_bytes(data)
    return path


def make_ca(folder, names=()):
    folder = Path(folder)
    now = datetime.datetime.now(datetime.timezone.utc)
    valid = dict(not_valid_before=now - datetime.timedelta(days=1),
                 not_valid_after=now + datetime.timedelta(days=2))
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (x509.CertificateBuilder(**valid).subject_name(_name("term2acp test CA"))
          .issuer_name(_name("term2acp test CA")).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number())
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False,
                                       data_encipherment=False, key_agreement=False,
                                       encipher_only=False, decipher_only=False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()),
                         critical=False)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    alt = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    alt += [x509.DNSName(n) for n in names]
    cert = (x509.CertificateBuilder(**valid).subject_name(_name("localhost"))
            .issuer_name(ca.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .add_extension(x509.SubjectAlternativeName(alt), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]),
                           critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    return Authority(
        ca=_pem(folder / "ca.pem", ca.public_bytes(pem)),
        cert=_pem(folder / "server.pem", cert.public_bytes(pem)),
        key=_pem(folder / "server.key", key.private_bytes(
            pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())))


def server_context(authority):
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(authority.cert), str(authority.key))
    return context
