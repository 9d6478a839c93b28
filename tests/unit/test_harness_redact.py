"""Streaming redaction: no secret gets out whatever the chunking, and ordinary text is not held."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.dispatcher.redact import Redactor, SecretPattern

SECRETS = {
    "api_key": "sk-proj-Zx81Qw72Lm90Pp34Ab56",
    "bearer": "Bearer eyJhbGciOiJIUzI1NiJ9.abcDEF123",
    "aws_access_key": "AKIAIOSFODNN7EXAMPLE",
    "aws_secret_key": "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "private_key": "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAA\nBG5vbmUAAAAEbm9uZQ\n"
    "-----END OPENSSH PRIVATE KEY-----",
    "github_token": "ghp_" + "a1B2c3D4e5" * 4,
}
R = Redactor()


def run(chunks: list[str], redactor: Redactor = R) -> tuple[str, list[str]]:
    stream = redactor.stream()
    emitted = [stream.feed(c) for c in chunks]
    emitted.append(stream.flush())
    return "".join(emitted), emitted


def leaks(secret: str, out: str) -> bool:
    # The distinctive part of the secret (past any well-known prefix) must not appear at all.
    core = secret.split()[-1][-16:]
    return core in out


@pytest.mark.parametrize("kind", sorted(SECRETS))
def test_every_two_way_split(kind: str) -> None:
    text = f"Config follows: {SECRETS[kind]} and that's all."
    whole = R.redact(text)
    assert f"[REDACTED:{kind}]" in whole and not leaks(SECRETS[kind], whole)
    assert whole.startswith("Config follows: ") and whole.endswith(" and that's all.")
    for cut in range(len(text) + 1):
        out, _ = run([text[:cut], text[cut:]])
        assert out == whole, cut


@pytest.mark.parametrize("kind", sorted(SECRETS))
def test_char_by_char_and_every_three_way_split_of_the_secret(kind: str) -> None:
    secret = SECRETS[kind]
    text = f"x {secret} y"
    whole = R.redact(text)
    out, emitted = run(list(text))
    assert out == whole
    # No emitted piece, nor any prefix of the output stream, ever contains the secret's core.
    assert not any(leaks(secret, "".join(emitted[: i + 1])) for i in range(len(emitted)))
    start = 2
    for a in range(start, start + len(secret), 3):
        for b in range(a, start + len(secret) + 1, 5):
            assert run([text[:a], text[a:b], text[b:]])[0] == whole


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_random_chunking_matches_whole_text_redaction(data: st.DataObject) -> None:
    kinds = data.draw(st.lists(st.sampled_from(sorted(SECRETS)), min_size=1, max_size=3))
    filler = st.text(alphabet="abc sk-ABe.\n", max_size=12)
    text = "".join(data.draw(filler) + " " + SECRETS[k] + " " for k in kinds) + data.draw(filler)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(text)), max_size=8)))
    chunks = [text[i:j] for i, j in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    out, _ = run(chunks)
    assert out == R.redact(text)
    for k in kinds:
        assert not leaks(SECRETS[k], out)


def test_a_chunk_boundary_does_not_change_what_a_word_boundary_sees() -> None:
    # "…xBearer …" is no bearer token (no word boundary before it). Cut just before "Bearer",
    # the held text once began a fresh search there, matched the bearer pattern, and that longer
    # match swallowed the start of the private key the whole text's redaction finds: its body got out.
    key = "-----BEGIN RSA PRIVATE KEY-----" + "q" * 40
    text = f".wxBearer abcdefghijklmnop.ghp_{'B' * 35}-{key} tail"
    whole = R.redact(text)
    assert "[REDACTED:private_key]" in whole and "q" * 10 not in whole
    for cut in range(len(text) + 1):
        assert run([text[:cut], text[cut:]])[0] == whole, cut


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["sk-", "sk-proj-", "Bearer ", "bearer ", "x", "B" * 20, "AKIA", "A" * 16,
                                 "aws_secret_access_key=", "-----BEGIN RSA PRIVATE KEY-----", "\n", " ",
                                 "-----END RSA PRIVATE KEY-----", "ghp_", "a1" * 18, "xoxb-", "1234567890",
                                 "AIza", "_", "."]), max_size=20),
       st.lists(st.integers(1, 7), min_size=1, max_size=30))
def test_overlapping_lookalikes_stream_as_the_whole_text_redacts(pieces: list[str], sizes: list[int]) -> None:
    text = "".join(pieces)
    chunks, i = [], 0
    while i < len(text):
        size = sizes[len(chunks) % len(sizes)]
        chunks.append(text[i : i + size])
        i += size
    assert run(chunks)[0] == R.redact(text)


def test_ordinary_text_flows_through_and_hold_back_is_minimal() -> None:
    stream = R.stream()
    assert stream.feed("Hello world, this is fine.") == "Hello world, this is fine."
    assert stream.held == 0
    assert stream.feed(" AK") == " "  # might start an AWS key id ("AKIA…")
    assert stream.feed("A go") == "AKA go"
    assert stream.feed(" s") == " "  # "s" could be "sk-…"
    assert stream.held == 1
    assert stream.feed("ure") == "sure"
    assert stream.flush() == ""


def test_unterminated_private_key_is_redacted_to_the_end() -> None:
    out, emitted = run(["see -----BEGIN RSA PRIVATE KEY-----\nMIIE", "owIBAAKCAQEA", "\nzzz"])
    assert out == "see [REDACTED:private_key]"
    assert "MIIE" not in "".join(emitted)


def test_short_lookalikes_are_not_redacted() -> None:
    text = "use sk-short, a bearer of news, AKIA123, and -----BEGIN something-----"
    assert run(list(text))[0] == text == R.redact(text)


def test_configured_patterns() -> None:
    r = Redactor(extra=[r"ACME-[0-9]{6}", SecretPattern("pin", r"PIN:\d{4}", "PIN:****")])
    assert run(["id ACME-12", "3456 and PIN:12", "34."], r)[0] == "id [REDACTED:custom] and PIN:****."
    with pytest.raises(ValueError, match="bad redaction pattern"):
        Redactor(extra=["("])
    with pytest.raises(ValueError, match="empty string"):
        Redactor(extra=["x*"])
