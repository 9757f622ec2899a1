"""The period a document covers, read from its text (``structure.metadata`` reads the rest of its metadata).

``read_period(kind, form, first, front, whole)`` -> (period, date, confidence): a form's cover ("for the
fiscal year ended <date>", "quarterly period ended <date>"), an 8-K's event date, a release's headline
quarter ("second quarter 2023", "Q2 FY24"), else a period or "as of" date, else the year named most. A
fiscal year is labelled as the document labels it ("fiscal 2023", "FY23"), else by the year its period ends
in; a quarterly report's quarter comes from the periods its statements cover ("three and six months ended").
"""

from __future__ import annotations

import re
from collections import Counter
from datetime import date
from typing import TypedDict


class Period(TypedDict):
    """The period a document covers: ``FY2023``, ``Q2 FY2024``, its fiscal year and quarter and end date."""

    label: str
    fiscal_year: int
    fiscal_quarter: int | None
    end: str | None  # ISO date


MONTHS = {
    m: n
    for n, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sept", "sep"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ],
        1,
    )
    for m in names
}
_MONTH = "|".join(sorted(MONTHS, key=len, reverse=True))
DATE = rf"(?i:{_MONTH})\.?\s+\d{{1,2}}\s*,?\s*\d{{4}}"
ORDINALS = {"first": 1, "second": 2, "third": 3, "fourth": 4, "1st": 1, "2nd": 2, "3rd": 3, "4th": 4}
ORDINAL = "|".join(ORDINALS)
COMPARED = re.compile(  # two years compared: "fiscal 2019 and 2018", "fiscal 2021 compared with fiscal 2020"
    r"\bfiscal(?:\s+years?)?\s+(20\d\d)\s*(?:,|and|compared\s+(?:to|with)|versus|vs\.?)\s*(?:fiscal(?:\s+year)?\s+)?(20\d\d)\b",
    re.I,
)
AND_YEAR = r"(?:\s+and\s+(?:full|fiscal)[ -]year)?"  # "fourth-quarter and full-year 2022"


def _date(text: str) -> date | None:
    match = re.match(r"([A-Za-z]+)\.?\s+(\d{1,2})\s*,?\s*(\d{4})", text.strip())
    if not match or match.group(1).lower() not in MONTHS:
        return None
    try:
        return date(int(match.group(3)), MONTHS[match.group(1).lower()], int(match.group(2)))
    except ValueError:
        return None


def _labelled_year(front: str, candidates: set[int], quarter: int | None = None) -> int | None:
    """The fiscal year the document names most often among ``candidates`` ("fiscal 2023", "FY23"; for a
    quarterly report also its own quarter's label: "Third Quarter 2022", "Q3 2022")."""
    counts: Counter[int] = Counter()
    labels = [r"\bfiscal(?:\s+year)?\s+(20\d\d)\b", r"\bFY\s?'?(20\d\d|\d\d)\b"]
    if quarter:
        ordinals = "|".join(name for name, number in ORDINALS.items() if number == quarter)
        labels.append(
            rf"(?i:\b(?:{ordinals})[ -]quarter(?:\s+of)?(?:\s+fiscal)?(?:\s+year)?|\bQ{quarter})\s+(20\d\d)\b"
        )
    for match in re.finditer("|".join(labels), front):
        value = next(group for group in match.groups() if group)
        year = int(value) if len(value) == 4 else 2000 + int(value)
        if year in candidates:
            counts[year] += 1
    return counts.most_common(1)[0][0] if counts else None


def _annual_label(whole: str, end: date) -> int | None:
    """The label of an annual report's year that ends in January or February, by the year it starts or ends
    in: the one bound to the end date ("12 months ended January 31, 2015 ("2015")"), else the later of the
    two years compared ("fiscal 2019 and 2018", "2021 compared with 2020": this year and the one before),
    else the one named most often."""
    candidates = {end.year - 1, end.year}
    for match in re.finditer(
        rf"({DATE})\s*\(\s*[\"\u201c]?(?:fiscal\s+(?:year\s+)?)?(20\d\d)[\"\u201d]?\s*\)", whole, re.I
    ):
        if _date(match.group(1)) == end and int(match.group(2)) in candidates:
            return int(match.group(2))
    compared = [
        max(int(match.group(1)), int(match.group(2)))
        for match in COMPARED.finditer(whole)
        if abs(int(match.group(1)) - int(match.group(2))) == 1
    ]
    return max((year for year in compared if year in candidates), default=None) or _labelled_year(whole, candidates)


def read_period(
    kind: str, form: str | None, first: str, front: str, whole: str
) -> tuple[Period | None, str | None, float]:
    """(period, date, confidence): the period covered, and the document's own date where it has one."""
    flat = " ".join(front.split())
    if form in ("10-K", "20-F") or kind == "annual report":
        if match := re.search(rf"(?:fiscal )?year ended:?\s*({DATE})", flat, re.I):
            end = _date(match.group(1))
            if end:
                default = end.year - 1 if end.month == 1 and end.day <= 7 else end.year
                year = _annual_label(whole, end) if end.month <= 2 else None
                year = year or default
                return _annual(year, end), None, 0.9
    quarterly = form == "10-Q" or kind == "quarterly report"
    if quarterly and (match := re.search(rf"(?:quarterly period|quarter)\s+ended:?\s*({DATE})", flat, re.I)):
        if end := _date(match.group(1)):
            return _quarter_ended(end, whole, 0.85)
    if form == "8-K":
        if match := re.search(
            rf"date of report[^)]{{0,40}}\)?\s*:?\s*({DATE})(?:\s*\(({DATE})\))?|({DATE})\s*\(?date of report",
            flat,
            re.I,
        ):
            event = _date(match.group(2) or match.group(1) or match.group(3))
            if event:
                day = event.isoformat()
                return Period(label=day, fiscal_year=event.year, fiscal_quarter=None, end=day), day, 0.8
    head = " ".join(first.split())[:3000]
    if kind in ("earnings release", "press release", "quarterly report"):
        if found := _release_quarter(head):
            quarter, year, end = found
            dateline = re.search(DATE, head)
            when = _date(dateline.group(0)) if dateline else None
            return _quarterly(quarter, year, end), when.isoformat() if when else None, 0.8
    if match := re.search(rf"(?:year|period|quarter) ended:?\s*({DATE})|\bas of\s+({DATE})", flat, re.I):
        if end := _date(match.group(1) or match.group(2)):
            if quarterly:  # a quarterly report dated otherwise ("period ended", "as of"): its quarter all the same
                return _quarter_ended(end, whole, 0.6)
            return (
                Period(label=str(end.year), fiscal_year=end.year, fiscal_quarter=None, end=end.isoformat()),
                None,
                0.5,
            )
    years = Counter(int(y) for y in re.findall(r"\b(?:19|20)\d\d\b", head))
    if years:
        year = years.most_common(1)[0][0]
        return Period(label=str(year), fiscal_year=year, fiscal_quarter=None, end=None), None, 0.3
    return None, None, 0.0


def _quarter_ended(end: date, whole: str, confidence: float) -> tuple[Period, None, float]:
    """A quarterly report's period from the date its quarter ends: the quarter from the periods its statements
    cover; the fiscal year ends (4 - quarter) quarters later (a year ending in January: as the report labels it)."""
    quarter = _quarter_of_report(whole, end)
    year_end_month = end.month + 3 * (4 - quarter) if quarter else None
    if year_end_month is None:
        year = _labelled_year(whole, {end.year, end.year + 1}) or end.year
    elif year_end_month <= 12:
        year = end.year
    elif year_end_month - 12 == 1:
        year = _labelled_year(whole, {end.year, end.year + 1}, quarter) or end.year + 1
    else:
        year = end.year + 1
    return _quarterly(quarter, year, end), None, confidence if quarter else 0.5


def _annual(year: int, end: date | None) -> Period:
    return {"label": f"FY{year}", "fiscal_year": year, "fiscal_quarter": None, "end": end.isoformat() if end else None}


def _quarterly(quarter: int | None, year: int, end: date | None) -> Period:
    label = f"Q{quarter} FY{year}" if quarter else f"FY{year}"
    return {"label": label, "fiscal_year": year, "fiscal_quarter": quarter, "end": end.isoformat() if end else None}


SPANS = {  # the periods a quarterly report's statements cover, by the quarter they end
    3: r"nine months|thirty-nine weeks|39 weeks",
    2: r"six months|twenty-six weeks|26 weeks",
    1: r"three months|thirteen weeks|13 weeks",
}


def _quarter_of_report(flat: str, end: date | None = None) -> int | None:
    """A quarterly report's quarter, from the periods its statements cover ("three and nine months ended
    September 30, 2023": the third): the longest one that ends on the report's own date, else the longest
    one named at all."""
    low = flat.lower()[:60000]
    if end is not None:
        for quarter, span in SPANS.items():
            for match in re.finditer(rf"\b(?:{span})\s+ended\s+({DATE})", low):
                if _date(match.group(1)) == end:
                    return quarter
    for quarter, span in SPANS.items():
        if re.search(rf"\b(?:{span})\s+ended\b", low):
            return quarter
    return None


def _release_quarter(head: str) -> tuple[int, int, date | None] | None:
    """(quarter, fiscal year, quarter end) a release names: "Q4 FY23" first, else the first quarter and year
    it names (its headline, not an outlook further on: "first quarter 2023", "second-quarter 2023",
    "fourth-quarter and full-year 2022"), else "fourth quarter ended January 28, 2023"."""
    if match := re.search(r"\bQ([1-4])\s*(?:FY|fiscal\s*)\s?'?(20\d\d|\d\d)\b", head, re.I):
        year = int(match.group(2))
        return int(match.group(1)), year if year > 100 else 2000 + year, _ended(head)
    named = [
        (match.start(), ORDINALS[match.group(2).lower()], int(match.group(1)))
        for match in re.finditer(rf"\b(\d{{4}})\s+({ORDINAL})[ -]quarter\b", head, re.I)
    ] + [
        (match.start(), ORDINALS[match.group(1).lower()], int(match.group(2)))
        for match in re.finditer(
            rf"\b({ORDINAL})[ -]quarter{AND_YEAR}(?:\s+of)?(?:\s+fiscal)?(?:\s+year)?\s+(20\d\d)\b", head, re.I
        )
    ]
    if named:
        _, quarter, year = min(named)
        return quarter, year, _ended(head)
    if match := re.search(rf"\b({ORDINAL})[ -]quarter\s+ended\s+({DATE})", head, re.I):
        end = _date(match.group(2))
        if end:
            return ORDINALS[match.group(1).lower()], end.year, end
    return None


def _ended(head: str) -> date | None:
    match = re.search(rf"quarter ended\s+({DATE})", head, re.I)
    return _date(match.group(1)) if match else None
