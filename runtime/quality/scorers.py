"""Scorers: from (an item's check, the model's output) to pass/fail with the evidence.

Each scorer is registered once with a version (part of every quality artifact's key, so a
changed scorer re-scores instead of mixing verdicts) and a pydantic model of its ``check``
(validated when a suite is loaded, so a bad suite fails before anything runs).

Where scoring happens: every scorer runs at run time, in the parent process of the quality
runner, right after the child process has generated the outputs; the verdict and the
evidence (extracted answer, each format check, test-run stderr) are stored in the
artifact. Pipelines only aggregate stored verdicts; they never execute model output. The
``code_exec`` scorer runs the output only through ``runtime.quality.sandbox``.

Every score is binary (1.0 pass, 0.0 fail): pass rates and their Wilson intervals are then
well defined. Partial information (which instructions of an IFBench prompt were followed,
which format checks failed) is kept in ``details``.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from core.registry import Registry


@dataclass
class Score:
    passed: bool
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def score(self) -> float:
        return 1.0 if self.passed else 0.0


class Check(BaseModel):
    model_config = ConfigDict(extra="forbid")


@dataclass(frozen=True)
class Scorer:
    name: str
    version: int
    description: str
    check_model: type[Check]
    fn: Callable[[Any, str], Score]

    def __call__(self, check: dict[str, Any] | Check, output: str) -> Score:
        c = (
            check
            if isinstance(check, Check)
            else self.check_model.model_validate(check)
        )
        return self.fn(c, output)


SCORERS: Registry[Scorer] = Registry("scorer")


def register(name: str, version: int, description: str, check_model: type[Check]):
    def deco(fn: Callable[[Any, str], Score]) -> Callable[[Any, str], Score]:
        SCORERS.add(
            name, Scorer(name, version, description, check_model, fn), stacklevel=2
        )
        return fn

    return deco


def get(name: str) -> Scorer:
    if name not in SCORERS:
        import difflib

        close = difflib.get_close_matches(name, list(SCORERS), n=1)
        hint = (
            f" (did you mean {close[0]!r}?)"
            if close
            else f" (known: {', '.join(sorted(SCORERS))})"
        )
        raise KeyError(f"unknown scorer {name!r}{hint}")
    return SCORERS[name]


def score(scorer: str, check: dict[str, Any], output: str) -> Score:
    return get(scorer)(check, output)


# -- normalisation and extraction ---------------------------------------------------------
_EDGE_PUNCT = " \t\r\n.,;:!?\"'`*_()[]{}<>"


def normalize(text: str) -> str:
    """NFKC, case-folded, markdown emphasis and surrounding punctuation removed, whitespace collapsed."""
    t = unicodedata.normalize("NFKC", text).casefold()
    t = t.replace("**", "").replace("__", "")
    t = re.sub(r"\s+", " ", t).strip(_EDGE_PUNCT)
    return t


_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\n(.*?)```", re.S)


def strip_fence(text: str) -> str:
    """The body of a fenced code block when the whole text is one, else the text."""
    t = text.strip()
    m = re.fullmatch(r"```[ \t]*[A-Za-z0-9_+-]*[ \t]*\n(.*?)\n?```", t, re.S)
    return m.group(1) if m else t


# -- exact match ----------------------------------------------------------------------------
class ExactCheck(Check):
    answer: str | list[str] = Field(
        ..., description="Accepted answer(s); compared after normalisation."
    )

    def answers(self) -> list[str]:
        return [self.answer] if isinstance(self.answer, str) else list(self.answer)


@register(
    "exact",
    1,
    "The whole output equals an accepted answer after normalisation (case, whitespace, "
    "surrounding punctuation and emphasis ignored).",
    ExactCheck,
)
def _exact(check: ExactCheck, output: str) -> Score:
    got = normalize(output)
    accepted = [normalize(a) for a in check.answers()]
    return Score(
        got in accepted, {"normalized_output": got[:200], "accepted": accepted}
    )


# -- multiple choice ------------------------------------------------------------------------
class MultipleChoiceCheck(Check):
    answer: str = Field(..., description="The correct letter.")
    letters: str = Field("ABCD", description="The letters offered.")
    choices: dict[str, str] = Field(
        default_factory=dict,
        description="Letter -> choice text (lets a bare choice text count).",
    )

    @model_validator(mode="after")
    def _answer_offered(self) -> MultipleChoiceCheck:
        self.answer = self.answer.strip().upper()
        if self.answer not in self.letters:
            raise ValueError(
                f"answer {self.answer!r} is not one of the letters {self.letters!r}"
            )
        return self


def extract_choice(
    output: str, letters: str, choices: dict[str, str] | None = None
) -> tuple[str | None, str]:
    """(letter, how) from a free-text answer; None when absent or ambiguous."""
    L = re.escape(letters)
    t = output.strip().replace("**", "")
    patterns = [
        ("leading letter", rf"^\(?([{L}])\)?(?:[.):\s]|$)"),
        (
            "answer is X",
            rf"(?i:answer|option|choice)(?:\s+is)?\s*[:\-]?\s*\(?([{L}])\)?(?![A-Za-z])",
        ),
        ("lone letter", rf"(?<![A-Za-z])\(([{L}])\)(?![A-Za-z])"),
    ]
    for how, pat in patterns:
        found = {m.group(1) for m in re.finditer(pat, t)}
        if len(found) == 1:
            return found.pop(), how
        if len(found) > 1:
            return None, f"ambiguous ({how}: {', '.join(sorted(found))})"
    if choices:
        hits = {k for k, v in choices.items() if v and normalize(v) in normalize(t)}
        if len(hits) == 1:
            return hits.pop(), "choice text"
        if len(hits) > 1:
            return None, f"ambiguous (choice texts of {', '.join(sorted(hits))})"
    return None, "no choice found"


@register(
    "multiple_choice",
    1,
    "The single letter chosen in the output (leading letter, 'answer is X', '(X)', or "
    "exactly one choice text) equals the correct one; several different letters = fail.",
    MultipleChoiceCheck,
)
def _multiple_choice(check: MultipleChoiceCheck, output: str) -> Score:
    letter, how = extract_choice(output, check.letters, check.choices)
    return Score(
        letter == check.answer,
        {"extracted": letter, "how": how, "expected": check.answer},
    )


# -- numeric --------------------------------------------------------------------------------
class NumericCheck(Check):
    answer: float = Field(..., description="The correct value.")
    abs_tol: float = Field(1e-6, ge=0, description="Absolute tolerance.")
    rel_tol: float = Field(1e-6, ge=0, description="Relative tolerance.")
    require_marker: bool = Field(
        False,
        description=(
            "Only an explicit answer ('Answer: N', '#### N', \\boxed{N}) counts, not "
            "the last number (an echoed question must not pass)."
        ),
    )


_NUM = r"[-−]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:\s*/\s*\d+)?|[-−]?\.\d+"


def parse_number(text: str) -> float | None:
    t = text.replace("−", "-").replace(",", "").replace(" ", "")
    try:
        if "/" in t:
            a, b = t.split("/", 1)
            return float(a) / float(b) if float(b) != 0 else None
        return float(t)
    except ValueError:
        return None


def extract_number(
    output: str, require_marker: bool = False
) -> tuple[float | None, str]:
    """(value, how): '#### N', '\\boxed{N}', 'answer is N' / 'Answer: N', else (unless a marker is
    required) the last number."""
    t = output.replace("**", "").replace("$", "")
    for how, pat in (
        ("#### marker", rf"####\s*({_NUM})"),
        ("boxed", rf"\\boxed\{{\s*({_NUM})\s*\}}"),
        ("answer is", rf"(?i:answer)(?:\s+is)?\s*[:=]?\s*({_NUM})"),
    ):
        ms = re.findall(pat, t)
        if ms:
            return parse_number(ms[-1]), how
    if require_marker:
        return None, "no answer marker"
    ms = re.findall(_NUM, t)
    if ms:
        return parse_number(ms[-1]), "last number"
    return None, "no number found"


@register(
    "numeric",
    1,
    "The final number of the output ('#### N', \\boxed{N}, 'answer: N', else the last "
    "number) equals the answer within tolerance.",
    NumericCheck,
)
def _numeric(check: NumericCheck, output: str) -> Score:
    value, how = extract_number(output, check.require_marker)
    ok = value is not None and abs(value - check.answer) <= max(
        check.abs_tol, check.rel_tol * abs(check.answer)
    )
    return Score(ok, {"extracted": value, "how": how, "expected": check.answer})


# -- format compliance ----------------------------------------------------------------------
class ItemCount(Check):
    n: int = Field(..., ge=0, description="Exact number of items.")
    of: str = Field(
        "lines",
        description="What counts as an item: lines (non-empty), bullets (-, *, 1.), json_array, comma.",
    )

    @field_validator("of")
    @classmethod
    def _of(cls, v: str) -> str:
        if v not in ("lines", "bullets", "json_array", "comma"):
            raise ValueError(
                f"unknown item kind {v!r} (known: lines, bullets, json_array, comma)"
            )
        return v


class FormatCheck(Check):
    json_only: bool = Field(
        False, description="The whole output parses as JSON: no prose, no code fence."
    )
    item_count: ItemCount | None = Field(None, description="Exactly N items.")
    not_contains: list[str] = Field(
        default_factory=list,
        description="Words or phrases that must not appear (case-insensitive, whole words).",
    )
    contains: list[str] = Field(
        default_factory=list,
        description="Words or phrases that must appear (case-insensitive).",
    )
    regex: str | None = Field(
        None, description="A regular expression the output must match somewhere."
    )
    fullmatch: str | None = Field(
        None, description="A regular expression the whole (stripped) output must match."
    )
    max_words: int | None = Field(None, ge=0)
    min_words: int | None = Field(None, ge=0)
    lowercase: bool = Field(False, description="No uppercase letters.")
    uppercase: bool = Field(False, description="No lowercase letters.")
    starts_with: str | None = None
    ends_with: str | None = None

    @field_validator("regex", "fullmatch")
    @classmethod
    def _compiles(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                re.compile(v)
            except re.error as exc:
                raise ValueError(f"invalid regular expression: {exc}") from None
        return v

    @model_validator(mode="after")
    def _something(self) -> FormatCheck:
        if not self.model_fields_set:
            raise ValueError("a format check needs at least one condition")
        return self


def count_items(text: str, of: str) -> int | None:
    t = text.strip()
    if of == "json_array":
        try:
            v = json.loads(strip_fence(t))
        except ValueError:
            return None
        if (
            isinstance(v, dict)
            and len(v) == 1
            and isinstance(next(iter(v.values())), list)
        ):
            v = next(iter(v.values()))
        return len(v) if isinstance(v, list) else None
    if of == "comma":
        return len([p for p in t.split(",") if p.strip()])
    lines = [ln for ln in t.splitlines() if ln.strip()]
    if of == "bullets":
        return sum(1 for ln in lines if re.match(r"^\s*(?:[-*•]|\d+[.)])\s+", ln))
    return len(lines)


@register(
    "format",
    1,
    "Instruction precision: every listed condition holds (output only JSON, exactly N items, "
    "does not mention X, matches a pattern, word limits, case, start/end).",
    FormatCheck,
)
def _format(check: FormatCheck, output: str) -> Score:
    results: dict[str, Any] = {}
    text = output.strip()
    words = re.findall(r"\b\w+\b", text)
    if check.json_only:
        try:
            json.loads(text)
            results["json_only"] = {"ok": True}
        except json.JSONDecodeError as exc:
            results["json_only"] = {
                "ok": False,
                "why": f"not JSON: {exc.msg} at char {exc.pos}",
            }
    if check.item_count is not None:
        got = count_items(text, check.item_count.of)
        results["item_count"] = {
            "ok": got == check.item_count.n,
            "got": got,
            "want": check.item_count.n,
            "of": check.item_count.of,
        }
    for phrase in check.not_contains:
        hit = re.search(rf"(?<!\w){re.escape(phrase)}(?!\w)", text, re.I)
        results[f"not_contains:{phrase}"] = {
            "ok": hit is None,
            "found_at": hit.start() if hit else None,
        }
    for phrase in check.contains:
        results[f"contains:{phrase}"] = {"ok": phrase.casefold() in text.casefold()}
    if check.regex is not None:
        results["regex"] = {"ok": re.search(check.regex, text, re.M) is not None}
    if check.fullmatch is not None:
        results["fullmatch"] = {
            "ok": re.fullmatch(check.fullmatch, text, re.S) is not None
        }
    if check.max_words is not None:
        results["max_words"] = {"ok": len(words) <= check.max_words, "got": len(words)}
    if check.min_words is not None:
        results["min_words"] = {"ok": len(words) >= check.min_words, "got": len(words)}
    if check.lowercase:
        results["lowercase"] = {"ok": text == text.lower()}
    if check.uppercase:
        results["uppercase"] = {"ok": text == text.upper()}
    if check.starts_with is not None:
        results["starts_with"] = {"ok": text.startswith(check.starts_with)}
    if check.ends_with is not None:
        results["ends_with"] = {"ok": text.endswith(check.ends_with)}
    failed = [k for k, v in results.items() if not v["ok"]]
    return Score(not failed, {"checks": results, "failed": failed})


# -- JSON schema ----------------------------------------------------------------------------
class JsonSchemaCheck(Check):
    schema_: dict[str, Any] = Field(
        ...,
        alias="schema",
        description="JSON Schema (draft 2020-12) the output must satisfy.",
    )
    expect: dict[str, Any] | None = Field(
        None, description="Values the parsed output must contain (recursive subset)."
    )
    allow_fence: bool = Field(
        False, description="Accept the JSON inside one ```json fence."
    )

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    @field_validator("schema_")
    @classmethod
    def _valid_schema(cls, v: dict[str, Any]) -> dict[str, Any]:
        import jsonschema

        try:
            jsonschema.Draft202012Validator.check_schema(v)
        except jsonschema.SchemaError as exc:
            raise ValueError(f"invalid JSON Schema: {exc.message}") from None
        return v


def subset_mismatch(expect: Any, got: Any, path: str = "$") -> str | None:
    """Where ``got`` differs from ``expect`` (every key of expect must be present and equal)."""
    if isinstance(expect, dict):
        if not isinstance(got, dict):
            return f"{path}: expected an object"
        for k, v in expect.items():
            if k not in got:
                return f"{path}.{k}: missing"
            m = subset_mismatch(v, got[k], f"{path}.{k}")
            if m:
                return m
        return None
    if isinstance(expect, str) and isinstance(got, str):
        return (
            None
            if normalize(expect) == normalize(got)
            else f"{path}: {got!r} != {expect!r}"
        )
    if (
        isinstance(expect, (int, float))
        and isinstance(got, (int, float))
        and not isinstance(got, bool)
    ):
        return (
            None
            if abs(expect - got) <= 1e-9 * max(1.0, abs(expect))
            else f"{path}: {got!r} != {expect!r}"
        )
    return None if expect == got else f"{path}: {got!r} != {expect!r}"


@register(
    "json_schema",
    1,
    "The output parses as JSON (optionally inside one ```json fence), validates against "
    "the item's JSON Schema, and contains the expected values.",
    JsonSchemaCheck,
)
def _json_schema(check: JsonSchemaCheck, output: str) -> Score:
    import jsonschema

    text = strip_fence(output) if check.allow_fence else output.strip()
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        return Score(
            False, {"stage": "parse", "why": f"not JSON: {exc.msg} at char {exc.pos}"}
        )
    err = jsonschema.exceptions.best_match(
        jsonschema.Draft202012Validator(check.schema_).iter_errors(value)
    )
    if err is not None:
        where = ".".join(str(p) for p in err.absolute_path) or "(top level)"
        return Score(False, {"stage": "schema", "why": f"{where}: {err.message}"})
    if check.expect is not None:
        mismatch = subset_mismatch(check.expect, value)
        if mismatch:
            return Score(False, {"stage": "expect", "why": mismatch})
    return Score(True, {"stage": "ok"})


# -- needle in a haystack -------------------------------------------------------------------
class NeedleCheck(Check):
    answer: str = Field(..., description="The value hidden in the context.")
    context_tokens: int | None = Field(
        None, description="Target context length (tokens, estimated)."
    )
    depth: float | None = Field(
        None, ge=0, le=1, description="Where the needle sits (0 = start, 1 = end)."
    )
    echo_marker: str | None = Field(
        None,
        description=(
            "Text from the start of the context: an output containing it is an echo of "
            "the prompt, not an answer."
        ),
    )


@register(
    "needle",
    1,
    "The value hidden in the long context appears in the output (normalised), and the output "
    "is not an echo of the context.",
    NeedleCheck,
)
def _needle(check: NeedleCheck, output: str) -> Score:
    found = normalize(check.answer) in normalize(output)
    echo = bool(check.echo_marker) and normalize(check.echo_marker) in normalize(output)
    return Score(
        found and not echo,
        {
            "expected": check.answer,
            "found": found,
            "echo": echo,
            "context_tokens": check.context_tokens,
            "depth": check.depth,
        },
    )


# -- code execution -------------------------------------------------------------------------
class CodeExecCheck(Check):
    tests: str = Field(
        ..., description="Python test code; it must run without error (asserts)."
    )
    entry_point: str = Field(..., description="The function under test.")
    prompt_prefix: str = Field(
        "",
        description=(
            "Code the output continues (a HumanEval prompt): used when the output does "
            "not define the entry point itself."
        ),
    )
    call: str | None = Field(
        None,
        description="Statement run after the tests (HumanEval: check(entry_point)).",
    )
    timeout_s: float = Field(10.0, gt=0, le=120)


def extract_code(output: str) -> tuple[str, str]:
    """(code, how): the first fenced block (python preferred), else the raw output."""
    blocks = _FENCE.findall(output)
    for lang, body in blocks:
        if lang.lower() in ("python", "py", "python3"):
            return body, "python fence"
    if blocks:
        return blocks[0][1], "fence"
    m = re.search(
        r"```[ \t]*(?:python|py)?[ \t]*\n(.*)$", output, re.S
    )  # an unterminated fence (max_tokens hit)
    if m:
        return m.group(1), "unterminated fence"
    return output, "raw output"


def build_program(check: CodeExecCheck, output: str) -> tuple[str, str]:
    """(the whole program as it runs: code, then tests; how the code was found)."""
    code, tests, how = build_parts(check, output)
    return f"{code}\n\n{tests}", how


def build_parts(check: CodeExecCheck, output: str) -> tuple[str, str, str]:
    """(candidate code, test code, how): compiled and run apart in the sandbox, so nothing in the
    candidate (an open string, a comment) can swallow the tests."""
    code, how = extract_code(output)
    if re.search(rf"^\s*def\s+{re.escape(check.entry_point)}\s*\(", code, re.M):
        header = "\n".join(
            ln
            for ln in check.prompt_prefix.splitlines()
            if re.match(r"^(?:from\s+\S+\s+)?import\s", ln)
        )
        program, mode = f"{header}\n\n{code}", "full function"
    else:
        program, mode = check.prompt_prefix + code, "continuation of the prompt"
    tests = check.tests + "\n"
    if check.call:
        tests += "\n" + check.call + "\n"
    return program, tests, f"{how}; {mode}"


@register(
    "code_exec",
    2,
    "The code in the output runs, then the item's unit tests (compiled apart) run to their "
    "last statement in the sandbox (kernel isolation, timeout, resource limits, no network, temporary "
    "directory); an early exit, a signal or tampering leaves no proof of completion and fails.",
    CodeExecCheck,
)
def _code_exec(check: CodeExecCheck, output: str) -> Score:
    from runtime.quality.sandbox import Limits, run_python

    program, tests, how = build_parts(check, output)
    res = run_python(
        program,
        Limits(timeout_s=check.timeout_s, cpu_s=int(check.timeout_s) + 1),
        tests=tests,
    )
    tail = res.stderr.strip().splitlines()[-1] if res.stderr.strip() else ""
    return Score(
        res.ok,
        {
            "how": how,
            "exit_code": res.exit_code,
            "signal": res.signal,
            "timed_out": res.timed_out,
            "completed": res.completed,
            "reason": res.reason,
            "wall_s": round(res.wall_s, 3),
            "error": tail[:300],
            "stderr_tail": res.stderr[-1500:],
            "isolation": res.isolation,
        },
    )


# -- multiple choice by log-likelihood -----------------------------------------------------
class LoglikChoiceCheck(Check):
    answer: int = Field(..., ge=0, description="Index of the correct choice.")
    choices: list[str] = Field(
        ...,
        min_length=2,
        description="The choices (the continuations are ' ' + choice).",
    )

    @model_validator(mode="after")
    def _answer_offered(self) -> LoglikChoiceCheck:
        if self.answer >= len(self.choices):
            raise ValueError(
                f"answer {self.answer} is not the index of one of the {len(self.choices)} choices"
            )
        return self


@register(
    "mc_loglik",
    1,
    "Multiple choice by log-likelihood (lm-evaluation-harness): the choice whose continuation "
    "has the highest summed log-probability given the context is the answer (acc); acc_norm divides by the "
    "continuation's length in bytes.",
    LoglikChoiceCheck,
)
def _mc_loglik(check: LoglikChoiceCheck, output: Any) -> Score:
    rows = json.loads(output) if isinstance(output, str) else output
    if not isinstance(rows, list) or len(rows) != len(check.choices):
        return Score(False, {"error": "no log-likelihood for every choice"})
    lps = [float(r["logprob"]) for r in rows]
    norm = [float(r["logprob"]) / max(1, int(r["n_bytes"])) for r in rows]
    pick = max(range(len(lps)), key=lps.__getitem__)
    pick_norm = max(range(len(norm)), key=norm.__getitem__)
    return Score(
        pick == check.answer,
        {
            "logprobs": [round(x, 4) for x in lps],
            "n_tokens": [r["n_tokens"] for r in rows],
            "chosen": pick,
            "chosen_norm": pick_norm,
            "acc_norm": pick_norm == check.answer,
            "is_greedy": [bool(r.get("is_greedy")) for r in rows],
            "chance": 1.0 / len(check.choices),
        },
    )


@register(
    "choice_text",
    1,
    "Multiple choice answered in words (completion style): the output's first line, "
    "normalised, must equal the correct choice; an output that is no choice counts as wrong.",
    LoglikChoiceCheck,
)
def _choice_text(check: LoglikChoiceCheck, output: str) -> Score:
    first = normalize(output.strip().splitlines()[0] if output.strip() else "")
    names = [normalize(c) for c in check.choices]
    chosen = names.index(first) if first in names else None
    return Score(
        chosen == check.answer,
        {
            "normalized_output": first[:200],
            "chosen": chosen,
            "chance": 1.0 / len(check.choices),
        },
    )


# -- IFBench --------------------------------------------------------------------------------
class IFBenchCheck(Check):
    instruction_id_list: list[str] = Field(..., min_length=1)
    kwargs: list[dict[str, Any]] = Field(...)

    @model_validator(mode="after")
    def _known(self) -> IFBenchCheck:
        from runtime.quality.ifbench_checks import CHECKERS

        unknown = [i for i in self.instruction_id_list if i not in CHECKERS]
        if unknown:
            raise ValueError(f"instructions not verifiable here: {', '.join(unknown)}")
        if len(self.kwargs) != len(self.instruction_id_list):
            raise ValueError("kwargs must have one entry per instruction")
        return self


@register(
    "ifbench",
    1,
    "IFBench prompt-level strict accuracy: every verifiable instruction of the prompt is "
    "followed (our port of IFBench's checkers for the subset that needs no NLP model).",
    IFBenchCheck,
)
def _ifbench(check: IFBenchCheck, output: str) -> Score:
    from runtime.quality.ifbench_checks import follows

    per = []
    for iid, kw in zip(check.instruction_id_list, check.kwargs):
        per.append(
            {
                "instruction": iid,
                "followed": bool(output.strip()) and follows(iid, kw, output),
            }
        )
    return Score(all(p["followed"] for p in per), {"instructions": per})


def scorer_versions() -> dict[str, int]:
    return {name: s.version for name, s in sorted(SCORERS.items())}
