"""Webhook signatures, both ways: the Standard Webhooks scheme (`webhook-id`, `webhook-timestamp`,
`webhook-signature: v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>">`, secret `whsec_<base64>`)
and GitHub's `X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the body>`. Pure: no I/O.
A refused call says which check failed (`SignatureRefused.reason`)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Mapping

from shared.errors import AgentixError

PREFIX = "whsec_"
TOLERANCE_S = 5 * 60  # a timestamp further than this from now is stale (a replay window)


class SignatureRefused(AgentixError):
    """A signed call refused, with which check failed."""

    code = "webhook_signature"
    http_status = 401

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def new_secret() -> str:
    return PREFIX + base64.b64encode(secrets.token_bytes(24)).decode()


def _key(secret: str) -> bytes:
    return base64.b64decode(secret.removeprefix(PREFIX))


def sign(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """The `webhook-signature` value of one message."""
    mac = hmac.new(_key(secret), f"{msg_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()
    return "v1," + base64.b64encode(mac).decode()


def signed_headers(secret: str, msg_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    return {"webhook-id": msg_id, "webhook-timestamp": str(timestamp),
            "webhook-signature": sign(secret, msg_id, timestamp, body)}  # fmt: skip


def _header(headers: Mapping[str, str], name: str) -> str | None:
    value = headers.get(name)
    return value if value is not None else headers.get(name.title())


def verify(secret: str, headers: Mapping[str, str], body: bytes, now: int, tolerance_s: int = TOLERANCE_S) -> str:
    """The message's `webhook-id` when its signature holds and its timestamp is fresh."""
    msg_id, stamp, signatures = (_header(headers, h) for h in ("webhook-id", "webhook-timestamp", "webhook-signature"))
    if not msg_id or not stamp or not signatures:
        raise SignatureRefused("missing webhook-id, webhook-timestamp or webhook-signature header")
    try:
        timestamp = int(stamp)
    except ValueError:
        raise SignatureRefused("webhook-timestamp is not a Unix time in seconds") from None
    if abs(now - timestamp) > tolerance_s:
        raise SignatureRefused(f"webhook-timestamp is more than {tolerance_s} s from now (stale or future)")
    expected = sign(secret, msg_id, timestamp, body).split(",", 1)[1]
    for candidate in signatures.split():
        version, _, value = candidate.partition(",")
        if version == "v1" and hmac.compare_digest(value, expected):
            return msg_id
    raise SignatureRefused("webhook-signature does not match the body and the hook's secret")


def github_signature(secret: str, body: bytes) -> str:
    """`X-Hub-Signature-256` of a body (the secret used as given, like GitHub)."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def verify_github(secret: str, headers: Mapping[str, str], body: bytes) -> None:
    given = headers.get("x-hub-signature-256") or headers.get("X-Hub-Signature-256")
    if not given:
        raise SignatureRefused("missing X-Hub-Signature-256 header")
    if not hmac.compare_digest(given, github_signature(secret, body)):
        raise SignatureRefused("X-Hub-Signature-256 does not match the body and the hook's secret")
