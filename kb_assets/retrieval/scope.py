"""Which documents a search reads: the request's metadata filters, and the organisation, period and kind
a question names (``documents.metadata``, read from content at ingest: ``kb_assets.structure.metadata``).

Filters (``SearchRequest.filters``; the API's and MCP tool's ``period``, ``kind``, ``organisation``) keep
the documents whose metadata matches: ``period`` "FY2022" / "2022" / "Q2 FY2023" / "Q2 2023" / a date
("2023-05-18"), ``kind`` a kind ("annual report") or a form ("10-K"), ``organisation`` a part of its
name, case-insensitive. No document matches: nothing is searched. A period that names no year, quarter or
date is refused (``check_period``: 422 in the API and the MCP tool, an error naming ``--period`` in the CLI).

Cues: a question that names an organisation of the knowledge bases ("Apple's", "AMD": the initials of
Advanced Micro Devices), a fiscal year ("FY2022", "fiscal 2022", "in 2022"), a quarter ("Q2", "second
quarter") or a kind ("10-Q", "annual report", "earnings release") is searched in the documents that match
them all; a document whose metadata does not say (no organisation or period, a generic kind) stays in.
Two years named ("from 2021 to 2022"): the later, whose report holds both. A year whose own
report is not there: the next report of the organisation within two years (it repeats the year as
comparatives). A year without a quarter: the full-year documents of that year first. Where no document
matches, the cue is dropped (kind first, then period, then organisation): a cue never empties a search.

The knowledge bases' metadata is read once per ``TTL_S`` per searcher (one small query).
"""

from __future__ import annotations

import re
import threading
import time
import weakref
from typing import Any

TTL_S = 10.0
KIND_WORDS = {
    "annual report": r"\b10-?k\b|\bannual reports?\b",
    "quarterly report": r"\b10-?q\b|\bquarterly reports?\b",
    "current report": r"\b8-?k\b|\bcurrent reports?\b",
    "earnings release": r"\bearnings (?:release|press release)\b|\bpress release\b",
}
FORMS = {"10-k": "annual report", "10-q": "quarterly report", "8-k": "current report", "20-f": "annual report"}
ORDINALS = {"first": 1, "second": 2, "third": 3, "fourth": 4}
# words of organisation names that name no one on their own
LEGAL = {"inc", "incorporated", "corporation", "corp", "company", "co", "ltd", "limited", "plc", "llc", "the", "com"}
COMMON = {"general", "american", "united", "international", "national", "first", "new", "group", "holdings", "stores"}

_CACHE: weakref.WeakKeyDictionary[Any, dict[tuple, tuple[float, dict[str, dict]]]] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def unknown_knowledge_bases(unknown: list[str], readable: list[str]) -> str:
    """The refusal of knowledge-base names that hold no document or that the caller may not read (the same
    words for both, so a name outside a key's scope is not told from one that does not exist)."""
    return f"no knowledge base {', '.join(map(repr, unknown))}: known ones are {', '.join(readable) or 'none yet'}"


def known_metadata(searcher: Any, knowledge_base_ids: list[str] | None) -> dict[str, dict]:
    """{document_id: metadata} of the published documents of these knowledge bases (cached per searcher)."""
    key = tuple(sorted(knowledge_base_ids)) if knowledge_base_ids else ()
    with _LOCK:
        cached = _CACHE.setdefault(searcher, {}).get(key)
    if cached and time.monotonic() - cached[0] < TTL_S:
        return cached[1]
    try:
        found = searcher.catalog.document_metadata(knowledge_base_ids)
    except Exception:  # no metadata (Postgres unavailable): every document is searched, none is described
        return {}
    with _LOCK:
        _CACHE[searcher][key] = (time.monotonic(), found)
    return found


def matches_filters(metadata: dict, filters: dict[str, str | None]) -> bool:
    """A document's metadata against the request's ``period``, ``kind`` and ``organisation``."""
    organisation, kind, period = (filters.get(name) for name in ("organisation", "kind", "period"))
    if organisation and organisation.casefold() not in (metadata.get("organisation") or "").casefold():
        return False
    if kind:
        wanted = FORMS.get(kind.strip().lower(), kind.strip().lower())
        if wanted not in ((metadata.get("kind") or "").lower(), (metadata.get("form") or "").lower()):
            return False
    return period_matches(metadata.get("period") or {}, period) if period else True


SHOWN_CONFIDENCE = 0.5  # a field read with less (a handbook's "founded in 2019" as its period) is not shown


def describe(metadata: dict | None) -> str:
    """A document's organisation, period and kind, those read with confidence, as results show them: "ACME
    Corp · FY2023 · annual report" ("" when none is)."""
    metadata = metadata or {}
    sure = metadata.get("confidence") or {}
    fields = {
        "organisation": metadata.get("organisation"),
        "period": (metadata.get("period") or {}).get("label"),
        "kind": metadata.get("kind"),
    }
    return " · ".join(str(v) for k, v in fields.items() if v and sure.get(k, 1.0) >= SHOWN_CONFIDENCE)


def check_period(asked: str) -> str:
    """A ``period`` filter must name a fiscal year, a quarter or a date (else it could match nothing)."""
    if re.fullmatch(r"\s*\d{4}-\d{2}-\d{2}\s*", asked) or _years(asked) or _quarters(asked):
        return asked
    raise ValueError(f'{asked!r} names no year, quarter or date: give "FY2022", "2022", "Q2 FY2023" or "2023-05-18"')


def period_matches(period: dict, asked: str) -> bool:
    asked = asked.strip()
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", asked):
        return period.get("end") == asked
    years = _years(asked)
    quarters = _quarters(asked)
    if years and period.get("fiscal_year") not in years:
        return False
    if quarters:
        return period.get("fiscal_quarter") in quarters
    return bool(years) and period.get("fiscal_quarter") is None


def scope(searcher: Any, query: str, knowledge_base_ids: list[str] | None, filters: dict | None) -> list[str] | None:
    """The documents to search (None: every one): those the filters keep, narrowed by the question's cues."""
    if not filters and not _may_name_something(query):
        return None
    known = known_metadata(searcher, knowledge_base_ids)
    if filters and any(filters.values()):
        known = {d: m for d, m in known.items() if matches_filters(m, filters)}
        narrowed = cued(query, known)
        return sorted(narrowed if narrowed is not None else known)
    narrowed = cued(query, known)
    return None if narrowed is None else sorted(narrowed)


def _may_name_something(query: str) -> bool:
    return bool(re.search(r"[A-Z]|\d", query))


def cued(query: str, known: dict[str, dict]) -> set[str] | None:
    """The documents that match what the question names (None: it names nothing they tell apart)."""
    words = set(re.findall(r"[a-z0-9]+", query.lower().replace("'s", " ")))
    capitals = set(re.findall(r"\b[A-Z]{2,6}\b", query))
    organisations = {
        d for d, m in known.items() if m.get("organisation") and _named(m["organisation"], words, capitals)
    }
    years, quarters = _years(query), _quarters(query)
    kinds = {kind for kind, pattern in KIND_WORDS.items() if re.search(pattern, query, re.I)}
    ended = _ended(query, known)  # "the quarter ended July 1, 2023": the documents whose period ends then
    if ended:
        quarters |= {q for d in ended if (q := (known[d].get("period") or {}).get("fiscal_quarter"))}
        years = {y for d in ended if (y := (known[d].get("period") or {}).get("fiscal_year"))} or years
    if not quarters and kinds == {"quarterly report"}:
        quarters = {1, 2, 3, 4}  # a quarterly report without its quarter: any quarter of the year, not the year
    if not organisations and not years and not kinds:
        return None
    # a document whose metadata does not say (no organisation, no period, a generic kind) is not one the
    # question rules out: a handbook's notes stay searchable when a question names the company or a year
    unsaid = {
        field: {d for d, m in known.items() if not (m.get(field) if field != "kind" else m.get("kind") in KIND_WORDS)}
        for field in ("organisation", "period", "kind")
    }
    pool = organisations | unsaid["organisation"] if organisations else set(known)
    by_period = _by_period(pool, known, years, quarters)
    by_period = by_period | (pool & unsaid["period"]) if by_period else by_period
    by_kind = {d for d in by_period if (known[d].get("kind") or "") in kinds} if kinds else by_period
    by_kind = by_kind | (by_period & unsaid["kind"]) if by_kind else by_kind
    for candidate in (by_kind, by_period, organisations | unsaid["organisation"] if organisations else set()):
        if candidate:
            return candidate if candidate != set(known) else None
    return None


def _by_period(pool: set[str], known: dict[str, dict], years: set[int], quarters: set[int]) -> set[str]:
    if not years:
        return {d for d in pool if not quarters or (known[d].get("period") or {}).get("fiscal_quarter") in quarters}
    target = max(years)

    def period(d: str) -> dict:
        return known[d].get("period") or {}

    for year in (target, target + 1, target + 2):  # a later report repeats the year as comparatives
        same = {d for d in pool if period(d).get("fiscal_year") == year}
        if quarters:
            quarterly = {d for d in same if period(d).get("fiscal_quarter") in quarters}
            same = quarterly or (
                {d for d in same if period(d).get("fiscal_quarter") is None} if year > target else set()
            )
        else:
            same = {d for d in same if period(d).get("fiscal_quarter") is None} or same
        if same:
            return same
    return set()


def _named(organisation: str, words: set[str], capitals: set[str]) -> bool:
    """The question names the organisation: its first two name words, its one distinctive name word, or
    its initials ("AMD")."""
    name = [w for w in re.findall(r"[a-z0-9]+", organisation.lower()) if w not in LEGAL]
    if not name:
        return False
    if len(name) >= 2 and name[0] in words and name[1] in words:
        return True
    if name[0] in words and name[0] not in COMMON and len(name[0]) > 2:
        return True
    return len(name) >= 2 and "".join(w[0] for w in name).upper() in capitals


def _years(text: str) -> set[int]:
    years = {int(y) for y in re.findall(r"(?<![\d.,$])((?:19|20)\d\d)(?![\d,.]\d)", text)}
    years |= {2000 + int(y) for y in re.findall(r"\bFY\s?'?(\d\d)\b", text, re.I)}
    return {y for y in years if 1990 <= y <= 2100}


def _quarters(text: str) -> set[int]:
    found = {
        int(q) for q in re.findall(r"\bQ([1-4])(?:\b|'?\d\d\b)|\b([1-4])Q(?:'?\d\d)?\b", text, re.I) for q in q if q
    }
    found |= {
        ORDINALS[w.lower()] for w in re.findall(r"\b(first|second|third|fourth)[ -](?:fiscal[ -])?quarter", text, re.I)
    }
    return found


DATE = re.compile(
    r"\b(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+(\d{1,2}),?\s+((?:19|20)\d\d)\b", re.I
)
MONTHS = {
    m: n for n, m in enumerate(("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), 1)
}


def _ended(query: str, known: dict[str, dict]) -> set[str]:
    """The documents whose period ends on a date the question names ("three months ended July 1, 2023")."""
    dates = {f"{y}-{MONTHS[m[:3].lower()]:02d}-{int(d):02d}" for m, d, y in DATE.findall(query)}
    return {d for d, m in known.items() if (m.get("period") or {}).get("end") in dates} if dates else set()
