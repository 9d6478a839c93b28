"""The workflow DSL (see DSL.md): typed nodes, edges and the workflow document.

`Node` is a discriminated union on `kind`; each kind has its own config model. Every config also
takes `timeout_s` and `on_error`. Template-bearing fields are listed by `template_fields()` so the
validator and the compiler walk exactly the same strings.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, field_validator, model_validator

from shared.contract.base import Contract
from shared.contract.sampling import Sampling

DSL_VERSION: Final = "1"
NODE_KINDS: tuple[str, ...] = (
    "input", "retriever", "agent", "tool", "branch", "map", "coordinator", "dual", "approval", "output",
)
NODE_ID_PATTERN = r"^[A-Za-z0-9_-]+$"
MAX_NODE_ID = 64
MAX_NODES = 500
MAX_EDGES = 2000
MAX_BYTES = 1024 * 1024

TemplateMode = Literal["template", "expression", "items"]


@dataclass(frozen=True)
class TemplateField:
    """One string of a node that is a template (`{{ … }}` text) or an expression.
    `item_scope`: `item`/`index` are in scope (the body of a map node)."""

    path: str
    source: str
    mode: TemplateMode
    item_scope: bool = False


class Config(BaseModel):
    """Common node config. Unknown keys are kept out of the model (the canvas may add UI data);
    the validator reports them as warnings."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True, frozen=True)

    timeout_s: float | None = Field(default=None, gt=0, le=86_400)
    on_error: Literal["fail", "continue"] = "fail"

    def template_fields(self, prefix: str = "config", item_scope: bool = False) -> Iterator[TemplateField]:
        return iter(())


def _tree_fields(value: Any, path: str, item_scope: bool) -> Iterator[TemplateField]:
    """Every string leaf of a JSON value is a template (tool args, output value)."""
    if isinstance(value, str):
        yield TemplateField(path, value, "template", item_scope)
    elif isinstance(value, dict):
        for key, sub in value.items():
            yield from _tree_fields(sub, f"{path}.{key}", item_scope)
    elif isinstance(value, list):
        for index, sub in enumerate(value):
            yield from _tree_fields(sub, f"{path}[{index}]", item_scope)


class InputConfig(Config):
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")


class RetrieverConfig(Config):
    kb: str = Field(min_length=1)
    query: str
    top_k: int = Field(default=5, ge=1, le=100)
    mode: Literal["hybrid", "vector", "fulltext", "graph"] = "hybrid"

    def template_fields(self, prefix: str = "config", item_scope: bool = False) -> Iterator[TemplateField]:
        yield TemplateField(f"{prefix}.kb", self.kb, "template", item_scope)
        yield TemplateField(f"{prefix}.query", self.query, "template", item_scope)


class AgentConfig(Config):
    prompt: str
    system: str | None = None
    model: str | None = None
    tools: list[str] | Literal["auto"] | None = None
    max_steps: int = Field(default=8, ge=1, le=50)
    temperature: float | None = Field(default=None, ge=0, le=2)
    max_tokens: int | None = Field(default=None, ge=1)
    output: Literal["text", "json"] = "text"
    evaluate: bool = False
    # Earlier turns of a conversation: a template or expression giving a list of
    # `{role, content}` messages, put between `system` and `prompt` (a chat run's memory window).
    history: str | None = None
    # Arguments the agent's tools take when the model leaves them out: `{tool: {arg: value}}`,
    # string values are templates (a chat run's knowledge base for `kb_search`, say). The model
    # sees such an argument as optional; one that renders empty is not applied.
    tool_defaults: dict[str, dict[str, Any]] = Field(default_factory=dict)
    # The caller's own function tools (OpenAI `{type: function, function: {name, …}}` specs, taken
    # as they are, not templates): offered to the model with the agent's tools but never run
    # here — a call of one ends the node with the calls (`tool.call` with `client: true`), for the
    # caller to run (what an OpenAI client's `tools` are).
    client_tools: list[dict[str, Any]] = Field(default_factory=list, max_length=128)
    # OpenAI's, sent with the client's tools (`tool_choice` on the loop's first model turn only:
    # the caller asked for one turn, the turns after the agent's own tools are the agent's).
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    # OpenAI's `response_format` (`json_object`, `json_schema`), sent to the model; with a
    # `json_schema` the answer must conform to the schema or the node fails (`bad_output`).
    response_format: dict[str, Any] | None = None
    # OpenAI's other sampling choices (`top_p`, `stop`, `seed`, penalties, `logit_bias`,
    # `reasoning_effort`, `verbosity`, the end user's id), sent to the model only when set.
    sampling: Sampling | None = None

    @field_validator("client_tools")
    @classmethod
    def _function_tools(cls, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        names: set[str] = set()
        for index, tool in enumerate(value):
            function = tool.get("function")
            name = function.get("name") if isinstance(function, dict) else None
            if tool.get("type") != "function" or not isinstance(name, str) or not name:
                raise ValueError(f"client_tools[{index}] is not a {{type: function, function: {{name}}}} tool")
            if name in names:
                raise ValueError(f"client_tools: the name {name!r} is given twice")
            names.add(name)
        return value

    def client_tool_names(self) -> frozenset[str]:
        return frozenset(str(t["function"]["name"]) for t in self.client_tools)

    def template_fields(self, prefix: str = "config", item_scope: bool = False) -> Iterator[TemplateField]:
        yield TemplateField(f"{prefix}.prompt", self.prompt, "template", item_scope)
        if self.system is not None:
            yield TemplateField(f"{prefix}.system", self.system, "template", item_scope)
        if self.history is not None:
            yield TemplateField(f"{prefix}.history", self.history, "items", item_scope)
        yield from _tree_fields(self.tool_defaults, f"{prefix}.tool_defaults", item_scope)

    def tool_names(self) -> list[str]:
        return self.tools if isinstance(self.tools, list) else []


class ToolConfig(Config):
    tool: str = Field(min_length=1)
    args: dict[str, Any] = Field(default_factory=dict)

    def template_fields(self, prefix: str = "config", item_scope: bool = False) -> Iterator[TemplateField]:
        yield from _tree_fields(self.args, f"{prefix}.args", item_scope)


class BranchCase(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    handle: str = Field(min_length=1, max_length=64)
    when: str

    @field_validator("handle")
    @classmethod
    def _not_default(cls, value: str) -> str:
        if value == "default":
            raise ValueError("'default' is reserved: it is taken when no case matches")
        return value


class BranchConfig(Config):
    condition: str | None = None
    cases: list[BranchCase] | None = None

    @model_validator(mode="after")
    def _one_of(self) -> BranchConfig:
        if (self.condition is None) == (self.cases is None):
            raise ValueError("a branch needs exactly one of `condition` or `cases`")
        if self.cases is not None:
            handles = [c.handle for c in self.cases]
            if not handles:
                raise ValueError("`cases` must not be empty")
            if len(set(handles)) != len(handles):
                raise ValueError("case handles must be unique")
        return self

    def handles(self) -> frozenset[str]:
        """Every handle this branch can produce (`default` is taken when nothing else matches)."""
        if self.cases is not None:
            return frozenset({*(c.handle for c in self.cases), "default"})
        return frozenset({"true", "false", "default"})

    def template_fields(self, prefix: str = "config", item_scope: bool = False) -> Iterator[TemplateField]:
        if self.condition is not None:
            yield TemplateField(f"{prefix}.condition", self.condition, "expression", item_scope)
        for index, case in enumerate(self.cases or []):
            yield TemplateField(f"{prefix}.cases[{index}].when", case.when, "expression", item_scope)


class MapAgentBody(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)
    kind: Literal["agent"]
    config: AgentConfig


class MapToolBody(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)
    kind: Literal["tool"]
    config: ToolConfig


MapBody = Annotated[MapAgentBody | MapToolBody, Field(discriminator="kind")]


class MapConfig(Config):
    items: str
    node: MapBody
    concurrency: int = Field(default=4, ge=1, le=64)
    min_success: int = Field(default=1, ge=0)

    def template_fields(self, prefix: str = "config", item_scope: bool = False) -> Iterator[TemplateField]:
        yield TemplateField(f"{prefix}.items", self.items, "items", item_scope)
        yield from self.node.config.template_fields(f"{prefix}.node.config", item_scope=True)


class Expert(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    name: str = Field(min_length=1, max_length=64)
    system: str
    model: str | None = None
    tools: list[str] | None = None


class CoordinatorConfig(Config):
    goal: str
    experts: list[Expert] = Field(min_length=1, max_length=16)
    lead_model: str | None = None
    max_parallel: int = Field(default=4, ge=1, le=16)
    expert_timeout_s: float = Field(default=120.0, gt=0, le=3600)

    @field_validator("experts")
    @classmethod
    def _unique_names(cls, value: list[Expert]) -> list[Expert]:
        names = [e.name for e in value]
        if len(set(names)) != len(names):
            raise ValueError("expert names must be unique")
        return value

    def template_fields(self, prefix: str = "config", item_scope: bool = False) -> Iterator[TemplateField]:
        yield TemplateField(f"{prefix}.goal", self.goal, "template", item_scope)
        for index, expert in enumerate(self.experts):
            yield TemplateField(f"{prefix}.experts[{index}].system", expert.system, "template", item_scope)


class DualConfig(Config):
    prompt: str
    system: str | None = None
    models: list[str] = Field(min_length=2, max_length=2)
    rounds: int = Field(default=1, ge=1, le=3)
    synthesizer: int = Field(default=0, ge=0, le=1)

    def template_fields(self, prefix: str = "config", item_scope: bool = False) -> Iterator[TemplateField]:
        yield TemplateField(f"{prefix}.prompt", self.prompt, "template", item_scope)
        if self.system is not None:
            yield TemplateField(f"{prefix}.system", self.system, "template", item_scope)


class ApprovalConfig(Config):
    message: str = "Approve to continue?"
    # The plan the approver decides on: a template or expression giving a list of steps; the
    # node emits it as a `plan {steps}` event before its `approval.request`.
    plan: str | None = None

    def template_fields(self, prefix: str = "config", item_scope: bool = False) -> Iterator[TemplateField]:
        yield TemplateField(f"{prefix}.message", self.message, "template", item_scope)
        if self.plan is not None:
            yield TemplateField(f"{prefix}.plan", self.plan, "items", item_scope)


class OutputConfig(Config):
    # A template string, or any JSON value whose string leaves are templates.
    value: Any = Field(...)

    @field_validator("value")
    @classmethod
    def _present(cls, value: Any) -> Any:
        if value is None:
            raise ValueError("`value` is required")
        return value

    def template_fields(self, prefix: str = "config", item_scope: bool = False) -> Iterator[TemplateField]:
        yield from _tree_fields(self.value, f"{prefix}.value", item_scope)


class NodeBase(Contract):
    id: str = Field(min_length=1, max_length=MAX_NODE_ID, pattern=NODE_ID_PATTERN)
    label: str | None = None

    def template_fields(self) -> Iterator[TemplateField]:
        config: Config = self.config  # type: ignore[attr-defined]
        return config.template_fields()


class InputNode(NodeBase):
    kind: Literal["input"]
    config: InputConfig = Field(default_factory=InputConfig)


class RetrieverNode(NodeBase):
    kind: Literal["retriever"]
    config: RetrieverConfig


class AgentNode(NodeBase):
    kind: Literal["agent"]
    config: AgentConfig


class ToolNode(NodeBase):
    kind: Literal["tool"]
    config: ToolConfig


class BranchNode(NodeBase):
    kind: Literal["branch"]
    config: BranchConfig


class MapNode(NodeBase):
    kind: Literal["map"]
    config: MapConfig


class CoordinatorNode(NodeBase):
    kind: Literal["coordinator"]
    config: CoordinatorConfig


class DualNode(NodeBase):
    kind: Literal["dual"]
    config: DualConfig


class ApprovalNode(NodeBase):
    kind: Literal["approval"]
    config: ApprovalConfig = Field(default_factory=ApprovalConfig)


class OutputNode(NodeBase):
    kind: Literal["output"]
    config: OutputConfig


Node = Annotated[
    InputNode
    | RetrieverNode
    | AgentNode
    | ToolNode
    | BranchNode
    | MapNode
    | CoordinatorNode
    | DualNode
    | ApprovalNode
    | OutputNode,
    Field(discriminator="kind"),
]
NODE_ADAPTER: TypeAdapter[Node] = TypeAdapter(Node)

NODE_MODELS: dict[str, type[NodeBase]] = {
    "input": InputNode,
    "retriever": RetrieverNode,
    "agent": AgentNode,
    "tool": ToolNode,
    "branch": BranchNode,
    "map": MapNode,
    "coordinator": CoordinatorNode,
    "dual": DualNode,
    "approval": ApprovalNode,
    "output": OutputNode,
}


class Edge(Contract):
    source: str
    target: str
    source_handle: str | None = Field(default=None, alias="sourceHandle")


class Workflow(Contract):
    version: Literal["1"] = DSL_VERSION
    nodes: list[Node]
    edges: list[Edge] = Field(default_factory=list)

    def node(self, node_id: str) -> Node:
        for node in self.nodes:
            if node.id == node_id:
                return node
        raise KeyError(node_id)
