"""Encryption of stored secrets (model API keys) with the deployment secret.

AES-256-GCM; the 256-bit key is derived from the deployment secret
(`settings.persistent_secret("secret_key")`) with HKDF-SHA256, so any secret string works.
Token format: base64 (standard alphabet) of `nonce (12 bytes) || ciphertext+tag`.
The gateway encrypts with `encrypt_secret`, the dispatcher decrypts with `decrypt_secret`.

`cryptography` (~8 MB resident) is imported with the first secret encrypted or decrypted: most
processes import this module and never hold a stored secret.
"""

from __future__ import annotations

import base64
import binascii
import os
from typing import TYPE_CHECKING

from shared.errors import AgentixError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

NONCE_BYTES = 12
# Binds tokens to their purpose: a token made for another use never decrypts here.
_INFO = b"agentix/api-key/v1"


class SecretError(AgentixError, ValueError):
    """A token could not be decrypted: wrong deployment secret, corrupted or not a token."""

    code = "secret_unusable"


def _cipher(deployment_secret: str) -> AESGCM:
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    if not deployment_secret:
        raise SecretError("the deployment secret is empty")
    hkdf = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_INFO)
    return AESGCM(hkdf.derive(deployment_secret.encode()))


def encrypt_secret(plaintext: str, deployment_secret: str) -> str:
    nonce = os.urandom(NONCE_BYTES)
    sealed = _cipher(deployment_secret).encrypt(nonce, plaintext.encode(), None)
    return base64.b64encode(nonce + sealed).decode("ascii")


def decrypt_secret(token: str, deployment_secret: str) -> str:
    try:
        raw = base64.b64decode(token.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError) as exc:
        raise SecretError("encrypted secret is not valid base64") from exc
    if len(raw) <= NONCE_BYTES + 16:
        raise SecretError("encrypted secret is too short")
    from cryptography.exceptions import InvalidTag

    cipher = _cipher(deployment_secret)
    try:
        plain = cipher.decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], None)
    except InvalidTag as exc:
        raise SecretError("encrypted secret does not decrypt (wrong deployment secret_key, or corrupted)") from exc
    return plain.decode()
