"""Company search: fuzzy relevance over the catalog (spec: POST /company/search).

Relevance comes in tiers a user agrees with: the exact name, then names that
start with the query, then names holding every query word (the last one may be
a word being typed), then typo-tolerant matches. Within a tier the shorter name
wins, then the name, then the id, so the order is the same on every run.

The index keeps every tier cheap on a 100,000-company catalog: exact names in a
dict, prefixes by bisection over the sorted names, words in postings lists, and
typos by rapidfuzz over the word vocabulary (tens of thousands of words) rather
than over every name.
"""

from __future__ import annotations

import functools
import heapq
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from itertools import chain

from rapidfuzz import fuzz, process
from rapidfuzz.utils import default_process

from ...errors import ProductAndProducts, UnknownProduct, field_detail
from ..shapes import UNSET, Command, Maybe, Texts, choice, given, of, text
from .companies import (DISABLED, SCOPES, Company, CompanyDirectory, Tag,
                        ManualDepositRule, effective_tags, set_attributes)

DEFAULT_LIMIT = 20
MAX_LIMIT = 100

# Typo tolerance: a query word matches a catalog word this similar (0..100).
WORD_SIMILARITY = 75
# A fuzzy match must also resemble the whole name this much.
NAME_SIMILARITY = 60
# How many similar catalog words one query word may expand to.
SIMILAR_WORDS = 12
# A word being typed expands to at most this many catalog words.
PREFIX_WORDS = 400
# The last resort, a query compared with every whole name, keeps matches this similar.
WHOLE_NAME_SIMILARITY = 75
# A word in more names than this brings no fuzzy candidates by itself.
COMMON_WORD = 1000
# WRatio costs ~2 us a name: the fuzzy tier scores at most this many.
MAX_FUZZY_CANDIDATES = 400
FUZZY_CACHE = 512  # queries whose fuzzy matches an index keeps (per index; least recent out)

PRODUCT_AND_PRODUCTS = "Send either `product` or `products`, not both."
UNKNOWN_PRODUCT = "Unknown product {product!r}: this service's products are {known}."


class SearchRequest(Command, kw_only=True):
    # A company search: its text, filters and limit (POST /company/search's body).

    query: of(str, "Fuzzy match on company names. Required also with franchiseParent.",
              min_length=1, max_length=200, pattern=r"\S")
    scopes: Maybe[of(list[choice(*SCOPES)], unique=True)] = UNSET
    product: Maybe[text("Only companies supporting this product. Not with `products`.")] = UNSET
    products: Maybe[of(Texts, "Only companies supporting all of these. Not with `product`.",
                       min_length=1, max_length=50)] = UNSET
    tags: Maybe[of(list[Tag], "Only companies having every listed tag (derived ones included).",
                   unique=True)] = UNSET
    excluded_tags: Maybe[of(list[Tag], "Exclude by stored tags only; never removes "
                            "manual-deposits.", unique=True)] = UNSET
    franchise_parent: Maybe[text("Only the franchise children of this parent company.")] = UNSET
    limit: of(int, ge=1, le=MAX_LIMIT) = DEFAULT_LIMIT


_DROPPED = str.maketrans("", "", "'\u2019&.")


def normalize(text: str) -> str:
    """Lower case, words only: "McDonald's" -> "mcdonalds", "AT&T" -> "att", "U.S." -> "us"."""
    # Words joined by one space: a comma or " & " dropped must not leave two.
    return " ".join(default_process(text.translate(_DROPPED)).split())


class SearchIndex:
    """Read-only index over a Catalog; built once at start."""

    def __init__(self, companies: Iterable[Company]) -> None:
        normalized = [(normalize(c.name), c) for c in companies]
        normalized.sort(key=lambda pair: (len(pair[0]), pair[0], pair[1].id))
        # Ordinal i is the i-th company in tie-break order: sorting ordinals sorts by it.
        self.companies = [c for _, c in normalized]
        self.names = [n for n, _ in normalized]
        self._exact: dict[str, list[int]] = {}
        postings: dict[str, list[int]] = {}
        for ordinal, name in enumerate(self.names):
            self._exact.setdefault(name, []).append(ordinal)
            for word in set(name.split()):
                postings.setdefault(word, []).append(ordinal)
        by_name = sorted(range(len(self.names)), key=self.names.__getitem__)
        self._sorted_names = [self.names[i] for i in by_name]
        self._sorted_ordinals = by_name
        self._postings = postings
        self._vocabulary = sorted(postings)
        self._ordinal_by_id = {c.id: i for i, c in enumerate(self.companies)}
        # Every word under each of its one-letter deletions: a query word finds the words
        # one edit away (delete, insert, replace, swap) by lookups, not by a scan.
        deletions: dict[str, list[str]] = {}
        for word in self._vocabulary:
            if len(word) >= 3:
                for variant in _deletion_variants(word):
                    deletions.setdefault(variant, []).append(word)
        self._deletions = deletions
        # The fuzzy tier is the one costly step and the same queries come back (a test
        # suite searches what it searched last run): its answers, per (query, scope), are
        # kept for the latest FUZZY_CACHE queries. The index never changes, so they hold.
        self._keep_answers()

    def _keep_answers(self) -> None:
        self._fuzzy = functools.lru_cache(maxsize=FUZZY_CACHE)(self._fuzzy_matches)

    def __getstate__(self) -> dict:  # pickled by the start-up cache (loadcache): no answers
        return {name: value for name, value in self.__dict__.items() if name != "_fuzzy"}

    def __setstate__(self, state: dict) -> None:
        set_attributes(self, state)
        self._keep_answers()

    def ordinals_of(self, companies: Iterable[Company]) -> frozenset[int]:
        return frozenset(self._ordinal_by_id[c.id] for c in companies)

    def ranked(self, query: str, within: frozenset[int] | None = None,
               skip: Callable[[str], bool] | None = None) -> Iterator[tuple[tuple, Company]]:
        """(rank key, company) of every match, most relevant first, each once.

        The rank key (tier, -score, name length, name, id) orders results of two
        indexes the same way, so a tenant's own companies merge with the shared ones.
        """
        name = normalize(query)
        words = name.split()
        if not words:
            return
        seen: set[int] = set()
        tiers = (
            lambda: [(o, 0) for o in self._exact.get(name, [])],
            lambda: [(o, 0) for o in self._prefix_matches(name)],
            lambda: [(o, 0) for o in self._word_matches(words)],
            lambda: self._fuzzy(name, within, not seen),
        )
        for tier, matches in enumerate(tiers):
            for ordinal, score in matches():
                if ordinal in seen or (within is not None and ordinal not in within):
                    continue
                seen.add(ordinal)
                company = self.companies[ordinal]
                if skip is not None and skip(company.id):
                    continue
                key = (tier, -score, len(self.names[ordinal]), self.names[ordinal], company.id)
                yield key, company

    def _prefix_matches(self, name: str) -> list[int]:
        low = bisect_left(self._sorted_names, name)
        high = bisect_left(self._sorted_names, name + "\uffff", low)
        return sorted(self._sorted_ordinals[low:high])

    def _words_starting(self, prefix: str) -> list[str]:
        low = bisect_left(self._vocabulary, prefix)
        high = bisect_left(self._vocabulary, prefix + "\uffff", low)
        return self._vocabulary[low:min(high, low + PREFIX_WORDS)]

    def _word_matches(self, words: list[str]) -> list[int]:
        # Loops on purpose (every search runs this): written with any(), a comprehension and
        # set(chain(...)) it cost each search about 7,000 instructions more (callgrind).
        *whole, typing = words
        sets: list[set[int]] = []
        for word in whole:
            if word not in self._postings:
                return []
            sets.append(set(self._postings[word]))
        typed: set[int] = set()
        for word in self._words_starting(typing):
            typed.update(self._postings.get(word, ()))
        sets.append(typed)
        sets.sort(key=len)
        matches = sets[0].intersection(*sets[1:])
        return sorted(matches)

    def _similar_words(self, word: str) -> list[str]:
        if len(word) < 3:
            return [word] if word in self._postings else []
        found: set[str] = set()
        for variant in _deletion_variants(word):
            found.update(self._deletions.get(variant, ()))
        scored = sorted(((fuzz.ratio(word, w), w) for w in found), reverse=True)
        return [w for score, w in scored if score >= WORD_SIMILARITY][:SIMILAR_WORDS]

    def _fuzzy_matches(self, name: str, within: frozenset[int] | None,
                       scan_names: bool = True) -> tuple[tuple[int, int], ...]:
        words = name.split()
        if within is not None and len(within) <= 2000:
            # A small scope (one franchise network): compare every name in it.
            candidates: Iterable[int] = within
        else:
            per_word = []
            for word in words:
                ordinals: set[int] = set()
                for similar in self._similar_words(word):
                    ordinals.update(self._postings[similar])
                if ordinals:
                    per_word.append(ordinals)
            per_word.sort(key=len)
            # Common words ("and", "inc") bring no candidates by themselves; if every
            # word is common, take the names holding the two rarest.
            rare = [s for s in per_word if len(s) <= COMMON_WORD]
            if not rare and per_word:
                rare = [per_word[0].intersection(*per_word[1:2])]
            if not rare:
                if not scan_names:
                    return ()
                # Nothing found yet and no word resembles a catalog word (words run
                # together, "homedepot"): compare the whole query with every name.
                found = process.extract(name, self.names, scorer=fuzz.ratio,
                                        score_cutoff=WHOLE_NAME_SIMILARITY, limit=MAX_LIMIT)
                return tuple(sorted((ordinal, round(score)) for _, score, ordinal in found))
            hits = Counter(chain.from_iterable(rare))
            candidates = hits
            if len(hits) > MAX_FUZZY_CANDIDATES:
                # Names holding the most query words first, then the shortest names.
                candidates = sorted(hits, key=lambda o: (-hits[o], o))[:MAX_FUZZY_CANDIDATES]
        scored = []
        for ordinal in candidates:
            score = round(fuzz.WRatio(name, self.names[ordinal]))
            if score >= NAME_SIMILARITY:
                scored.append((-score, ordinal))
        scored.sort()
        return tuple((ordinal, -negative) for negative, ordinal in scored)


def _deletion_variants(word: str) -> set[str]:
    return {word[:i] + word[i + 1:] for i in range(len(word))} | {word}


def check_products(known: Iterable[str], asked: dict[str, Iterable[str]],
                   location: str = "body") -> None:
    """Every product a filter names is one of the service's (the surface: `product` is an
    enum); else 400 unknown-product naming each field at fault. `asked`: JSON path ->
    the products given there."""
    known = tuple(known)
    details = [field_detail(path, UNKNOWN_PRODUCT.format(product=product, known=", ".join(known)),
                            location=location)
               for path, products in asked.items() for product in products
               if product not in known]
    if details:
        raise UnknownProduct(details[0]["message"], details=details)


def search_companies(companies: CompanyDirectory, rule: ManualDepositRule,
                     query: SearchRequest,
                     known_products: Iterable[str] | None = None) -> list[Company]:
    """POST /company/search: rules 1-6 of the spec, most relevant first; the products asked
    for are checked against `known_products` (the service's) when given."""
    if query.product is not UNSET and query.products is not UNSET:
        raise ProductAndProducts(PRODUCT_AND_PRODUCTS,
                                 details=[field_detail("$.product", PRODUCT_AND_PRODUCTS),
                                          field_detail("$.products", PRODUCT_AND_PRODUCTS)])
    products = query.products or ()  # UNSET is falsy, as an empty list (no filter) is
    if known_products is not None and (query.product or products):
        check_products(known_products, {
            "$.product": [query.product] if query.product else (),
            **{f"$.products[{n}]": [p] for n, p in enumerate(products)}})
    base_within = overlay_within = None
    parent_id = given(query.franchise_parent)
    if parent_id is not None:
        children = companies.children_of(companies.require(parent_id, "$.franchiseParent").id)
        base_within = companies.index.ordinals_of(c for c in children if c.id not in companies.changed)
        overlay_within = frozenset()  # resolved below against the overlay's own ordinals
    ranked = companies.index.ranked(query.query, base_within, skip=companies.changed.__contains__)
    if companies.changed:
        overlay = companies.overlay_index()
        if parent_id is not None:
            overlay_within = overlay.ordinals_of(c for c in children if c.id in companies.changed)
        ranked = heapq.merge(ranked, overlay.ranked(query.query, overlay_within),
                             key=lambda pair: pair[0])

    keep = company_filter(rule, scopes=query.scopes or (),
                          products=(query.product,) if query.product else products,
                          tags=query.tags or (), excluded_tags=query.excluded_tags or ())
    # A loop, not islice(filter(map(...))): measured by callgrind, that chain of iterators
    # cost each search about 3,500 instructions more.
    results: list[Company] = []
    for _, company in ranked:
        if keep(company):
            results.append(company)
            if len(results) == query.limit:
                break
    return results


def company_filter(rule: ManualDepositRule, *, scopes: Iterable[str] = (),
                   products: Iterable[str] = (), tags: Iterable[str] = (),
                   excluded_tags: Iterable[str] = (),
                   include_disabled: bool = False) -> Callable[[Company], bool]:
    """The filters shared by search and the company list.

    `tags` look at the effective tags (so `manual-deposits` can be asked for);
    `excludedTags` look at stored tags only, so they never remove
    `manual-deposits` (spec: search request, `excludedTags`).
    """
    scopes, products = frozenset(scopes), list(products)
    tags, excluded = list(tags), frozenset(excluded_tags)

    def keep(company: Company) -> bool:
        if company.status == DISABLED and not include_disabled:
            return False
        if scopes and not scopes & company.scopes:
            return False
        if products and not company.supports_products(products):
            return False
        if excluded and excluded.intersection(company.tags):
            return False
        if tags:
            present = effective_tags(company, rule)
            if not all(tag in present for tag in tags):
                return False
        return True

    return keep
