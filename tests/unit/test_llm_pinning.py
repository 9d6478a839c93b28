"""A resumed task gets its chain back even on a dispatcher that never saw that revision (it
started after a hot swap): the checkpoint keeps the chain, `pool.pinned` takes it."""

from __future__ import annotations

from pathlib import Path

from services.dispatcher.llm.chain_config import ModelControl
from services.dispatcher.llm.pool import ModelPool
from shared.contract.models import ModelChain, ModelConfig
from shared.settings import Settings


def chain(revision: int, active: str) -> ModelChain:
    models = {n: ModelConfig(id=n, name=n, model=f"{n}-m", base_url="http://x/v1") for n in ("a", "b")}
    return ModelChain(revision=revision, active=active, models=models)


def test_a_revision_this_process_never_saw_comes_from_the_checkpoint(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, llm_base_url=None)
    # A dispatcher started after the swap to revision 2 knows only revision 2.
    pool = ModelPool(settings, control=ModelControl(settings, chain=chain(2, "b")))
    assert pool.pinned().chain_revision == 2
    kept = chain(1, "a")
    resumed = pool.pinned(None, 1, kept)
    assert resumed.chain_revision == 1 and resumed.candidates(None)[0].name == "a"
    # A checkpointed chain that does not match the revision is not trusted: current chain.
    assert pool.pinned(None, 1, chain(7, "a")).chain_revision == 2
    # Known revisions come from the process's own history first.
    pool.control.apply("models.chain", chain(3, "a").model_dump(), 30)
    assert pool.pinned(None, 2, None).config.chain.active == "b"
    assert pool.pinned().chain_revision == 3


def test_settings_shape_retries_and_breakers(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, llm_retry_attempts=1, breaker_failure_threshold=2, breaker_cooldown_s=7)
    pool = ModelPool(settings)
    assert pool.retry.attempts == 1
    assert (pool.breakers.policy.failure_threshold, pool.breakers.policy.cooldown_s) == (2, 7)
