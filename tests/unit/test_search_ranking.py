"""Search relevance over a handful of hand-made companies (domain/search.py; spec: POST
/company/search). Tiers: exact name, then prefix, then every word, then typos; within a
tier the shorter name, then the name, then the id."""

from __future__ import annotations

import pytest

from payroll_sandbox.domain.companies.companies import Company
from payroll_sandbox.domain.companies.search import SearchIndex, normalize

EXACT, PREFIX, EVERY_WORD, TYPO = 0, 1, 2, 3


def company(company_id: str, name: str) -> Company:
    return Company(id=company_id, name=name, status="operational", tags=(), franchise_parent=None,
                   branding={}, connector_id=f"conn-{company_id}", available_products=(),
                   capabilities={}, scopes=frozenset())


CATALOG = [company(f"c{number:02d}", name) for number, name in enumerate([
    "The Home Depot", "Home Depot Supply", "Hone Depot", "Home Depot", "Walmart",
    "Depot Home Goods", "Homebase", "Home Depots Inc", "McDonald's", "AT&T", "U.S. Bank",
])]


@pytest.fixture(scope="module")
def index() -> SearchIndex:
    return SearchIndex(CATALOG)


def ranked(index: SearchIndex, query: str, **options) -> list[tuple[int, str]]:
    return [(key[0], found.name) for key, found in index.ranked(query, **options)]


def test_search_ranking_exact_then_prefix_then_every_word_then_typo(index):
    assert ranked(index, "home depot") == [
        (EXACT, "Home Depot"),
        (PREFIX, "Home Depots Inc"), (PREFIX, "Home Depot Supply"),
        (EVERY_WORD, "The Home Depot"), (EVERY_WORD, "Depot Home Goods"),
        (TYPO, "Hone Depot"),
    ]


def test_search_ranking_query_case_and_outer_spaces_do_not_matter(index):
    assert ranked(index, "  HOME Depot ") == ranked(index, "home depot")


def test_search_ranking_prefix_is_of_the_whole_name_not_of_a_word(index):
    names = ranked(index, "home")
    assert names[:4] == [(PREFIX, "Homebase"), (PREFIX, "Home Depot"), (PREFIX, "Home Depots Inc"),
                         (PREFIX, "Home Depot Supply")]
    assert (EVERY_WORD, "The Home Depot") in names


def test_search_ranking_every_word_in_any_order_with_the_last_one_still_being_typed(index):
    assert ranked(index, "depot hom")[:3] == [
        (PREFIX, "Depot Home Goods"), (EVERY_WORD, "Home Depot"), (EVERY_WORD, "The Home Depot")]


def test_search_ranking_only_the_last_word_may_be_unfinished(index):
    assert (EVERY_WORD, "Home Depots Inc") in ranked(index, "depots home")
    assert (EVERY_WORD, "Home Depots Inc") in ranked(index, "inc depot")  # typing "depot(s)"
    # A word before the last is finished: "depot" is not "depots".
    assert (EVERY_WORD, "Home Depots Inc") not in ranked(index, "depot home")


def test_search_ranking_typo_finds_the_word_one_letter_off(index):
    assert ranked(index, "walmrt") == [(TYPO, "Walmart")]


def test_search_ranking_words_run_together_fall_back_to_whole_names(index):
    assert ranked(index, "homedepot")[0] == (TYPO, "Home Depot")


def test_search_ranking_typo_tier_orders_by_similarity_before_length(index):
    keys = [key for key, _ in index.ranked("homedepot")]
    assert [key[0] for key in keys] == [TYPO] * len(keys)
    scores = [-key[1] for key in keys]
    assert scores == sorted(scores, reverse=True) and scores[0] > scores[-1]


def test_search_ranking_unrelated_query_matches_nothing(index):
    assert ranked(index, "zzqx") == []


@pytest.mark.parametrize("query", ["", "   ", "&.'"])
def test_search_ranking_query_without_words_matches_nothing(index, query):
    assert ranked(index, query) == []


@pytest.mark.parametrize(("query", "name"), [
    ("mcdonalds", "McDonald's"), ("McDonald\u2019s", "McDonald's"),
    ("att", "AT&T"), ("at&t", "AT&T"), ("us bank", "U.S. Bank"),
])
def test_search_ranking_punctuation_is_dropped_on_both_sides(index, query, name):
    assert ranked(index, query)[0] == (EXACT, name)


@pytest.mark.parametrize(("text", "normalized"), [
    ("McDonald's", "mcdonalds"), ("AT&T", "att"), ("U.S. Bank", "us bank"),
    ("Ben\u2019s", "bens"), ("Coca-Cola", "coca cola"), ("  Walmart  ", "walmart"),
])
def test_normalize_lowercases_and_drops_punctuation(text, normalized):
    assert normalize(text) == normalized


def test_search_ranking_shorter_name_wins_within_a_tier_whatever_the_catalog_order():
    index = SearchIndex([company("a1", "Acme Corporation"), company("a2", "Acme Co"),
                         company("a3", "Acme Corp")])
    assert ranked(index, "acme") == [(PREFIX, "Acme Co"), (PREFIX, "Acme Corp"),
                                     (PREFIX, "Acme Corporation")]


def test_search_ranking_same_length_falls_back_to_the_name():
    index = SearchIndex([company("b1", "Acme Zed"), company("b2", "Acme Bee"),
                         company("b3", "Acme Ant")])
    assert ranked(index, "acme") == [(PREFIX, "Acme Ant"), (PREFIX, "Acme Bee"), (PREFIX, "Acme Zed")]


def test_search_ranking_same_name_falls_back_to_the_id():
    index = SearchIndex([company("id-3", "Acme"), company("id-1", "ACME"), company("id-2", "acme")])
    assert [(key[0], found.id) for key, found in index.ranked("acme")] == [
        (EXACT, "id-1"), (EXACT, "id-2"), (EXACT, "id-3")]


def test_search_ranking_yields_each_company_once_with_keys_in_order(index):
    keys = [key for key, _ in index.ranked("home depot")]
    ids = [key[-1] for key in keys]
    assert len(ids) == len(set(ids))
    assert keys == sorted(keys)


def test_search_ranking_within_limits_the_candidates(index):
    allowed = index.ordinals_of(c for c in CATALOG if c.name in ("The Home Depot", "Hone Depot"))
    assert ranked(index, "home depot", within=allowed) == [
        (EVERY_WORD, "The Home Depot"), (TYPO, "Hone Depot")]


def test_search_ranking_skip_drops_a_company_from_every_tier(index):
    # A company skipped here (changed in a tenant's overlay) must not reappear as a typo match.
    skipped = next(c.id for c in CATALOG if c.name == "Home Depot")
    names = ranked(index, "home depot", skip=skipped.__eq__)
    assert "Home Depot" not in [name for _, name in names]
    assert names[0] == (PREFIX, "Home Depots Inc")


def test_search_ranking_name_with_a_comma_is_a_prefix_of_the_words_typed_without_it():
    index = SearchIndex([company("g1", "Griffin, Griffith and Perez"),
                         company("g2", "Griffith-Griffin")])
    assert ranked(index, "griffin griffith")[0] == (PREFIX, "Griffin, Griffith and Perez")


def test_search_ranking_two_spaces_between_query_words_still_find_the_exact_name(index):
    assert ranked(index, "home  depot")[0] == (EXACT, "Home Depot")


def test_search_fuzzy_answers_are_kept_for_a_bounded_number_of_queries():
    from payroll_sandbox.domain.companies.search import FUZZY_CACHE

    index = SearchIndex(CATALOG)
    first = ranked(index, "hoem depto")
    assert any(tier == TYPO for tier, _ in first)
    assert ranked(index, "hoem depto") == first  # answered again from what was kept
    assert index._fuzzy.cache_info().hits >= 1
    for number in range(FUZZY_CACHE + 50):
        list(index.ranked(f"zzq{number}"))
    assert index._fuzzy.cache_info().currsize == FUZZY_CACHE
    assert ranked(index, "hoem depto") == first  # evicted, then worked out the same way
