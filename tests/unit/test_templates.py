"""Templates and expressions: scope rules, the sandbox, bounds, references, clear errors."""

from __future__ import annotations

import pytest

from shared.contract.templates import (
    MAX_OUTPUT_CHARS,
    RetrieverOutput,
    TemplateProblem,
    compile_expression,
    compile_items,
    compile_template,
    references,
)


def render(source: str, **scope: object) -> str:
    return compile_template(source).render(scope)


def test_output_suffix_and_bare_name_mean_the_same() -> None:
    assert render("{{ ans.output }}|{{ ans }}", ans="hello") == "hello|hello"
    assert render("{{ in.text }}", **{"in": {"text": "q"}}) == "q"


def test_retriever_output_renders_as_joined_chunks_and_keeps_fields() -> None:
    kb = RetrieverOutput({"chunks": [{"text": "one", "score": 1}, {"text": "two", "score": 0.5}]})
    assert render("{{ kb.output }}", kb=kb) == "one\n\ntwo"
    assert render("{{ kb.chunks | length }} {{ kb.chunks[1].score }}", kb=kb) == "2 0.5"


def test_mappings_and_lists_render_as_json_and_none_as_empty() -> None:
    assert render("{{ x }}", x={"a": [1, "é"]}) == '{"a": [1, "é"]}'
    assert render("[{{ x }}]", x=None) == "[]"


def test_whitelisted_functions_and_filters() -> None:
    scope = {"t": "Hello", "xs": [3, 1, 2]}
    text = render("{{ len(xs) }} {{ lower(t) }} {{ upper(t) }} {{ contains(t, 'ell') }}", **scope)
    assert text == "3 hello HELLO True"
    assert render("{{ json(xs) }} {{ xs | sort | join(',') }} {{ t | length }}", **scope) == "[3, 1, 2] 1,2,3 5"


def test_expressions_return_native_values() -> None:
    assert compile_expression("'cannot' not in ans").evaluate({"ans": "I can"}) is True
    assert compile_expression("in.n > 2 and len(in.xs) == 2").evaluate({"in": {"n": 3, "xs": [1, 2]}}) is True
    assert compile_items("{{ in.xs }}").evaluate({"in": {"xs": [1, 2]}}) == [1, 2]
    assert compile_items("in.xs | reverse | list").evaluate({"in": {"xs": [1, 2]}}) == [2, 1]


def test_keys_win_over_python_attributes() -> None:
    assert render("{{ d.items }}", d={"items": [1]}) == "[1]"


@pytest.mark.parametrize("source", [
    "{{ x.__class__ }}",
    "{{ x.__class__.__mro__ }}",
    "{{ t.upper() }}",
    "{{ range(10) }}",
    "{{ cycler }}",
    "{{ lipsum() }}",
    "{{ t | attr('__class__') }}",
])
def test_sandbox_blocks_internals_and_calls(source: str) -> None:
    with pytest.raises(TemplateProblem):
        compile_template(source).render({"x": {"a": 1}, "t": "s"})


def test_include_and_import_are_rejected_at_compile_time() -> None:
    for source in ("{% include 'x' %}", "{% import 'x' as y %}", "{% extends 'x' %}"):
        with pytest.raises(TemplateProblem, match="not available"):
            compile_template(source)


def test_output_and_operators_are_bounded() -> None:
    with pytest.raises(TemplateProblem, match="too large"):
        render("{{ 'a' * 10000000 }}")
    with pytest.raises(TemplateProblem, match="too large"):
        render("{{ 9 ** 99999 }}")
    with pytest.raises(TemplateProblem, match="exceeds"):
        render("{% for i in xs %}{{ s }}{% endfor %}", xs=list(range(200)), s="x" * (MAX_OUTPUT_CHARS // 100))


def test_undefined_name_fails_with_the_expression() -> None:
    with pytest.raises(TemplateProblem) as info:
        render("Hi {{ who.name }}", who={})
    problem = info.value
    problem.node_id, problem.field = "greet", "config.prompt"
    assert "greet" in str(problem) and "config.prompt" in str(problem) and "who.name" in str(problem)
    assert render("{{ who.name | default('anon') }}", who={}) == "anon"


@pytest.mark.parametrize(("source", "mode"), [("{{ x", "template"), ("a b", "expression"), ("", "expression"),
                                              ("{% for %}", "template")])
def test_syntax_errors(source: str, mode: str) -> None:
    with pytest.raises(TemplateProblem):
        references(source, mode)


def test_references_lists_free_names_only() -> None:
    src = "{% for c in kb.chunks %}{{ c.text }}{% endfor %}{{ ans.output }} {{ len(input.x) }} {{ prompts.sys }}"
    assert references(src) == {"kb", "ans", "input", "prompts"}
    assert references("a.output == b", "expression") == {"a", "b"}
    assert references("plain text") == frozenset()


def test_prompts_scope() -> None:
    assert render("{{ prompts.support_system }}", prompts={"support_system": "Be kind."}) == "Be kind."
