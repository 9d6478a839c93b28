"""AES-256-GCM encryption of API keys with the deployment secret (shared/secrets.py)."""

from __future__ import annotations

import base64

import pytest

from shared.secrets import SecretError, decrypt_secret, encrypt_secret


def test_round_trip_with_fresh_nonces() -> None:
    a, b = encrypt_secret("sk-abc", "deploy"), encrypt_secret("sk-abc", "deploy")
    assert a != b and decrypt_secret(a, "deploy") == decrypt_secret(b, "deploy") == "sk-abc"
    assert len(base64.b64decode(a)) == 12 + len("sk-abc") + 16  # nonce + ciphertext + tag


def test_wrong_secret_tampering_and_garbage_are_clear_errors() -> None:
    token = encrypt_secret("sk-abc", "deploy")
    with pytest.raises(SecretError, match="wrong deployment secret_key"):
        decrypt_secret(token, "other")
    raw = bytearray(base64.b64decode(token))
    raw[-1] ^= 1
    with pytest.raises(SecretError, match="does not decrypt"):
        decrypt_secret(base64.b64encode(bytes(raw)).decode(), "deploy")
    with pytest.raises(SecretError, match="base64"):
        decrypt_secret("not base64 !!", "deploy")
    with pytest.raises(SecretError, match="too short"):
        decrypt_secret(base64.b64encode(b"short").decode(), "deploy")
    with pytest.raises(SecretError, match="empty"):
        encrypt_secret("x", "")
