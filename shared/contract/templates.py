"""Templates (`{{ … }}` text) and expressions of the DSL, in Jinja2's sandbox.

- `X.output` and bare `X` both mean node X's output: the parsed tree is rewritten so that
  `<name>.output` reads `<name>` before it is compiled.
- Only a whitelist of functions and filters exists; calling anything else (methods included) is a
  sandbox error. Attribute access reads mapping keys only, never Python attributes.
- Output size is bounded; `*` on strings/lists and `**` are bounded too.
- `references()` lists the free names a template reads (via `jinja2.meta`), so the validator can
  tell which node ids it depends on.
Compiled templates are cached by source: compiling is pure.
"""

from __future__ import annotations

import json
import operator
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from typing import Any

from jinja2 import StrictUndefined, TemplateError, nodes
from jinja2 import Template as JinjaTemplate
from jinja2.meta import find_undeclared_variables
from jinja2.parser import Parser
from jinja2.runtime import Undefined
from jinja2.sandbox import ImmutableSandboxedEnvironment, SecurityError
from jinja2.visitor import NodeTransformer

from shared.errors import AgentixError

MAX_OUTPUT_CHARS = 1_000_000
MAX_SEQUENCE = 100_000
MAX_SOURCE_CHARS = 100_000
SCOPE_NAMES = frozenset({"input", "task", "prompts"})
ITEM_NAMES = frozenset({"item", "index"})


class TemplateProblem(AgentixError):
    """A template that does not parse or fails to render. `str()` names node, field and source."""

    code = "bad_template"
    http_status = 422

    def __init__(
        self, message: str, *, source: str, node_id: str | None = None, field: str | None = None
    ) -> None:
        super().__init__(message)
        self.source = source
        self.node_id = node_id
        self.field = field

    def __str__(self) -> str:
        where = " ".join(p for p in (f"node {self.node_id!r}" if self.node_id else "", self.field or "") if p)
        snippet = self.source if len(self.source) <= 120 else self.source[:117] + "..."
        return f"{where + ': ' if where else ''}{self.message} in {snippet!r}"


class RetrieverOutput(dict[str, Any]):
    """A retriever's output: a mapping `{chunks: [...]}` that renders as the chunks' text joined."""

    def __str__(self) -> str:
        chunks = self.get("chunks") or []
        return "\n\n".join(str(c.get("text", "")) if isinstance(c, Mapping) else str(c) for c in chunks)


def to_text(value: Any) -> str:
    """How a value renders inside text: None → '', mappings/lists → JSON, the rest → str."""
    if isinstance(value, Undefined):
        return str(value)  # StrictUndefined: raises "'x' is undefined"
    if value is None:
        return ""
    if isinstance(value, RetrieverOutput):
        return str(value)
    if isinstance(value, (Mapping, list, tuple)):
        return json.dumps(value, ensure_ascii=False, default=str)
    return str(value)


def _json(value: Any, indent: int | None = None) -> str:
    return json.dumps(value, ensure_ascii=False, default=str, indent=indent)


def _contains(container: Any, needle: Any) -> bool:
    if container is None:
        return False
    if isinstance(container, str):
        return str(needle) in container
    return needle in container


def _lower(value: Any) -> str:
    return to_text(value).lower()


def _upper(value: Any) -> str:
    return to_text(value).upper()


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "len": len,
    "lower": _lower,
    "upper": _upper,
    "contains": _contains,
    "json": _json,
    "str": to_text,
    "int": int,
    "float": float,
    "bool": bool,
    "abs": abs,
    "min": min,
    "max": max,
    "sum": sum,
    "round": round,
    "sorted": sorted,
    "startswith": lambda s, p: to_text(s).startswith(p),
    "endswith": lambda s, p: to_text(s).endswith(p),
    "trim": lambda s: to_text(s).strip(),
    "join": lambda items, sep="": sep.join(to_text(i) for i in items),
}
ALLOWED_FILTERS = frozenset({
    "abs", "batch", "capitalize", "count", "d", "default", "first", "float", "indent", "int", "join",
    "last", "length", "list", "lower", "map", "max", "min", "reject", "rejectattr", "replace",
    "reverse", "round", "select", "selectattr", "slice", "sort", "string", "sum", "title", "trim",
    "truncate", "unique", "upper", "wordcount",
})
_SAFE_CALLABLES = frozenset(id(f) for f in FUNCTIONS.values())


def _bounded_mul(left: Any, right: Any) -> Any:
    for seq, times in ((left, right), (right, left)):
        if isinstance(seq, (str, list, tuple)) and isinstance(times, int):
            if len(seq) * times > MAX_SEQUENCE:
                raise SecurityError("result of `*` is too large")
    return operator.mul(left, right)


def _bounded_pow(left: Any, right: Any) -> Any:
    if isinstance(right, (int, float)) and abs(right) > 100:
        raise SecurityError("exponent of `**` is too large")
    return operator.pow(left, right)


class DslEnvironment(ImmutableSandboxedEnvironment):
    """The sandbox: mapping-only attribute access, whitelisted calls, bounded operators."""

    intercepted_binops = frozenset({"*", "**"})

    def __init__(self) -> None:
        super().__init__(
            undefined=StrictUndefined,
            autoescape=False,
            finalize=to_text,
            keep_trailing_newline=True,
        )
        self.globals.clear()
        self.globals.update(FUNCTIONS)
        kept = {name: f for name, f in self.filters.items() if name in ALLOWED_FILTERS}
        self.filters.clear()
        self.filters.update(kept)
        self.filters.update({"json": _json, "tojson": _json, "contains": _contains})

    def getattr(self, obj: Any, attribute: str) -> Any:
        if isinstance(obj, Mapping) and attribute in obj:
            return obj[attribute]
        return self.undefined(obj=obj, name=attribute)

    def getitem(self, obj: Any, argument: Any) -> Any:
        if isinstance(obj, Mapping):
            if argument in obj:
                return obj[argument]
        elif isinstance(obj, Sequence) and isinstance(argument, (int, slice)):
            try:
                return obj[argument]
            except IndexError:
                pass
        return self.undefined(obj=obj, name=str(argument))

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(__obj, Undefined):
            __obj._fail_with_undefined_error()
        if id(__obj) not in _SAFE_CALLABLES:
            raise SecurityError("only the whitelisted functions can be called")
        return __obj(*args, **kwargs)

    def call_binop(self, context: Any, operator_: str, left: Any, right: Any) -> Any:
        if operator_ == "*":
            return _bounded_mul(left, right)
        if operator_ == "**":
            return _bounded_pow(left, right)
        return super().call_binop(context, operator_, left, right)


ENV = DslEnvironment()


class _OutputRewriter(NodeTransformer):
    """`X.output` → `X` (so both spellings read node X's output)."""

    def visit_Getattr(self, node: nodes.Getattr) -> nodes.Node:
        self.generic_visit(node)
        if node.attr == "output" and isinstance(node.node, nodes.Name) and node.node.name not in SCOPE_NAMES:
            return nodes.Name(node.node.name, "load", lineno=node.lineno, environment=ENV)
        return node


_FORBIDDEN_STATEMENTS = (nodes.Extends, nodes.Include, nodes.Import, nodes.FromImport)


def _prepare(tree: nodes.Template, source: str) -> tuple[nodes.Template, frozenset[str]]:
    for statement in _FORBIDDEN_STATEMENTS:
        if tree.find(statement) is not None:
            raise TemplateProblem("extends/include/import are not available", source=source)
    tree = _OutputRewriter().visit(tree)
    tree.set_environment(ENV)
    names = frozenset(find_undeclared_variables(tree)) - FUNCTIONS.keys()
    return tree, names


class CompiledTemplate:
    """A template string. `render` returns text; `evaluate` returns a native value when the
    template is exactly one `{{ expression }}` (used by map `items`), else the text."""

    __slots__ = ("_expr", "_template", "constant", "names", "source")

    def __init__(self, source: str, template: JinjaTemplate | None, names: frozenset[str],
                 expr: CompiledExpression | None = None) -> None:
        self.source = source
        self._template = template
        self.names = names
        self._expr = expr
        self.constant = template is None

    def render(self, scope: Mapping[str, Any]) -> str:
        if self._template is None:
            return self.source
        try:
            text = self._template.render(scope)
        except TemplateProblem:
            raise
        except Exception as exc:
            raise TemplateProblem(_describe(exc), source=self.source) from exc
        if len(text) > MAX_OUTPUT_CHARS:
            raise TemplateProblem(f"rendered text exceeds {MAX_OUTPUT_CHARS} characters", source=self.source)
        return text

    def evaluate(self, scope: Mapping[str, Any]) -> Any:
        if self._expr is not None:
            return self._expr.evaluate(scope)
        return self.render(scope)


class CompiledExpression:
    """An expression (`condition`, `cases[].when`, `items`): evaluates to a native value."""

    __slots__ = ("_template", "names", "source")

    def __init__(self, source: str, template: JinjaTemplate, names: frozenset[str]) -> None:
        self.source = source
        self._template = template
        self.names = names

    def evaluate(self, scope: Mapping[str, Any]) -> Any:
        try:
            context = self._template.new_context(dict(scope))
            for _ in self._template.root_render_func(context):
                pass
            value = context.vars["result"]
        except Exception as exc:
            raise TemplateProblem(_describe(exc), source=self.source) from exc
        if isinstance(value, Undefined):
            raise TemplateProblem("expression is undefined", source=self.source)
        return value


Compiled = CompiledTemplate | CompiledExpression


def _describe(exc: BaseException) -> str:
    if isinstance(exc, SecurityError):
        return f"not allowed: {exc}"
    if isinstance(exc, TemplateError):
        return exc.message or type(exc).__name__
    return f"{type(exc).__name__}: {exc}"


def _check_source(source: Any) -> str:
    if not isinstance(source, str):
        raise TemplateProblem("must be a string", source=repr(source))
    if len(source) > MAX_SOURCE_CHARS:
        raise TemplateProblem(f"longer than {MAX_SOURCE_CHARS} characters", source=source[:200])
    return source


@lru_cache(maxsize=4096)
def compile_template(source: str) -> CompiledTemplate:
    source = _check_source(source)
    if "{{" not in source and "{%" not in source and "{#" not in source:
        return CompiledTemplate(source, None, frozenset())
    try:
        tree = ENV.parse(source)
        tree, names = _prepare(tree, source)
        template = ENV.from_string(tree)
    except TemplateProblem:
        raise
    except Exception as exc:
        raise TemplateProblem(f"does not parse: {_describe(exc)}", source=source) from exc
    expr = None
    body = tree.body
    if len(body) == 1 and isinstance(body[0], nodes.Output) and len(body[0].nodes) == 1:
        only = body[0].nodes[0]
        if not isinstance(only, nodes.TemplateData):
            expr = _compile_expression_node(only, source, names)
    return CompiledTemplate(source, template, names, expr)


def _compile_expression_node(expr: nodes.Expr, source: str, names: frozenset[str]) -> CompiledExpression:
    body = [nodes.Assign(nodes.Name("result", "store"), expr, lineno=1)]
    tree = nodes.Template(body, lineno=1)
    tree.set_environment(ENV)
    return CompiledExpression(source, ENV.from_string(tree), names)


@lru_cache(maxsize=4096)
def compile_expression(source: str) -> CompiledExpression:
    source = _check_source(source)
    if not source.strip():
        raise TemplateProblem("empty expression", source=source)
    try:
        parser = Parser(ENV, source, state="variable")
        expr = parser.parse_expression()
        if not parser.stream.eos:
            raise TemplateProblem(f"unexpected {parser.stream.current.value!r} after the expression",
                                  source=source)
        tree = nodes.Template([nodes.Assign(nodes.Name("result", "store"), expr, lineno=1)], lineno=1)
        tree, names = _prepare(tree, source)
        return CompiledExpression(source, ENV.from_string(tree), names)
    except TemplateProblem:
        raise
    except Exception as exc:
        raise TemplateProblem(f"does not parse: {_describe(exc)}", source=source) from exc


def compile_items(source: str) -> Compiled:
    """`map.items`: a template (`{{ in.list }}` gives the list itself) or a bare expression."""
    if "{{" in source or "{%" in source:
        return compile_template(source)
    return compile_expression(source)


def compile_field(source: str, mode: str) -> Compiled:
    if mode == "expression":
        return compile_expression(source)
    if mode == "items":
        return compile_items(source)
    return compile_template(source)


def references(source: str, mode: str = "template") -> frozenset[str]:
    """The free names a template or expression reads (node ids and scope names)."""
    return compile_field(source, mode).names
