"""Quality suites: versioned YAML under data/suites/, items with a prompt, a check and a scorer.

A suite file (``data/suites/<name>.yaml``)::

    schema_version: 1
    name: instruction_precision
    version: 2                 # bump when items change; the content hash is recorded too
    category: instruction_precision
    description: ...
    include: instruction_precision_t1.yaml   # or a list; their items come first
    scorer: format             # default scorer of the items
    generation: {max_tokens: 96}
    items:
      - id: json-only-object
        tags: [T2]
        prompt: "Output only a JSON object with keys name and age ..."
        check: {json_only: true}

Prompt styles (``prompt_styles``, default ``[chat]``; the first is the suite's preferred one):

* ``chat``: the item's messages through the model's chat template (instruction models);
* ``completion``: raw text the model continues, with the suite's ``fewshot`` examples in
  front ("Question: ...\nAnswer: ..."), greedy, stopped at the end of the answer line; a
  HumanEval item is its own native prompt (signature and docstring; the model writes the
  body, which runs with the tests in the sandbox);
* ``loglikelihood``: multiple choice by the log-likelihood of each choice given
  "Question: ...\nAnswer:" (lm-evaluation-harness's ARC/SciQ form; acc and acc_norm).

``mc_items`` (question, choices, answer index) render in any of the three styles; plain
``items`` (prompt and check) in chat and completion. ``Suite.for_style(style)`` gives the
items of one style; artifacts record the style, and pages never merge two styles' scores.

Items may also come from a ``generator`` (``needle``: haystacks of several lengths with a
value hidden at several depths, seeded) or a ``source`` adapter over a public set from a
package (``humaneval``, ``ifbench``; see ``public.py``). ``include:`` merges the included
file under this one (fields here win, ``generation`` and ``generator`` merge key by key)
and prepends its items; an item id may appear once. Every check is validated against its
scorer's model when the suite loads, so a bad suite fails before anything runs, with the
file and the field named.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from core.errors import ConfigError
from core.paths import data_dir, relpath
from core.yamlio import load_yaml, pydantic_error_line
from runtime.quality import scorers
from runtime.quality.items import (
    ANSWER_STOP,
    HUMANEVAL_STOP,
    LETTERS,
    PROMPT_STYLES,
    SUITE_FORMAT_VERSION,
    FewShot,
    Generation,
    Item,
    MCItemSpec,
    SuiteFile,
)


def _mc_block(question: str, choices: list[str]) -> str:
    """Completion form of a multiple-choice item: the choices listed, the answer written out
    (a small base model cannot map letters to choices; it can copy the right words)."""
    return f"Question: {question}\nChoices: {', '.join(choices)}\nAnswer:"


def _fewshot_text(shots: list[FewShot]) -> str:
    out = []
    for s in shots:
        if s.question is not None and s.choices:
            out.append(
                f"{_mc_block(s.question, s.choices)} {s.choices[int(s.answer)]}\n\n"
            )
        else:
            out.append(f"Question: {s.prompt.rstrip()}\nAnswer: {s.answer}\n\n")
    return "".join(out)


def render_mc(spec: MCItemSpec, style: str, shots: list[FewShot]) -> Item:
    letters = LETTERS[: len(spec.choices)]
    mc_check = {
        "answer": letters[spec.answer],
        "letters": letters,
        "choices": {letters[i]: c for i, c in enumerate(spec.choices)},
    }
    expected = f"{letters[spec.answer]}) {spec.choices[spec.answer]}"
    user = (
        f"{spec.question}\n"
        + "".join(f"{letters[i]}) {c}\n" for i, c in enumerate(spec.choices))
        + "Answer with the letter only."
    )
    messages = [{"role": "user", "content": user}]
    if style == "chat":
        return Item(
            spec.id, messages, "multiple_choice", mc_check, expected, list(spec.tags)
        )
    if style == "completion":
        text = _fewshot_text([s for s in shots if s.choices]) + _mc_block(
            spec.question, spec.choices
        )
        return Item(
            spec.id,
            messages,
            "choice_text",
            {"answer": spec.answer, "choices": list(spec.choices)},
            expected,
            list(spec.tags),
            max_tokens=None,
            style=style,
            text=text,
            stop=list(ANSWER_STOP),
        )
    return Item(
        spec.id,
        messages,
        "mc_loglik",
        {"answer": spec.answer, "choices": list(spec.choices)},
        expected,
        list(spec.tags),
        style=style,
        text=f"Question: {spec.question}\nAnswer:",
        continuations=[f" {c}" for c in spec.choices],
    )


def render_plain(item: Item, style: str, shots: list[FewShot]) -> Item | None:
    """A prompt-and-check item in another style (None: the item has no form in that style)."""
    if style == "chat":
        return item
    if style != "completion":
        return None
    if item.scorer == "code_exec" and item.check.get(
        "prompt_prefix"
    ):  # HumanEval's native form
        return Item(
            item.id,
            item.messages,
            item.scorer,
            item.check,
            item.expected,
            list(item.tags),
            item.max_tokens,
            style=style,
            text=item.check["prompt_prefix"],
            stop=list(HUMANEVAL_STOP),
        )
    text = (
        _fewshot_text([s for s in shots if s.prompt is not None])
        + f"Question: {item.prompt.rstrip()}\nAnswer:"
    )
    return Item(
        item.id,
        item.messages,
        item.scorer,
        item.check,
        item.expected,
        list(item.tags),
        item.max_tokens,
        style=style,
        text=text,
        stop=list(ANSWER_STOP),
    )


@dataclass
class Suite:
    name: str
    version: int
    category: str
    description: str
    path: Path
    generation: Generation
    items: list[Item]
    source_info: dict[str, Any] = field(default_factory=dict)
    includes: list[str] = field(default_factory=list)
    prompt_styles: list[str] = field(default_factory=lambda: ["chat"])
    style: str = "chat"
    fewshot: list[FewShot] = field(default_factory=list)
    sources: list[Any] = field(
        default_factory=list
    )  # MCItemSpec or chat-form Item, in suite order

    def for_style(self, style: str) -> Suite:
        """This suite with its items rendered in one prompt style."""
        if style not in self.prompt_styles:
            raise ConfigError(
                f"suite {self.name!r} has no prompt style {style!r} (it declares "
                f"{', '.join(self.prompt_styles)})",
                file=relpath(self.path),
                field="prompt_styles",
            )
        items = []
        for src in self.sources:
            it = (
                render_mc(src, style, self.fewshot)
                if isinstance(src, MCItemSpec)
                else render_plain(src, style, self.fewshot)
            )
            if it is None:
                raise ConfigError(
                    f"item {src.id!r} cannot be put in prompt style {style!r} (only multiple-choice "
                    "items have a log-likelihood form)",
                    file=relpath(self.path),
                    field="prompt_styles",
                )
            items.append(
                validate_item(it, relpath(self.path), f"item {it.id}")
                if it is not src
                else it
            )
        return Suite(
            self.name,
            self.version,
            self.category,
            self.description,
            self.path,
            self.generation,
            items,
            self.source_info,
            self.includes,
            self.prompt_styles,
            style,
            self.fewshot,
            self.sources,
        )

    @property
    def content_sha256(self) -> str:
        blob = json.dumps(
            [i.to_dict() for i in self.items], sort_keys=True, ensure_ascii=False
        )
        return hashlib.sha256(blob.encode()).hexdigest()

    def sample(self, n: int | None, seed: int) -> list[Item]:
        """A seeded sample of ``n`` items in suite order (all items when n is None or too large)."""
        if n is None or n >= len(self.items):
            return list(self.items)
        rng = random.Random(f"{seed}:{self.name}:{self.version}")
        picked = sorted(rng.sample(range(len(self.items)), n))
        return [self.items[i] for i in picked]


def suites_dir() -> Path:
    return data_dir() / "suites"


def find(name_or_path: str | Path) -> Path:
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") or p.exists():
        if not p.exists():
            raise ConfigError("no such suite file", file=relpath(p))
        return p
    cand = suites_dir() / f"{name_or_path}.yaml"
    if cand.exists():
        return cand
    import difflib

    names = sorted(x.stem for x in suites_dir().glob("*.yaml"))
    close = difflib.get_close_matches(str(name_or_path), names, n=1)
    hint = (
        f" (did you mean {close[0]!r}?)" if close else f" (known: {', '.join(names)})"
    )
    raise ConfigError(
        f"no suite named {name_or_path!r}{hint}", file=relpath(suites_dir())
    )


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        if k == "items":
            out["items"] = list(base.get("items") or []) + list(v or [])
        elif (
            k in ("generation", "generator", "source")
            and isinstance(v, dict)
            and isinstance(out.get(k), dict)
        ):
            out[k] = {**out[k], **v}
        else:
            out[k] = v
    return out


def _read(path: Path, seen: tuple[Path, ...] = ()) -> tuple[dict[str, Any], list[str]]:
    if path.resolve() in seen:
        raise ConfigError("include cycle", file=relpath(path), field="include")
    raw = load_yaml(path)
    if not isinstance(raw, dict):
        raise ConfigError("a suite must be a mapping", file=relpath(path))
    inc = raw.pop("include", None)
    includes: list[str] = []
    merged: dict[str, Any] = {}
    for i, name in enumerate([inc] if isinstance(inc, str) else list(inc or [])):
        if not isinstance(name, str):
            raise ConfigError(
                "include must name a suite file",
                file=relpath(path),
                field=f"include[{i}]",
            )
        base_path = (path.parent / name).resolve()
        if not base_path.exists():
            raise ConfigError(
                f"included file {name!r} not found", file=relpath(path), field="include"
            )
        base, sub = _read(base_path, seen + (path.resolve(),))
        includes += [relpath(base_path)] + sub
        merged = _merge(merged, base)
    return _merge(merged, raw), includes


def _expected_text(scorer: str, check: dict[str, Any]) -> str:
    if scorer in ("exact", "multiple_choice", "numeric", "needle"):
        a = check.get("answer")
        return " | ".join(map(str, a)) if isinstance(a, list) else str(a)
    if scorer == "code_exec":
        return f"passes the unit tests of {check.get('entry_point')}"
    if scorer == "ifbench":
        return "follows: " + ", ".join(check.get("instruction_id_list", []))
    if scorer == "json_schema":
        return "valid JSON" + (
            f" containing {json.dumps(check['expect'], sort_keys=True)}"
            if check.get("expect")
            else ""
        )
    if scorer == "format":
        return "; ".join(f"{k}={json.dumps(v)}" for k, v in sorted(check.items()))
    return json.dumps(check, sort_keys=True)


def validate_item(item: Item, src: str, where: str) -> Item:
    try:
        sc = scorers.get(item.scorer)
    except KeyError as exc:
        raise ConfigError(
            str(exc).strip("'\""), file=src, field=f"{where}.scorer"
        ) from None
    try:
        checked = sc.check_model.model_validate(item.check)
    except ValidationError as exc:
        raise ConfigError(
            pydantic_error_line(exc, {"*": list(sc.check_model.model_fields)}),
            file=src,
            field=f"{where}.check",
        ) from None
    item.check = checked.model_dump(mode="json", by_alias=True, exclude_defaults=True)
    return item


def load(name_or_path: str | Path) -> Suite:
    """A suite with its items resolved (includes merged, generator expanded, adapter read)."""
    path = find(name_or_path)
    src = relpath(path)
    raw, includes = _read(path)
    try:
        spec = SuiteFile.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(
            pydantic_error_line(exc, {"*": list(SuiteFile.model_fields)}), file=src
        ) from None
    if spec.schema_version != SUITE_FORMAT_VERSION:
        raise ConfigError(
            f"format version {spec.schema_version} is not supported (this almanac reads "
            f"{SUITE_FORMAT_VERSION})",
            file=src,
            field="schema_version",
        )
    items: list[Item] = []
    for i, it in enumerate(spec.items):
        scorer = it.scorer or spec.scorer
        if scorer is None:
            raise ConfigError(
                "no scorer (set one on the item or the suite)",
                file=src,
                field=f"items[{i}].scorer",
            )
        messages = ([{"role": "system", "content": it.system}] if it.system else []) + [
            {"role": "user", "content": it.prompt}
        ]
        item = Item(
            it.id, messages, scorer, it.check, it.expected or "", it.tags, it.max_tokens
        )
        validate_item(item, src, f"items[{i}]")
        if not item.expected:
            item.expected = _expected_text(scorer, item.check)
        items.append(item)
    source_info: dict[str, Any] = {}
    if spec.generator is not None:
        from runtime.quality.generators import needle_items

        items += [
            validate_item(it, src, "generator") for it in needle_items(spec.generator)
        ]
        source_info = {"generator": spec.generator.model_dump(mode="json")}
    if spec.source is not None:
        from runtime.quality import public

        try:
            adapter = public.get(spec.source.adapter)
        except KeyError as exc:
            raise ConfigError(
                str(exc).strip("'\""), file=src, field="source.adapter"
            ) from None
        got, source_info = adapter(spec.source.options)
        items += [validate_item(it, src, f"source item {it.id}") for it in got]
    for k, st in enumerate(spec.prompt_styles):
        if st not in PROMPT_STYLES:
            raise ConfigError(
                f"unknown prompt style {st!r} (known: {', '.join(PROMPT_STYLES)})",
                file=src,
                field=f"prompt_styles[{k}]",
            )
    for k, shot in enumerate(spec.fewshot):
        if shot.choices is not None and (
            not isinstance(shot.answer, int) or not 0 <= shot.answer < len(shot.choices)
        ):
            raise ConfigError(
                "answer must be the index of one of the choices",
                file=src,
                field=f"fewshot[{k}].answer",
            )
        if (shot.question is None) == (shot.prompt is None):
            raise ConfigError(
                "give either question and choices or prompt",
                file=src,
                field=f"fewshot[{k}]",
            )
    for k, mc in enumerate(spec.mc_items):
        if mc.answer >= len(mc.choices):
            raise ConfigError(
                f"answer {mc.answer} is not the index of one of the {len(mc.choices)} choices",
                file=src,
                field=f"mc_items[{k}].answer",
            )
    sources: list[Any] = list(spec.mc_items) + items
    seen: set[str] = set()
    for it in sources:
        if it.id in seen:
            raise ConfigError(
                f"item id {it.id!r} appears twice (check included files)",
                file=src,
                field="items",
            )
        seen.add(it.id)
    if not sources:
        raise ConfigError("the suite has no items", file=src, field="items")
    base = Suite(
        spec.name,
        spec.version,
        spec.category,
        spec.description,
        path,
        spec.generation,
        items,
        source_info,
        includes,
        list(spec.prompt_styles),
        "chat",
        list(spec.fewshot),
        sources,
    )
    return base.for_style(spec.prompt_styles[0])


def list_suites() -> list[Path]:
    return sorted(suites_dir().glob("*.yaml"))
