"""Analysts' shorthand spelled out in the words filings print (issue 53).

"NKE ETR FY23 vs FY22?", "Walmart capex FY2020", "AAPL D&A", "COGS", "PP&E", "SG&A", "op margin", "CFO vs CFI vs
CFF": an analyst's question names line items by abbreviations that a filing never prints ("Provision for income
taxes", "Payments for acquisition of property, plant and equipment"). ``vocabulary.toml`` beside this module
(written by ``benchmarks/filings/build_vocabulary.py``) maps each shorthand (``asked``, a regular expression) to
what it stands for (``label``) and to the US-GAAP elements of its concept as edgartools 5.62.1 (MIT) groups them
(``PaymentsToAcquirePropertyPlantAndEquipment``, ``CapitalExpenditures``): the elements' words are the words a
statement's row prints.

- ``spelled_out(question)``: the question with each shorthand followed by its label in parentheses ("NKE ETR
  (effective tax rate) FY23 vs FY22?"); search reads this text everywhere (the dense query, BM25, the page
  locating, the analyses' routing, the passages), so the shorthand costs no stage its meaning;
- ``printed_words(question)``: the words of the asked terms' US-GAAP elements that the question lacks, which BM25
  adds (``retrieval/lexical_query.py``);
- ``is_shorthand(token)``: a capitalised token that is shorthand ("ETR", "GM", "NI"), which the scope does not
  take for a ticker or an issuer's initials when the question names an issuer otherwise.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

TABLE = Path(__file__).with_name("vocabulary.toml")
ELEMENTS_READ = 2  # the first elements of a group are the ones filings use most (edgartools lists them so)
PRINTED_LIMIT = 12  # at most this many words are added to BM25
STOP = {"to", "and", "of", "the", "for", "in", "by", "from", "or", "at", "on", "with", "net", "including", "excluding"}
STOP |= {"attributable", "carrying", "value", "period", "continuing", "abstract", "total", "used", "provided"}
STOP |= {"operations", "contract", "customer", "assessed", "noncurrent", "gross"}
# capitalised words of questions that are no issuer, though printed like a ticker
OFFICES = {"CEO", "CFO", "COO", "CTO", "US", "USA", "USD", "GAAP", "SEC", "FY", "FYE", "YE", "YTD", "LTM", "TTM"}
OFFICES |= {"MD", "IPO", "ESG", "AI", "EU", "UK", "Q1", "Q2", "Q3", "Q4", "H1", "H2", "CY", "EPS", "LLC", "INC"}


@dataclass(frozen=True)
class Term:
    asked: re.Pattern[str]
    label: str
    words: tuple[str, ...]  # the words filings print for it: the label's, then its US-GAAP elements'
    statement: str  # the statement family that prints it ("" for none)


def element_words(element: str) -> list[str]:
    """A US-GAAP element name's words: "PaymentsToAcquirePropertyPlantAndEquipment" -> payments, acquire, ..."""
    return [w.lower() for w in re.findall(r"[A-Z][a-z]+|[A-Z]+(?![a-z])", element) if w.lower() not in STOP]


def load_terms(path: Path = TABLE) -> tuple[Term, ...]:
    rows = tomllib.loads(path.read_text(encoding="utf-8"))["term"]
    terms = []
    for row in rows:
        words = re.findall(r"[a-z0-9-]+", row["label"].lower())
        for element in row["us_gaap"][:ELEMENTS_READ]:
            words += element_words(element)
        words = [w for w in dict.fromkeys(words) if w not in STOP]
        terms.append(Term(re.compile(row["asked"]), row["label"], tuple(words), row["statement"]))
    return tuple(terms)


TERMS = load_terms()


def terms_in(text: str) -> list[Term]:
    """The terms whose shorthand (or label) the text names, in the table's order."""
    low = text.lower()
    return [t for t in TERMS if t.asked.search(text) or t.label.lower() in low]


def spelled_out(question: str) -> str:
    """The question with each shorthand followed by "(label)", where the question does not already say it."""
    inserted: list[tuple[int, str]] = []
    low = question.lower()
    for term in TERMS:
        if term.label.lower() in low or any(term.label == label for _, label in inserted):
            continue
        match = term.asked.search(question)
        if match and match.group(0).strip().lower() != term.label.lower():
            inserted.append((match.end(), term.label))
    for end, label in sorted(inserted, reverse=True):
        question = f"{question[:end]} ({label}){question[end:]}"
    return question


def printed_words(question: str) -> list[str]:
    """The words of the asked terms' labels and US-GAAP elements that the question does not hold (at most
    ``PRINTED_LIMIT``), for BM25."""
    have = set(re.findall(r"[a-z0-9-]+", question.lower()))
    extra = [w for term in terms_in(question) for w in term.words if w not in have]
    return list(dict.fromkeys(extra))[:PRINTED_LIMIT]


def is_shorthand(token: str) -> bool:
    """A capitalised token that is finance shorthand or an office ("ETR", "GM", "NI", "CFO"), not an issuer."""
    return token.upper() in OFFICES or any(t.asked.fullmatch(token) for t in TERMS)
