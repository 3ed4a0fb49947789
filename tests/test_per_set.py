"""pipelines.memo.per_set: an answer kept per list of artifacts, found again by the identity of every
artifact in order, the least recently asked list dropped first."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from pipelines import memo


class Rec(Mapping):
    """A record as core.records' are: a Mapping, so two records of equal content compare equal."""

    def __init__(self, **doc: object) -> None:
        self.doc = doc

    def __getitem__(self, k: str) -> object:
        return self.doc[k]

    def __iter__(self):
        return iter(self.doc)

    def __len__(self) -> int:
        return len(self.doc)


@pytest.fixture
def counted():
    calls: list[list[Rec]] = []

    @memo.per_set
    def total(docs: list[Rec]) -> int:
        calls.append(docs)
        return sum(int(d["v"]) for d in docs)

    return total, calls


def test_a_list_of_the_same_artifacts_is_a_hit_whatever_holds_them(counted):
    total, calls = counted
    docs = [Rec(v=i) for i in range(5)]
    assert total(docs) == 10
    assert total(list(docs)) == 10 and total(tuple(docs)) == 10
    assert total(iter(docs)) == 10  # any iterable of them
    assert len(calls) == 1


def test_equal_artifacts_that_are_other_objects_are_a_miss(counted):
    total, calls = counted
    docs = [Rec(v=i) for i in range(5)]
    total(docs)
    twins = [Rec(v=i) for i in range(5)]
    assert twins == docs  # equal by content (Mapping equality) ...
    assert total(twins) == 10
    assert len(calls) == 2  # ... but other artifacts: asked again
    assert (
        total(docs[::-1]) == 10 and len(calls) == 3
    )  # the same artifacts in another order
    assert total(docs[:4]) == 6 and len(calls) == 4
    assert (
        total([docs[0], Rec(v=9), docs[2], docs[3], docs[4]]) == 18
    )  # one in the middle differs
    assert total([]) == 0 and total(()) == 0
    assert len(calls) == 6


def test_the_caller_changing_its_list_later_changes_no_kept_answer(counted):
    total, calls = counted
    docs = [Rec(v=i) for i in range(5)]
    assert total(docs) == 10
    docs.append(Rec(v=100))
    assert total(docs) == 110  # a new list of artifacts
    assert total(docs[:5]) == 10 and len(calls) == 2  # the first five: still kept


def test_the_least_recently_asked_list_goes_first(counted):
    """Pages alternate between the whole set and one host's runs: the whole set's answer stays."""
    total, calls = counted
    whole = [Rec(v=i) for i in range(50)]
    hosts = [whole[i::10] for i in range(10)]
    for part in hosts:
        total(whole)
        total(part)
    assert sum(1 for c in calls if len(c) == len(whole)) == 1
    assert len(calls) == 1 + len(hosts)
    for part in hosts[
        -(memo._SLOTS - 1) :
    ]:  # the last ones asked: kept with the whole set
        total(part)
    assert len(calls) == 1 + len(hosts)
    total(hosts[0])  # dropped long ago
    assert len(calls) == 2 + len(hosts)
    total.cache_clear()
    total(whole)
    assert len(calls) == 3 + len(hosts)
