"""An agent's sampling choices beyond `temperature` and `max_tokens` (the `sampling` field of an
agent config, docs/DSL.md): what an OpenAI client sets per request, sent to an OpenAI-protocol
model as OpenAI's API names them, only the ones set. The ranges are OpenAI's, so a value the
model would refuse is refused when the graph is checked, not mid-run."""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

MAX_STOP: Final = 4  # OpenAI's limit on stop sequences
MAX_LOGIT_BIAS: Final = 300  # token ids a request may bias (OpenAI's own limit is of this order)
MAX_IDENTIFIER: Final = 64  # `user`, `safety_identifier`: OpenAI's length for the latter

ReasoningEffort = Literal["none", "minimal", "low", "medium", "high", "xhigh"]
Verbosity = Literal["low", "medium", "high"]


class Sampling(BaseModel):
    """Each field as OpenAI's chat completions take it. `user` and `safety_identifier` are the
    end user's identifier the provider's abuse checks read (the caller's, not Agentix's)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    top_p: float | None = Field(default=None, ge=0, le=1)
    stop: str | list[str] | None = None
    seed: int | None = None
    presence_penalty: float | None = Field(default=None, ge=-2, le=2)
    frequency_penalty: float | None = Field(default=None, ge=-2, le=2)
    logit_bias: dict[str, int] | None = None
    reasoning_effort: ReasoningEffort | None = None
    verbosity: Verbosity | None = None
    user: str | None = Field(default=None, max_length=256)
    safety_identifier: str | None = Field(default=None, max_length=MAX_IDENTIFIER)

    @field_validator("stop")
    @classmethod
    def _stops(cls, value: str | list[str] | None) -> str | list[str] | None:
        if isinstance(value, list) and not 1 <= len(value) <= MAX_STOP:
            raise ValueError(f"`stop` takes 1 to {MAX_STOP} sequences")
        if any(not s for s in ([value] if isinstance(value, str) else value or [])):
            raise ValueError("a stop sequence must not be empty")
        return value

    @field_validator("logit_bias")
    @classmethod
    def _biases(cls, value: dict[str, int] | None) -> dict[str, int] | None:
        if value is None:
            return None
        if len(value) > MAX_LOGIT_BIAS:
            raise ValueError(f"`logit_bias` takes at most {MAX_LOGIT_BIAS} tokens")
        for token, bias in value.items():
            if not token.isdigit():
                raise ValueError(f"`logit_bias` keys are token ids, not {token!r}")
            if not -100 <= bias <= 100:
                raise ValueError(f"`logit_bias[{token}]` must be between -100 and 100")
        return value

    def body(self) -> dict[str, Any]:
        """The fields set, as an OpenAI request body has them."""
        return self.model_dump(exclude_none=True)
