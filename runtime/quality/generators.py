"""Generated items: needle-in-a-haystack retrieval at several context lengths and depths.

The haystack is bland, varied filler prose built from a seeded random generator (no real
document, nothing to memorise); one sentence hides a value ("The access code for the
Harbor vault is amber-4172."), and the question at the end asks for it. Lengths are sized
with an estimate of characters per token; the run records the real prompt token count of
every item, which the Quality page shows.
"""

from __future__ import annotations

import random
from typing import Any

from runtime.quality.items import Item, NeedleGenerator

_SUBJECTS = [
    "The committee",
    "A junior analyst",
    "The night shift",
    "Our regional office",
    "The maintenance crew",
    "A visiting inspector",
    "The finance team",
    "The head gardener",
    "An external auditor",
    "The archivist",
    "The logistics desk",
    "A new intern",
    "The research group",
    "The harbour master",
    "The caretaker",
]
_VERBS = [
    "reviewed",
    "postponed",
    "summarised",
    "questioned",
    "approved",
    "reorganised",
    "catalogued",
    "inspected",
    "discussed",
    "rewrote",
    "circulated",
    "measured",
    "photographed",
    "double-checked",
    "filed",
]
_OBJECTS = [
    "the quarterly plan",
    "the shipping schedule",
    "a long memo about parking",
    "the old floor maps",
    "the supplier contracts",
    "the visitor log",
    "a draft of the newsletter",
    "the lighting budget",
    "the training material",
    "the weather reports",
    "the inventory of chairs",
    "the safety checklist",
    "the minutes of the last meeting",
    "a proposal for new signage",
    "the cafeteria menu",
]
_TAILS = [
    "before lunch",
    "on a rainy afternoon",
    "without much enthusiasm",
    "after a short delay",
    "in the east wing",
    "with great care",
    "while the printer jammed",
    "as usual",
    "late in the evening",
    "during the fire drill",
    "for the third time",
    "at the request of the board",
    "in a hurry",
    "quietly",
    "with a cup of tea",
]
_PLACES = [
    "Harbor",
    "Granite",
    "Willow",
    "Copper",
    "Northgate",
    "Lantern",
    "Meadow",
    "Falcon",
    "Juniper",
    "Orchard",
]
_WORDS = [
    "amber",
    "cobalt",
    "saffron",
    "violet",
    "indigo",
    "scarlet",
    "olive",
    "teal",
    "ivory",
    "crimson",
]


def _sentence(rng: random.Random) -> str:
    return f"{rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} {rng.choice(_OBJECTS)} {rng.choice(_TAILS)}."


def haystack(target_chars: int, rng: random.Random) -> list[str]:
    out: list[str] = []
    size = 0
    while size < target_chars:
        s = _sentence(rng)
        out.append(s)
        size += len(s) + 1
    return out


def needle_items(gen: NeedleGenerator) -> list[Item]:
    items: list[Item] = []
    for n_tokens in gen.context_tokens:
        for depth in gen.depths:
            rng = random.Random(f"{gen.seed}:{n_tokens}:{depth}")
            place = rng.choice(_PLACES)
            value = f"{rng.choice(_WORDS)}-{rng.randint(1000, 9999)}"
            needle = f"The access code for the {place} vault is {value}."
            question = f"What is the access code for the {place} vault? Reply with the access code only."
            intro = "Read the following notes carefully. One of them contains an access code.\n\n"
            body_chars = (
                int(n_tokens * gen.chars_per_token)
                - len(intro)
                - len(question)
                - len(needle)
                - 4
            )
            sentences = haystack(max(body_chars, 0), rng)
            pos = round(depth * len(sentences))
            sentences.insert(pos, needle)
            prompt = intro + " ".join(sentences) + "\n\n" + question
            check: dict[str, Any] = {
                "answer": value,
                "context_tokens": n_tokens,
                "depth": depth,
                "echo_marker": intro.split(".")[0],
            }
            items.append(
                Item(
                    id=f"needle-{n_tokens}-d{round(depth * 100):02d}",
                    messages=[{"role": "user", "content": prompt}],
                    scorer="needle",
                    check=check,
                    expected=value,
                    tags=[f"{n_tokens} tokens", f"depth {depth:.0%}"],
                )
            )
    return items
