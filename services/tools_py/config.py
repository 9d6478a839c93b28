"""tools_py's own knobs (env prefix `AGENTIX_SANDBOX_`); what it shares with other services is
`shared.settings.ToolsPySettings`."""

from __future__ import annotations

from pathlib import Path

from pydantic_settings import BaseSettings, SettingsConfigDict


class SandboxSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="AGENTIX_SANDBOX_", extra="ignore")

    concurrency: int = 4
    max_timeout_s: float = 60.0
    max_memory_mb: int = 1024
    max_output: int = 64 * 1024
    # Where throw-away working directories are made (default: the system temp dir).
    base_dir: Path | None = None
