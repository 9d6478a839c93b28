"""Webhook signatures checked against the reference Standard Webhooks library (both directions)
and GitHub's published example; each refusal says which check failed."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from standardwebhooks import Webhook

from services.gateway.triggers.signing import (
    SignatureRefused,
    github_signature,
    new_secret,
    sign,
    signed_headers,
    verify,
    verify_github,
)

BODY = b'{"type": "order.paid", "id": 7}'


def test_ours_verified_by_the_reference_library_and_theirs_by_ours() -> None:
    secret = new_secret()
    now = int(datetime.now(UTC).timestamp())
    headers = signed_headers(secret, "msg_1", now, BODY)
    assert Webhook(secret).verify(BODY, headers) == {"type": "order.paid", "id": 7}
    theirs = Webhook(secret).sign("msg_2", datetime.fromtimestamp(now, UTC), BODY.decode())
    assert verify(secret, {"webhook-id": "msg_2", "webhook-timestamp": str(now), "webhook-signature": theirs},
                  BODY, now) == "msg_2"  # fmt: skip


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"webhook-signature": None}, "missing"),
        ({"webhook-id": None}, "missing"),
        ({"webhook-timestamp": "yesterday"}, "Unix time"),
        ({"webhook-timestamp": "STALE"}, "stale"),
        ({"webhook-timestamp": "FUTURE"}, "stale or future"),
        ({"webhook-signature": "v1,AAAA"}, "does not match"),
        ({"webhook-id": "msg_other"}, "does not match"),
    ],
)
def test_each_bad_call_is_refused_with_why(change: dict[str, str | None], reason: str) -> None:
    secret = new_secret()
    now = 1_800_000_000
    headers: dict[str, str] = signed_headers(secret, "msg_1", now, BODY)
    for name, value in change.items():
        if value is None:
            del headers[name]
        elif value in ("STALE", "FUTURE"):
            ts = now - 301 if value == "STALE" else now + 301
            headers.update(signed_headers(secret, headers["webhook-id"], ts, BODY))
        else:
            headers[name] = value
    with pytest.raises(SignatureRefused) as err:
        verify(secret, headers, BODY, now)
    assert reason in err.value.reason


def test_wrong_secret_and_changed_body_are_refused() -> None:
    secret, now = new_secret(), 1_800_000_000
    headers = signed_headers(secret, "m", now, BODY)
    with pytest.raises(SignatureRefused):
        verify(new_secret(), headers, BODY, now)
    with pytest.raises(SignatureRefused):
        verify(secret, headers, BODY + b" ", now)
    assert sign(secret, "m", now, BODY) in headers["webhook-signature"]


def test_github_signature_matches_githubs_example() -> None:
    # docs.github.com "Validating webhook deliveries": this secret and payload give this signature.
    expected = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
    assert github_signature("It's a Secret to Everybody", b"Hello, World!") == expected
    verify_github("It's a Secret to Everybody", {"X-Hub-Signature-256": expected}, b"Hello, World!")
    with pytest.raises(SignatureRefused, match="missing"):
        verify_github("s", {}, b"x")
    with pytest.raises(SignatureRefused, match="does not match"):
        verify_github("s", {"x-hub-signature-256": expected}, b"Hello, World!")
