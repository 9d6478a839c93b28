"""The control-plane view: seeding from settings, idempotent updates by revision, pinning."""

from __future__ import annotations

from pathlib import Path

from services.dispatcher.llm.chain_config import ModelControl
from shared.contract.models import ModelChain, ModelConfig, PriceEntry, Pricing, PromptVersion
from shared.secrets import decrypt_secret
from shared.settings import Settings


def chain(revision: int, active: str = "a") -> dict:
    models = {n: ModelConfig(id=n, name=n, model=n, base_url="http://x/v1") for n in ("a", "b")}
    return ModelChain(revision=revision, active=active, fallbacks=["b"], models=models).model_dump()


def test_seed_is_offline_without_an_endpoint(tmp_path: Path) -> None:
    control = ModelControl(Settings(data_dir=tmp_path, llm_base_url=None))
    assert control.seeded and control.chain.active == "offline"
    assert control.chain.ordered()[0].provider == "offline"


def test_seed_from_settings_encrypts_the_key(tmp_path: Path) -> None:
    s = Settings(data_dir=tmp_path, llm_base_url="http://llm:8000/v1", llm_api_key="sk-live-123", llm_model="qwen")
    control = ModelControl(s)
    cfg = control.chain.ordered()[0]
    assert (cfg.name, cfg.model, cfg.base_url) == ("qwen", "qwen", "http://llm:8000/v1")
    assert cfg.api_key_enc and "sk-live" not in cfg.api_key_enc
    assert decrypt_secret(cfg.api_key_enc, s.persistent_secret("secret_key")) == "sk-live-123"
    assert len(control.chain.ordered()) == 1  # no silent offline fallback behind a real endpoint


def test_updates_apply_once_in_revision_order(tmp_path: Path) -> None:
    control = ModelControl(Settings(data_dir=tmp_path, llm_base_url=None))
    assert control.apply("models.chain", chain(0), 5)  # no own revision: the KV revision counts
    assert control.chain.revision == 5 and not control.seeded
    assert not control.apply("models.chain", chain(0), 5)
    assert not control.apply("models.chain", chain(3, active="b"), 9)  # older chain revision
    assert control.apply("models.chain", chain(6, active="b"), 10)
    assert control.chain.active == "b"
    assert not control.apply("breakers.a", {"model": "a", "state": "open"}, 11)  # not ours
    assert not control.apply("models.chain", {"active": 5, "models": "x"}, 12)  # invalid: ignored
    assert control.chain.revision == 6


def test_pinned_snapshot_is_not_touched_by_later_updates(tmp_path: Path) -> None:
    control = ModelControl(Settings(data_dir=tmp_path, llm_base_url=None))
    control.apply("models.chain", chain(1), 1)
    control.apply("models.pricing", Pricing(models={"a": PriceEntry(prompt_per_1k=1)}).model_dump(), 2)
    control.apply("prompts.system", PromptVersion(name="system", version=1, text="v1").model_dump(), 3)
    pinned = control.snapshot()
    control.apply("models.chain", chain(2, active="b"), 4)
    control.apply("prompts.system", PromptVersion(name="system", version=2, text="v2").model_dump(), 5)
    control.apply("pricing", Pricing(revision=9).model_dump(), 6)
    assert pinned.chain_revision == 1 and pinned.chain.active == "a"
    assert pinned.prompt("system", "t1") == (1, "v1") and pinned.pricing.models["a"].prompt_per_1k == 1
    now = control.snapshot()
    assert now.chain_revision == 2 and now.prompt("system", "t1") == (2, "v2") and now.pricing.revision == 9
    assert control.delete("prompts.system") and control.snapshot().prompt("system", "t1") is None


def test_prompt_canary_takes_its_share_stably(tmp_path: Path) -> None:
    control = ModelControl(Settings(data_dir=tmp_path, llm_base_url=None))
    control.apply(
        "prompts.p",
        PromptVersion(
            name="p", version=3, text="old", canary_version=4, canary_text="new", canary_percent=25
        ).model_dump(),
        1,
    )
    pinned = control.snapshot()
    picks = [pinned.prompt("p", f"task-{i}") for i in range(400)]
    share = sum(1 for p in picks if p == (4, "new")) / len(picks)
    assert 0.15 < share < 0.35
    assert all(pinned.prompt("p", f"task-{i}") == picks[i] for i in range(400))
    assert pinned.prompt_versions("task-1") == {"p": picks[1][0]}  # type: ignore[index]


def test_a_resumed_task_gets_its_original_chain_revision(tmp_path: Path) -> None:
    control = ModelControl(Settings(data_dir=tmp_path, llm_base_url=None))
    control.apply("models.chain", chain(1), 1)
    control.apply("models.chain", chain(2, active="b"), 2)
    assert control.snapshot(1).chain.active == "a" and control.snapshot(1).chain_revision == 1
    assert control.snapshot().chain_revision == 2
    assert control.snapshot(99).chain_revision == 2  # forgotten or unknown: the current one


def test_a_cleared_chain_goes_back_to_the_built_in_model(tmp_path: Path) -> None:
    """The admin sends `{"active": null}`: the gateway publishes an empty `active`, and every
    dispatcher answers with its built-in model again (offline here, the endpoint when set)."""
    control = ModelControl(Settings(data_dir=tmp_path, llm_base_url=None))
    assert control.apply("models.chain", chain(4, active="a"), 4)
    cleared = ModelChain(revision=5, active="", fallbacks=[], models=chain(4)["models"]).model_dump()
    assert control.apply("models.chain", cleared, 5)
    assert control.chain.revision == 5 and not control.seeded
    assert [m.name for m in control.chain.ordered()] == ["offline"]
    assert control.snapshot().chain.models["a"].name == "a"  # a DSL `model: a` still finds it

    endpoint = Settings(data_dir=tmp_path, llm_base_url="http://llm:8000/v1", llm_model="qwen")
    control = ModelControl(endpoint)
    assert control.apply("models.chain", cleared, 5)
    assert [m.name for m in control.chain.ordered()] == ["qwen"]


def test_the_offline_model_can_be_chained_without_a_model_row(tmp_path: Path) -> None:
    control = ModelControl(Settings(data_dir=tmp_path, llm_base_url="http://llm:8000/v1"))
    models = chain(0)["models"]
    assert control.apply("models.chain", {"revision": 3, "active": "a", "fallbacks": ["offline"], "models": models}, 3)
    assert [m.provider for m in control.chain.ordered()] == ["openai", "offline"]
