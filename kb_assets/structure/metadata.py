"""Document metadata read from content: title, organisation, period and kind, each with a confidence.

``read_metadata(pages, pdf_info)`` reads the first pages' text (a cover, a form's front page, a press
release's dateline) and the PDF's own metadata (``Title``, ``Author``); never the file name. Rules are
generic: a document names its issuer ("(Exact name of registrant ...)", "X Corporation (NYSE: X)", a
legal-form suffix, the PDF author), its period ("for the fiscal year ended <date>", "quarterly period
ended <date>", "second quarter 2023", "as of <date>") and its kind (a form's name, "news release",
"user guide", ...). The period is the period the document covers, told apart from its date (a filing
date, a press release's dateline, an 8-K's event date are ``date``): an annual report's fiscal year is
labelled as the document labels it ("fiscal 2023", "FY23"), else by the year its period ends in (a
52/53-week year ending in the first week of January belongs to the year before).

The result (``documents.metadata`` in the catalog) is a dict: ``title``, ``organisation``, ``kind``
(``annual report``, ``quarterly report``, ``current report``, ``earnings release``, ``manual``, ...),
``form`` (``10-K``, ...; filings only), ``period`` (``{"label": "FY2023" | "Q2 FY2023" | "2023",
"fiscal_year", "fiscal_quarter", "end"}``, read by ``structure.periods``), ``date``, and ``confidence`` per field
(0-1).
"""

from __future__ import annotations

import re
from collections import Counter
from typing import TypedDict

from kb_assets.structure.periods import ORDINAL, Period, read_period

FIRST_PAGES = 5  # the pages read (a cover and what follows it)
READ_PAGES = 60  # the pages searched for period labels ("fiscal 2023") and a report's quarter
# a form named in a sentence ("our Quarterly Report on Form 10-Q", "the Company's Form 10-K") is quoted, not the
# document's own: a release or a letter refers to the forms it is filed beside
QUOTED_FORM = re.compile(r"(?:\b(?:on|in|our|its|their|the|a|an|and|with|under|to|of|see)|'s|\u2019s)\s+$", re.I)
REPORT_ON = re.compile(r"(?:annual|quarterly|current|transition)\s+reports?\s+on\s+$", re.I)  # a title's or a quote's
FORMS = [  # (pattern on the front page, form, kind)
    (r"\bform\s+10-?k\b|annual report pursuant to section 13", "10-K", "annual report"),
    (r"\bform\s+10-?q\b|quarterly report pursuant to section 13", "10-Q", "quarterly report"),
    (r"\bform\s+8-?k\b|current report\s+pursuant to section 13", "8-K", "current report"),
    (r"\bform\s+20-?f\b", "20-F", "annual report"),
]
RELEASE = re.compile(
    rf"\b(?:reports?|announce[sd]?|reported)\b[^.\n]{{0,80}}\b(?:results|earnings)\b"
    rf"|\b(?:{ORDINAL})[ -]quarter\b[^.\n]{{0,40}}\bresults\b|\bearnings release\b",
    re.I,
)
KINDS = [  # other documents: (pattern on the title and first page, kind)
    (r"(?<![a-z])annual report\b", "annual report"),  # "2023Annual Report" (a cover's words run together)
    (r"(?<![a-z])quarterly report\b", "quarterly report"),
    (
        r"\b(?:user|reference|administration|installation|owner'?s|operator'?s)\s+(?:manual|guide)\b|\bmanual\b|\bhandbook\b",
        "manual",
    ),
    (r"\bguide\b|\btutorial\b", "guide"),
    (r"\brelease notes?\b", "release notes"),
    (r"\bnews release\b|\bpress release\b|\bfor immediate release\b", "press release"),
    (r"\bmeeting notes\b|\bminutes\b|\bmemo(?:randum)?\b|\bnotes?\b", "note"),
    (r"\bagreement\b|\bcontract\b", "agreement"),
    (r"\bpolicy\b", "policy"),
    (r"\bspecification\b", "specification"),
    (r"\breport\b", "report"),
]
LEGAL_FORM = (  # as printed: capitalised or in capitals ("limited" in a sentence is no legal form)
    r"(?:Inc\.?|INC\.?|Incorporated|INCORPORATED|Corporation|CORPORATION|Corp\.?|CORP\.?|Company|COMPANY|Co\.|CO\.|"
    r"Ltd\.?|LTD\.?|Limited|LIMITED|plc|PLC|LLC|N\.V\.|S\.A\.|AG|SE|Group|GROUP)"
)
_NAME_WORD = r"[a-z]?[A-Z0-9][\w&.'-]*"  # capitalised, or one lower-case letter first: "eBay", "iRobot"
ORG_SUFFIXED = re.compile(rf"\b((?:{_NAME_WORD},?\s+){{0,5}}?{_NAME_WORD},?\s+{LEGAL_FORM})(?=[\s,.;)]|$)")
TICKER = re.compile(
    r"(?<![\w])([a-z]?[A-Z][\w.&,' -]{1,80}?)\s*[\(\[]\s*(?:NYSE|NASDAQ|Nasdaq|NYSE American|LSE|TSX)\s*:", re.M
)
NOT_AN_ISSUER = re.compile(
    r"exchange|reporting company|growth company|transition|pursuant|registrant|documents incorporated", re.I
)
POINTER = re.compile(r"(?:the|our|its|this|that|such|each|any|your|their|a|an)\b", re.I)  # "Our Company"
REGISTRANT = re.compile(r"\(\s*exact name of (?:the )?registrant", re.I)
HEADER_REGISTRANT = re.compile(r"exact name of (?:the )?registrants?\b", re.I)  # a column's heading
FILE_NUMBER_ROW = re.compile(r"\d{1,3}-\d{4,6}\s+(.+)")  # a registrant's row starts with its commission file number


class DocumentMetadata(TypedDict):
    """What a document says of itself, stored with it and shown as ``documentMetadata``."""

    title: str | None
    organisation: str | None
    kind: str
    form: str | None
    period: Period | None
    date: str | None  # the document's own date, ISO
    confidence: dict[str, float]  # by field


def read_metadata(pages: list[str], pdf_info: dict[str, str] | None = None) -> DocumentMetadata:
    """The document's metadata from its first pages' texts (and the PDF's ``Title``/``Author``)."""
    info = {k.lower(): (v or "").strip() for k, v in (pdf_info or {}).items()}
    texts = [_lines(t or "") for t in pages[:FIRST_PAGES]]
    front = "\n".join(texts)
    whole = " ".join(" ".join(t.split()) for t in pages[:READ_PAGES])  # period labels ("fiscal 2023") further on
    first = texts[0] if texts else ""
    confidence: dict[str, float] = {}
    # the form the first page (else the first two) names as its own; a release's headline before it: a release
    named = _form_at(first) or _form_at("\n".join(texts[:2]))
    headline = RELEASE.search(first[:3000])
    form, kind = named[1:] if named and not (headline and headline.start() < named[0]) else (None, None)
    if kind:
        confidence["kind"] = 0.95
    elif headline:
        kind, confidence["kind"] = "earnings release", 0.8
    else:
        kind = _kind(info.get("title", "") + "\n" + first[:2000])
        confidence["kind"] = 0.5 if kind != "document" else 0.2
    organisation, confidence["organisation"] = _organisation(first, front, whole, info, form)
    period, when, confidence["period"] = read_period(kind, form, first, front, whole)
    title = info.get("title") if _meaningful(info.get("title", "")) else _title(first, organisation, form, period)
    confidence["title"] = 0.9 if _meaningful(info.get("title", "")) else 0.6
    return {
        "title": title,
        "organisation": organisation,
        "kind": kind,
        "form": form,
        "period": period,
        "date": when,
        "confidence": {k: round(v, 2) for k, v in confidence.items()},
    }


def _form_at(text: str) -> tuple[int, str, str] | None:
    """(position, form, kind) of the first form the front page names as its own, not quoted in a sentence (a
    10-K's cover also mentions other forms further down)."""
    head = text[:4000]
    found = [
        (m.start(), form, kind)
        for pattern, form, kind in FORMS
        for m in re.finditer(pattern, head, re.I)
        if not QUOTED_FORM.search(REPORT_ON.sub("", head[max(0, m.start() - 48) : m.start()]))
    ]
    return min(found) if found else None


def _kind(text: str) -> str:
    for pattern, kind in KINDS:
        if re.search(pattern, text, re.I):
            return kind
    return "document"


def _meaningful(title: str) -> bool:
    """A PDF Title worth showing (not a file name, a tool's placeholder or a form code)."""
    return (
        bool(title) and len(title) > 6 and not re.search(r"\.(?:docx?|pdf|htm)|^untitled|^microsoft|^\d", title, re.I)
    )


def _lines(text: str) -> str:
    """Text lines: where lines end in CR LF, a lone LF is a word gap; small caps split ("R\nESORTS") joined."""
    if "\r\n" in text:
        text = text.replace("\r\n", "\x00").replace("\n", " ").replace("\x00", "\n")
    return text


def _organisation(
    first: str, front: str, whole: str, info: dict[str, str], form: str | None = None
) -> tuple[str | None, float]:
    lines = [line.strip() for line in front.splitlines()]
    for number, line in enumerate(lines):
        if REGISTRANT.search(line):
            before = re.split(r"_{3,}", REGISTRANT.split(line)[0])[-1].strip()
            if _name_like(before):
                return _tidy(before), 0.95
            for previous in reversed(lines[max(0, number - 3) : number]):
                previous = re.split(r"_{3,}", previous)[-1].strip()
                if _name_like(previous):
                    return _tidy(previous), 0.95
        if HEADER_REGISTRANT.match(line):  # a table of registrants: "001-12609 PG&E CORPORATION California ..."
            for row in lines[number + 1 : number + 8]:
                if (filed := FILE_NUMBER_ROW.match(row)) and (named := ORG_SUFFIXED.search(filed.group(1))):
                    return _tidy(named.group(1)), 0.9
    if form:  # a form's cover without the "(Exact name of registrant ...)" label: its line that is a name
        for line in first.splitlines():
            line = line.strip()
            named = ORG_SUFFIXED.fullmatch(line.rstrip(" ,"))
            if named and not NOT_AN_ISSUER.search(line) and not POINTER.match(line):
                return _tidy(named.group(1)), 0.85
    if match := TICKER.search(first[:4000]):
        name = re.split(r"[\u2013\u2014]|--| - |\)\s", match.group(1))[-1].strip(" ,")
        if len(name) > 2:
            return _tidy(name), 0.85
    counts = Counter(
        _tidy(m.group(1))
        for m in ORG_SUFFIXED.finditer(front + " " + whole[:100000])
        if not NOT_AN_ISSUER.search(m.group(1))
        and " " in m.group(1).strip()
        and not POINTER.match(m.group(1))
        and re.match(r"[0-9]*[a-z]?[A-Z][A-Za-z]*\b", m.group(1))  # a name's first word has letters: "3M", not "34"
    )
    if counts:
        return counts.most_common(1)[0][0], 0.6
    if info.get("author") and len(info["author"]) > 2:
        return info["author"], 0.4
    return None, 0.0


def _name_like(line: str) -> bool:
    return len(line) > 2 and not re.search(r"commission file|^\d|transition period|pursuant|^\W+$", line, re.I)


def _tidy(name: str) -> str:
    name = re.sub(r"(?<![\w&'\u2019])([A-Z])\s+([A-Z]{2,})\b", r"\1\2", name)  # small caps: "R ESORTS"
    name = " ".join(name.split()).strip(" ,.;:")
    name = re.sub(r"^(?:part|item)\s+[ivx\d]+[a-z]?\s*[.:]?\s+", "", name, flags=re.I)  # a heading's number
    name = re.sub(r"^.+?\s(?=(?:The|THE)\s)", "", name)  # a heading's words, then "The ... Company"
    name = re.sub(r"^(?:the|by|of|and)\s+", "", name, flags=re.I)
    if name.isupper() and len(name) > 4:  # "NIKE, INC." -> "Nike, Inc.", but "PG&E", "AES", "MGM" stay
        name = " ".join(word if _acronym(word) else word.title() for word in name.split())
    return name + ("." if re.search(r"\b(?:Inc|Corp|Co|Ltd)$", name) else "")


def _acronym(word: str) -> bool:
    bare = word.strip(",.")
    return "&" in word or (len(bare) <= 3 and bare.isalpha() and bare.lower() not in ("inc", "co", "ltd", "plc", "llc"))


def _title(first: str, organisation: str | None, form: str | None, period: Period | None) -> str | None:
    if form:
        return " ".join(x for x in (organisation, f"Form {form}", period and period["label"]) if x)
    for line in first.splitlines():
        line = " ".join(line.split())
        if len(line) > 3 and not re.match(r"^(?:table of contents|contents|page \d+|\d+)$", line, re.I):
            return line[:200]
    return None
