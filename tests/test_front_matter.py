"""A generated page's front matter (pipelines.site.per_host) reads back, through MkDocs' own parser, as
written, whatever text a host's label carries: a label with a character past U+FFFF once made MkDocs drop
the whole front matter (JSON writes it as a surrogate pair, which PyYAML reads as two lone surrogates), so
the page lost its title and the variables its body reads (the property test's falsifying example)."""

from __future__ import annotations

import pytest
from mkdocs.utils import meta

from pipelines.site.per_host import HOST_PAGE_BODY, _yaml_string


@pytest.mark.parametrize(
    "text, read",
    [
        ("plain", "plain"),
        ("emoji \U0001f600 and \U000e0001", "emoji \U0001f600 and \U000e0001"),
        ('quote " backslash \\ colon: # hash', 'quote " backslash \\ colon: # hash'),
        (
            "controls \x00\x01\t\n\x7f\x83\x85 \u2028\ufeff",
            "controls \x00\x01\t\n\x7f\x83\x85 \u2028\ufeff",
        ),
        ("a\U0003e1d7\x83û\U0009d9cf\ub3dd", "a\U0003e1d7\x83û\U0009d9cf\ub3dd"),
        ("lone \ud800 surrogate \udfff", "lone \ufffd surrogate \ufffd"),
        ("", ""),
    ],
)
def test_a_front_matter_string_reads_back_as_written(text, read):
    page = (
        f"---\ntitle: {_yaml_string(text)}\nsearch:\n  exclude: true\n"
        f"almanac_split: {_yaml_string('hosts')}\nalmanac_host: {_yaml_string('8bby9g9z')}\n---\n\n"
        f"{HOST_PAGE_BODY}\n"
    )
    body, fields = meta.get_data(page)
    assert fields == {
        "title": read,
        "search": {"exclude": True},
        "almanac_split": "hosts",
        "almanac_host": "8bby9g9z",
    }
    assert body.strip() == HOST_PAGE_BODY
    assert _yaml_string(text).isascii()
