"""The other names an issuer goes by, read from a filing's first pages (issue 53): its trading symbols, the short
name it defines for itself, its former names and its commission file number.

An analyst writes "KO's main regions", "NKE ETR FY23", "J&J", "Walmart": a ticker, a short name, a name the
company no longer uses. ``issuer_names(first, front, whole, organisation)`` reads what the document says of
them:

- ``tickers``: the trading symbols of the cover's table of securities registered under Section 12(b) (the
  column "Trading Symbol(s)" of a 10-K or 10-Q cover since 2019; a note's symbol such as "MMM26" is not one),
  and a release's "(NYSE: KO)" / "(Nasdaq: COST)";
- ``names``: the short names the document defines for its issuer, right after its name
  ("Costco Wholesale Corporation ("Costco" or the "Company")"), not the generic ones ("the Company", "we");
- ``former_names``: "formerly known as X", "(formerly X)", "changed its name from X", and a cover's
  "(Former name ..., if changed since last report)" when a name stands before it;
- ``file_number``: the SEC commission file number ("001-35727"): it stays when a company changes its name, so
  search takes documents that share one as the same issuer (``retrieval/scope.py``).

Each is a list (possibly empty) or None; nothing is guessed from outside the document.
"""

from __future__ import annotations

import re
from typing import TypedDict

GENERIC = {  # defined terms that name no one in particular
    "company",
    "corporation",
    "registrant",
    "we",
    "us",
    "our",
    "issuer",
    "parent",
    "group",
    "management",
    "board",
    "firm",
    "holding company",
    "partnership",
    "bank",
    "trust",
    "fund",
    "plan",
    "agreement",
    "notes",
    "act",
}
# words of a cover's table of registered securities that are not trading symbols, though printed in capitals
TABLE_WORDS = {
    *"common stock par value per share shares new york exchange title each class name which registered the".split(),
    *"nasdaq nyse llc inc market global select notes due of on and chicago ordinary depositary none act".split(),
    *"section symbol symbols trading preferred series warrants units corp corporation company stock cumulative".split(),
    *"class american arca cboe bzx pacific boston philadelphia usd eur gbp no yes n/a na the a b c".split(),
    *"to pursuant securities registered indicate if by check mark".split(),
}
TRADING_SYMBOL = re.compile(r"trading\s+symbols?(?:\s*\(s\))?", re.I)
SECTION_12B = re.compile(r"section\s+12\s*\(b\)", re.I)
UNDER_SYMBOL = re.compile(
    r"\b(?:under|with)\s+the\s+(?:ticker\s+|trading\s+)?symbols?\s+[\"“']?([A-Z]{1,5}(?:\.[A-Z])?)\b"
)
TABLE_END = re.compile(r"section\s+12\s*\(g\)|indicate by check mark", re.I)
SYMBOL = re.compile(r"(?<![\w$.-])([A-Z]{1,5}(?:\.[A-Z])?)(?![\w-])")
LISTED = re.compile(
    r"[\(\[]\s*(?:NYSE|NASDAQ|Nasdaq|NYSE American|NYSE Arca|Cboe|LSE|TSX)\s*:\s*([A-Z]{1,5}(?:\.[A-Z])?)\s*[\)\],;]"
)
FILE_NUMBER = re.compile(r"commission\s+file\s+(?:number|no\.?)s?\s*[:.]?\s*((?:\d{1,3}-)?\d{4,6}(?:-\d{2})?)", re.I)
QUOTED = re.compile(r"[\"“”']([A-Z][\w&.' -]{1,40}?)[\"“”']")
_NAME = r"((?:[a-z]?[A-Z0-9][\w&.'-]*,?\s+){0,5}[a-z]?[A-Z0-9][\w&.'-]*)"
FORMERLY = (
    re.compile(  # "(formerly Square, Inc.)", "formerly known as X", "changed its name from X": not "formerly CEO of"
        rf"\((?:formerly|previously)(?:\s+known\s+as|\s+named)?\s+[\"“]?{_NAME}"
        rf"|\b(?:formerly|previously)\s+(?:known\s+as|named)\s+[\"“]?{_NAME}"
        rf"|\bchanged\s+(?:its|our|the\s+company's)\s+(?:corporate\s+)?name\s+from\s+[\"“]?{_NAME}"
    )
)
FORMER_COVER = re.compile(r"([^\n()]{3,80})\n?\s*\(\s*former name", re.I)
LEGAL = re.compile(
    r"\b(?:Inc|Incorporated|Corporation|Corp|Company|Co|Ltd|Limited|plc|PLC|LLC|N\.V|S\.A|AG|SE)\b\.?", re.I
)
NOT_A_NAME = re.compile(r"^\s*n/?a\b|not applicable|none|^\W*$|former|address|telephone|\d{3}", re.I)


class IssuerNames(TypedDict):
    """How a filing names its issuer beside its organisation (``DocumentMetadata``)."""

    tickers: list[str]
    names: list[str]
    former_names: list[str]
    file_number: str | None


def issuer_names(first: str, front: str, whole: str, organisation: str | None) -> IssuerNames:
    """``tickers``, ``names``, ``former_names`` and ``file_number`` of the document's issuer (see the module
    docstring): ``first`` is the first page's text, ``front`` the first pages', ``whole`` the pages read for labels."""
    return {
        "tickers": tickers(front, whole),
        "names": short_names(front + "\n" + whole[:60000], organisation),
        "former_names": former_names(front + "\n" + whole[:60000], organisation),
        "file_number": file_number(front),
    }


def tickers(front: str, whole: str = "") -> list[str]:
    """The trading symbols of the cover's table of securities registered under Section 12(b) (when it has the
    column "Trading Symbol(s)"), those a release quotes ("(NYSE: KO)") and those the annual report's market
    section names ("traded on the New York Stock Exchange under the symbol "NKE""), in that order."""
    found: list[str] = []
    for heading in SECTION_12B.finditer(front):
        rest = front[heading.end() : heading.end() + 1500]
        end = TABLE_END.search(rest)
        table = rest[: end.start()] if end else rest
        if not TRADING_SYMBOL.search(table):  # a cover from before 2019 names no symbol: its capitals are words
            continue
        found += [s for s in SYMBOL.findall(TRADING_SYMBOL.sub(" ", table)) if s.lower() not in TABLE_WORDS]
    found += LISTED.findall(front[:6000])
    found += UNDER_SYMBOL.findall(whole[:200000])
    return list(dict.fromkeys(found))[:8]


def short_names(text: str, organisation: str | None) -> list[str]:
    """The names the document defines for its issuer in the parentheses right after the issuer's name
    ("Costco Wholesale Corporation ("Costco" or the "Company")"), less generic ones ("the Company", "we"): a
    parenthesis that defines terms (it quotes one), a few characters after the name (its legal form)."""
    if not organisation:
        return []
    core = [w for w in re.findall(r"[A-Za-z0-9&]+", organisation) if w.lower() not in ("inc", "corp", "co", "ltd")]
    if not core:
        return []
    name = r"[\W_]+".join(re.escape(w) for w in core[:2])
    found: list[str] = []
    for match in re.finditer(
        rf"(?i:{name})[\w.,&' -]{{0,24}}\(\s*(?:the\s+|collectively,?\s+)?([\"“][^()]{{1,160}})\)", text
    ):
        terms = [" ".join(t.split()).strip(" .,") for t in QUOTED.findall(match.group(1))]
        for term in terms:
            if term.lower() not in GENERIC and term.lower() != organisation.lower() and term not in found:
                found.append(term)
    return found[:4]


def former_names(text: str, organisation: str | None) -> list[str]:
    """Names the issuer says it had: "formerly known as X", "(formerly X)", a cover's former name."""
    found: list[str] = []
    current = (organisation or "").lower()
    candidates = [next(g for g in m.groups() if g) for m in FORMERLY.finditer(text)]
    candidates += [m.group(1) for m in FORMER_COVER.finditer(text[:8000]) if re.match(r"\s*[A-Z]", m.group(1))]
    for candidate in candidates:
        candidate = " ".join(candidate.split()).strip(' ,;:)"”')
        candidate = candidate if re.search(r"\b(?:Inc|Corp|Co|Ltd)\.$", candidate) else candidate.rstrip(".")
        if (
            len(candidate) < 3
            or NOT_A_NAME.search(candidate)
            or candidate.lower() == current
            or not LEGAL.search(candidate)
        ):
            continue
        if candidate not in found:
            found.append(candidate)
    return found[:3]


def file_number(front: str) -> str | None:
    """The commission file number printed on a form's cover ("001-35727", "1-10204" read as "001-10204")."""
    match = FILE_NUMBER.search(front)
    if not match:
        return None
    head, _, tail = match.group(1).partition("-")
    return f"{int(head):03d}-{tail}" if tail and len(head) <= 3 else match.group(1)
