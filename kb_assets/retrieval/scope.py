"""Which documents a search reads: the request's metadata filters, and the organisation, period and kind
a question names (``documents.metadata``, read from content at ingest: ``kb_assets.structure.metadata``).

Filters (``SearchRequest.filters``; the API's and MCP tool's ``period``, ``kind``, ``organisation``) keep
the documents whose metadata matches: ``period`` "FY2022" / "2022" / "Q2 FY2023" / "Q2 2023" / a date
("2023-05-18"), ``kind`` a kind ("annual report") or a form ("10-K"), ``organisation`` a part of its
name, case-insensitive. No document matches: nothing is searched. A period that names no year, quarter or
date is refused (``check_period``: 422 in the API and the MCP tool, an error naming ``--period`` in the CLI).

Cues: a question that names an organisation of the knowledge bases ("Apple's", "AMD": the initials of
Advanced Micro Devices; since issue 53 also its ticker "NKE", a short name it defines, "Costco", a former name,
"Wal-Mart", and "J&J", "JnJ": ``issuers.py``, where documents that share a commission file number, a ticker or a
name are one issuer), a fiscal year ("FY2022", "fiscal 2022", "in 2022", "FY22", "FYE22", "2Q24", "Q3'23",
"1H23", "YE21", "5/31/22"), a quarter ("Q2", "second quarter"; a first half is the second quarter's report) or a
kind ("10-Q", "annual report", "earnings release") is searched in the documents that match them all; a
capitalised token that is also finance shorthand ("ETR", "GM": ``structure/vocabulary.py``) is taken for a ticker
only when nothing else names an issuer; a document whose metadata does not say (no organisation or period, a
generic kind) stays in.
Two years named ("from 2021 to 2022"): the later, whose report holds both. A year whose own
report is not there: the next report of the organisation within two years (it repeats the year as
comparatives). A year without a quarter: the full-year documents of that year first. Where no document
matches, the cue is dropped (kind first, then period, then organisation): a cue never empties a search.
Where the question names an issuer and a period or kind it has no document of, the response carries a warning
saying which filing was searched instead (``resolve(...).notes``). ``resolve(...).meant`` orders the filings the
question means (the period's own report first, then a release, then the latest): the scope step measured alone
(``benchmarks/filings.py``, ``scope@1``).

The knowledge bases' metadata is read once per ``TTL_S`` per searcher (one small query).
"""

from __future__ import annotations

import re
import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from kb_assets.retrieval.issuers import named_organisations

if TYPE_CHECKING:
    from kb_assets.structure.metadata import DocumentMetadata

TTL_S = 10.0
KIND_WORDS = {
    "annual report": r"\b10-?k\b|\bannual reports?\b",
    "quarterly report": r"\b10-?q\b|\bquarterly reports?\b",
    "current report": r"\b8-?k\b|\bcurrent reports?\b",
    "earnings release": r"\bearnings (?:release|press release)\b|\bpress release\b",
}
FORMS = {"10-k": "annual report", "10-q": "quarterly report", "8-k": "current report", "20-f": "annual report"}
ORDINALS = {"first": 1, "second": 2, "third": 3, "fourth": 4}
_CACHE: weakref.WeakKeyDictionary[Any, dict[tuple, tuple[float, dict[str, DocumentMetadata]]]] = (
    weakref.WeakKeyDictionary()
)
_LOCK = threading.Lock()


def unknown_knowledge_bases(unknown: list[str], readable: list[str]) -> str:
    """The refusal of knowledge-base names that hold no document or that the caller may not read (the same
    words for both, so a name outside a key's scope is not told from one that does not exist)."""
    return f"no knowledge base {', '.join(map(repr, unknown))}: known ones are {', '.join(readable) or 'none yet'}"


def known_metadata(searcher: Any, knowledge_base_ids: list[str] | None) -> dict[str, DocumentMetadata]:
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


class Fiscal(NamedTuple):
    """The period a document's metadata names (``DocumentMetadata.period``), each part None where it names none."""

    year: int | None
    quarter: int | None
    end: str | None  # ISO date
    label: str | None


def fiscal(metadata: DocumentMetadata) -> Fiscal:
    """The parts of the period a document's metadata names (all None without one)."""
    period = metadata.get("period")
    if not period:
        return Fiscal(None, None, None, None)
    return Fiscal(period.get("fiscal_year"), period.get("fiscal_quarter"), period.get("end"), period.get("label"))


def matches_filters(metadata: DocumentMetadata, filters: dict[str, str | None]) -> bool:
    """A document's metadata against the request's ``period``, ``kind`` and ``organisation``."""
    organisation, kind, period = (filters.get(name) for name in ("organisation", "kind", "period"))
    if organisation and organisation.casefold() not in (metadata.get("organisation") or "").casefold():
        return False
    if kind:
        wanted = FORMS.get(kind.strip().lower(), kind.strip().lower())
        if wanted not in ((metadata.get("kind") or "").lower(), (metadata.get("form") or "").lower()):
            return False
    return period_matches(fiscal(metadata), period) if period else True


SHOWN_CONFIDENCE = 0.5  # a field read with less (a handbook's "founded in 2019" as its period) is not shown


def describe(metadata: DocumentMetadata | None) -> str:
    """A document's organisation, period and kind, those read with confidence, as results show them: "ACME
    Corp · FY2023 · annual report" ("" when none is)."""
    if not metadata:
        return ""
    sure = metadata.get("confidence") or {}
    fields = {
        "organisation": metadata.get("organisation"),
        "period": fiscal(metadata).label,
        "kind": metadata.get("kind"),
    }
    return " · ".join(str(v) for k, v in fields.items() if v and sure.get(k, 1.0) >= SHOWN_CONFIDENCE)


def check_period(asked: str) -> str:
    """A ``period`` filter must name a fiscal year, a quarter or a date (else it could match nothing)."""
    if re.fullmatch(r"\s*\d{4}-\d{2}-\d{2}\s*", asked) or _years(asked) or _quarters(asked):
        return asked
    raise ValueError(f'{asked!r} names no year, quarter or date: give "FY2022", "2022", "Q2 FY2023" or "2023-05-18"')


def period_matches(period: Fiscal, asked: str) -> bool:
    asked = asked.strip()
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", asked):
        return period.end == asked
    years = _years(asked)
    quarters = _quarters(asked)
    if years and period.year not in years:
        return False
    if quarters:
        return period.quarter in quarters
    return bool(years) and period.quarter is None


def scope(
    searcher: Any,
    query: str,
    knowledge_base_ids: list[str] | None,
    filters: dict[str, str | None] | None,
    warnings: list[str] | None = None,
) -> list[str] | None:
    """The documents to search (None: every one): those the filters keep, narrowed by the question's cues; where
    the question names a filing that is not there, ``warnings`` gets which one is searched instead."""
    if not filters and not _may_name_something(query):
        return None
    known = known_metadata(searcher, knowledge_base_ids)
    filtered = bool(filters and any(filters.values()))
    if filtered:
        known = {d: m for d, m in known.items() if matches_filters(m, filters or {})}
    scoped = resolve(query, known)
    narrowed: set[str] | None = scoped.documents
    if narrowed is None and filtered:
        narrowed = set(known)
    if warnings is not None:
        warnings.extend(scoped.notes)
    return None if narrowed is None else sorted(narrowed)


def _may_name_something(query: str) -> bool:
    return bool(re.search(r"[A-Z]|\d", query))


@dataclass
class Scoped:
    """What a question names, resolved against the documents' metadata."""

    documents: set[str] | None  # the documents searched (None: every one)
    meant: list[str] = field(default_factory=list)  # the filings the question means, best first
    notes: list[str] = field(default_factory=list)  # another filing searched than the one named, and which


def cued(query: str, known: dict[str, DocumentMetadata]) -> set[str] | None:
    """The documents that match what the question names (None: it names nothing they tell apart)."""
    return resolve(query, known).documents


def resolve(query: str, known: dict[str, DocumentMetadata]) -> Scoped:
    """The documents that match what the question names (see the module docstring), the filings it means, best
    first, and a note where another filing than the one it names is searched."""
    organisations = named_organisations(query, known)
    years, quarters = _years(query), _quarters(query)
    kinds = {kind for kind, pattern in KIND_WORDS.items() if re.search(pattern, query, re.I)}
    ended = _ended(query, known)  # "the quarter ended July 1, 2023": the documents whose period ends then
    if ended:
        quarters |= {q for d in ended if (q := fiscal(known[d]).quarter)}
        years = {y for d in ended if (y := fiscal(known[d]).year)} or years
    if not quarters and kinds == {"quarterly report"}:
        quarters = {1, 2, 3, 4}  # a quarterly report without its quarter: any quarter of the year, not the year
    if not organisations and not years and not kinds:
        return Scoped(None)
    # a document whose metadata does not say (no organisation, no period, a generic kind) is not one the
    # question rules out: a handbook's notes stay searchable when a question names the company or a year
    unsaid = {
        field: {d for d, m in known.items() if not (m.get(field) if field != "kind" else m.get("kind") in KIND_WORDS)}
        for field in ("organisation", "period", "kind")
    }
    pool = organisations | unsaid["organisation"] if organisations else set(known)
    if len(years) > 1:  # "as of FY2021, what does it expect to pay in 2024": a year past every report is a forecast's
        latest = max((fiscal(known[d]).year or 0 for d in pool), default=0)
        years = {y for y in years if y <= latest} or years
    by_period, year = _by_period(pool, known, years, quarters)
    by_period = by_period | (pool & unsaid["period"]) if by_period else by_period
    by_kind = {d for d in by_period if (known[d].get("kind") or "") in kinds} if kinds else by_period
    by_kind = by_kind | (by_period & unsaid["kind"]) if by_kind else by_kind
    notes = _notes(query, known, organisations, years, quarters, kinds, year, by_period, by_kind)
    for candidate in (by_kind, by_period, organisations | unsaid["organisation"] if organisations else set()):
        if candidate:
            chosen = candidate if candidate != set(known) else None
            meant = sorted(
                candidate - (unsaid["organisation"] if organisations else set()) or candidate,
                key=lambda d: (_preference(known[d], quarters), d),
            )
            return Scoped(chosen, meant, notes)
    return Scoped(None)


def _preference(metadata: DocumentMetadata, quarters: set[int]) -> tuple:
    """The order of the filings a question means: its period's own report first (a quarter's quarterly report,
    a year's annual report), then a release, then the latest."""
    order = (
        ("quarterly report", "earnings release", "annual report")
        if quarters
        else ("annual report", "earnings release", "quarterly report")
    )
    kind = metadata.get("kind") or ""
    period = fiscal(metadata)
    return (
        order.index(kind) if kind in order else len(order),
        -(period.year or 0),
        -(period.quarter or 5),
        "".join(chr(0x10FFFF - ord(c)) for c in period.end or metadata.get("date") or ""),  # latest first
    )


def _notes(
    query: str,
    known: dict[str, DocumentMetadata],
    organisations: set[str],
    years: set[int],
    quarters: set[int],
    kinds: set[str],
    year: int | None,
    by_period: set[str],
    by_kind: set[str],
) -> list[str]:
    """Where the question names an issuer and a period or kind that none of its documents has: which filing is
    searched instead (a later report that repeats the year, or all of the issuer's documents)."""
    if not organisations or not (years or kinds):
        return []
    names = sorted({name for d in organisations if (name := known[d].get("organisation"))})
    who = " / ".join(names[:2]) or "the issuer named"
    asked = _asked_label(years, quarters, kinds)
    if years and not by_period:
        return [f"scope: no {asked} of {who} here; searched all of its documents"]
    if years and year is not None and year != max(years):
        found = sorted({describe(known[d]) for d in by_kind or by_period})
        return [f"scope: no {asked} of {who} here; searched {'; '.join(found[:3])} instead (it repeats {max(years)})"]
    if kinds and not by_kind:
        return [f"scope: no {asked} of {who} here; searched its other documents of that period"]
    return []


def _asked_label(years: set[int], quarters: set[int], kinds: set[str]) -> str:
    period = (f"Q{'/'.join(map(str, sorted(quarters)))} " if quarters and len(quarters) < 4 else "") + (
        f"FY{max(years)} " if years else ""
    )
    return f"{period}{' or '.join(sorted(kinds)) or 'report'}".strip()


def _by_period(
    pool: set[str], known: dict[str, DocumentMetadata], years: set[int], quarters: set[int]
) -> tuple[set[str], int | None]:
    """The documents of the pool of the period named, and the fiscal year they are of (a later one where the year's
    own report is not there: it repeats the year as comparatives)."""
    if not years:
        return {d for d in pool if not quarters or fiscal(known[d]).quarter in quarters}, None
    target = max(years)
    for year in (target, target + 1, target + 2):  # a later report repeats the year as comparatives
        same = {d for d in pool if fiscal(known[d]).year == year}
        if quarters:
            quarterly = {d for d in same if fiscal(known[d]).quarter in quarters}
            same = quarterly or ({d for d in same if fiscal(known[d]).quarter is None} if year > target else set())
        else:
            same = {d for d in same if fiscal(known[d]).quarter is None} or same
        if same:
            return same, year
    return set(), None


def _years(text: str) -> set[int]:
    """The fiscal years a text names: "2022", "FY2022", "FY22", "FYE23", "fiscal '23", "2Q24", "Q3'23", "1H23",
    "YE21", "5/31/22"."""
    years = {int(y) for y in re.findall(r"(?<![\d.,$/])((?:19|20)\d\d)(?![\d,.]\d)", text)}
    short = r"\bFYE?\s?'?(\d\d)\b|\b(?:YE|CY)\s?'?(\d\d)\b|\bfiscal\s+(?:year\s+)?'(\d\d)\b|\b[1-4]Q\s?'?(\d\d)\b"
    short += r"|\bQ[1-4]\s?['\u2019-](\d\d)\b|\bQ[1-4](\d\d)\b|\b[12]H\s?'?(\d\d)\b|\bH[12]\s?['\u2019-]?(\d\d)\b"
    short += r"|\b\d{1,2}/\d{1,2}/(\d\d)\b|(?<![\w'])['\u2019](\d\d)\b"
    years |= {2000 + int(y) for found in re.findall(short, text, re.I) for y in found if y}
    return {y for y in years if 1990 <= y <= 2100}


def _quarters(text: str) -> set[int]:
    """The quarters a text names: "Q2", "2Q23", "second quarter", "second fiscal quarter"; a first half ("1H23",
    "H1 2023", "first half", "six months ended") is the second quarter's report, nine months the third's."""
    found = {
        int(q) for q in re.findall(r"\bQ([1-4])(?:\b|'?\d\d\b)|\b([1-4])Q(?:'?\d\d)?\b", text, re.I) for q in q if q
    }
    found |= {
        ORDINALS[w.lower()] for w in re.findall(r"\b(first|second|third|fourth)[ -](?:fiscal[ -])?quarter", text, re.I)
    }
    if re.search(r"\b1H\b|\b1H\s?'?\d\d\b|\bH1\b|\bfirst half\b|\bsix months\b|\b6M\b", text, re.I):
        found.add(2)
    if re.search(r"\bnine months\b|\b9M\b", text, re.I):
        found.add(3)
    return found


DATE = re.compile(
    r"\b(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+(\d{1,2}),?\s+((?:19|20)\d\d)\b", re.I
)
MONTHS = {
    m: n for n, m in enumerate(("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), 1)
}


def _ended(query: str, known: dict[str, DocumentMetadata]) -> set[str]:
    """The documents whose period ends on a date the question names ("three months ended July 1, 2023",
    "at 7/1/23")."""
    dates = {f"{y}-{MONTHS[m[:3].lower()]:02d}-{int(d):02d}" for m, d, y in DATE.findall(query)}
    for month, day, year in re.findall(r"\b(\d{1,2})/(\d{1,2})/(\d{4}|\d\d)\b", query):
        if 1 <= int(month) <= 12 and 1 <= int(day) <= 31:
            dates.add(f"{int(year) + (2000 if len(year) == 2 else 0)}-{int(month):02d}-{int(day):02d}")
    return {d for d, m in known.items() if fiscal(m).end in dates} if dates else set()
