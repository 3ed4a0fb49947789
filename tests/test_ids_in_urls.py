"""Every id placed in a URL on the site is percent-encoded (issue 34): a run, quality or perplexity
id in a ``?id=`` query, an artifact's data path in a link to its JSON, whatever characters they hold."""

from __future__ import annotations

from urllib.parse import parse_qs, unquote, urlsplit

import pytest

from pipelines.site.markdown import data_url, run_json, run_link
from pipelines.site.quality_pages import perplexity_link, quality_link

HOSTILE = [
    '<iframe src="javascript:alert(1)">',
    "a&id=other#frag",
    "x y+z?%",
    "../../etc/passwd",
    "\u00e9\u4e2d\n",
]


@pytest.mark.parametrize("ident", HOSTILE)
@pytest.mark.parametrize("make", [run_link, quality_link, perplexity_link])
def test_an_id_in_a_query_is_percent_encoded(make, ident):
    url = make(ident)
    query = url.split("?", 1)[1]
    assert all(c.isalnum() or c in "=%-._~" for c in query), url
    assert parse_qs(query) == {"id": [ident]}
    assert unquote(query.removeprefix("id=")) == ident


@pytest.mark.parametrize(
    "path", ['runs/h/m/a b<x>".json', "runs/h/m/pp512+tg128--ab@c.json"]
)
def test_a_data_path_in_a_url_is_percent_encoded(path):
    url = data_url(path)
    assert unquote(url) == "data/" + path
    assert not any(c in url for c in ' <>"')
    assert urlsplit(url).path == url  # nothing of it becomes a query or a fragment


def test_an_ids_own_characters_stay_as_they_are():
    assert (
        data_url("runs/h/m/pp512+tg128--ab@c.json")
        == "data/runs/h/m/pp512+tg128--ab@c.json"
    )

    class Rec:
        data_path = "runs/h/m/a#b.json"

    assert run_json(Rec()).endswith("data/runs/h/m/a%23b.json")
