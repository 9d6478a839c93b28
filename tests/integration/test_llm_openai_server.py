"""The scripted OpenAI-protocol server as other tests use it: in another process, scripted over
its control endpoints, spoken to by the real openai client."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from tests.support import openai_server as oai


@pytest.fixture(scope="module")
def remote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    script = Path(tmp_path_factory.mktemp("oai")) / "script.json"
    script.write_text(json.dumps([oai.reply("from the script file")]))
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.support.openai_server",
            "--port",
            "0",
            "--script",
            str(script),
            "--api-key",
            "k1",
            "--models",
            "a,b",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    assert line.startswith("READY http://127.0.0.1:"), line
    yield line.split(" ", 1)[1]
    proc.kill()
    proc.wait()


def test_script_file_control_endpoints_and_recording(remote: str) -> None:
    client = openai.OpenAI(base_url=remote, api_key="k1", max_retries=0)
    ctl = oai.ScriptClient(remote)
    first = client.chat.completions.create(model="a", messages=[{"role": "user", "content": "hi"}])
    assert first.choices[0].message.content == "from the script file"
    ctl.reset()
    ctl.script([oai.reply("streamed", reasoning="r", chunk_chars=3), oai.rate_limited(retry_after=7)], model="b")
    chunks = list(client.chat.completions.create(model="b", messages=[{"role": "user", "content": "x"}], stream=True))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "streamed"
    with pytest.raises(openai.RateLimitError) as info:
        client.chat.completions.create(model="b", messages=[{"role": "user", "content": "x"}])
    assert info.value.response.headers["retry-after"] == "7"
    echo = client.chat.completions.create(model="a", messages=[{"role": "user", "content": "ping"}])
    assert echo.choices[0].message.content == "echo: ping"  # queue empty: echo
    recorded = ctl.requests()
    assert [r["model"] for r in recorded] == ["b", "b", "a"] and recorded[0]["body"]["stream"] is True


def test_real_auth_404_models_and_embeddings(remote: str) -> None:
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=remote, api_key="wrong", max_retries=0).models.list()
    client = openai.OpenAI(base_url=remote, api_key="k1", max_retries=0)
    with pytest.raises(openai.NotFoundError) as info:
        client.chat.completions.create(model="zzz", messages=[{"role": "user", "content": "x"}])
    assert info.value.code == "model_not_found"
    assert [m.id for m in client.models.list().data] == ["a", "b"]
    out = client.embeddings.create(
        model="a", input=["nats jetstream streams", "jetstream streams nats", "cooking pasta"]
    )
    vecs = [d.embedding for d in out.data]
    assert len(vecs[0]) == 64 and math.isclose(sum(v * v for v in vecs[0]), 1.0, rel_tol=1e-5)
    dot = [sum(a * b for a, b in zip(vecs[0], v, strict=True)) for v in vecs[1:]]
    assert dot[0] > 0.99 and dot[1] < 0.5  # same words ⇒ same vector; different words ⇒ far apart
    small = client.embeddings.create(model="a", input="x", dimensions=8, encoding_format="float")
    assert len(small.data[0].embedding) == 8
