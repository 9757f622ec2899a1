"""Financial analyses mapped to the evidence they read: the statements, notes, items and line items that hold
their inputs (issue 44).

An analyst's question names an analysis ("a reasonably healthy liquidity profile based on its quick ratio",
"which of operating, investing and financing activities brought in the most cash", "has it paid dividends"),
not the statement or the row that answers it. ``ANALYSES`` (65, kept as a table in ``analyses.toml`` beside this
module) maps each common analysis of financial statement
analysis (the families liquidity, solvency and leverage, profitability, efficiency, cash flow, returns to
shareholders, and the events and disclosures analysts ask about) to:

- ``asked``: the words a question names it by (a regular expression, case-insensitive);
- ``sources``: where its inputs are, best first: a statement family of ``statements.py`` (``balance sheet``,
  ``income``, ``cash flows``, ``equity``, ``comprehensive income``) or a disclosure topic of ``topics.py``
  (``cover``, ``debt``, ``acquisitions``, ``market for equity``, ...);
- ``line_items``: the printed labels of the rows that hold its inputs ("total current assets"), which search
  adds to the words it looks for (``expansion``).

The ratios and their inputs follow the standard definitions (CFA Institute's financial statement analysis
curriculum; the 23 ratios of ``edgar-ratios`` and the ratio models of ``financetoolkit`` were checked for
coverage; neither is a dependency: both compute ratios from XBRL facts fetched over the network, not from a
filing's pages, and ``edgartools``' standardization maps XBRL concepts, 15 MB with its dependencies, to labels);
the map is generic accounting, no issuer's or question set's wording. ``analyses_asked(question)``
names the analyses a question asks for; search routes it to the nodes of those sources
(``retrieval/routing.py``).
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

TABLE = Path(__file__).with_name("analyses.toml")
FAMILIES = ("liquidity", "solvency", "profitability", "efficiency", "cash flow", "shareholder returns", "disclosures")


@dataclass(frozen=True)
class Analysis:
    name: str
    family: str  # one of FAMILIES
    asked: str  # the words a question names it by (regular expression)
    sources: tuple[str, ...]  # statement families and disclosure topics holding its inputs, best first
    line_items: tuple[str, ...] = ()  # the labels of the rows holding its inputs
    example: str = ""  # a question that asks for it (kb_assets_tests/test_analyses.py)


def load_analyses(path: Path = TABLE) -> tuple[Analysis, ...]:
    """The map as ``analyses.toml`` writes it."""
    rows = tomllib.loads(path.read_text(encoding="utf-8"))["analysis"]
    return tuple(
        Analysis(r["name"], r["family"], r["asked"], tuple(r["sources"]), tuple(r.get("line_items", ())), r["example"])
        for r in rows
    )


ANALYSES = load_analyses()
_ASKED = [(analysis, re.compile(analysis.asked, re.I)) for analysis in ANALYSES]


def analyses_asked(question: str) -> list[Analysis]:
    """The analyses a question asks for, in the map's order ([] for most questions that are not an analyst's)."""
    return [analysis for analysis, pattern in _ASKED if pattern.search(question)]


def source_weights(analyses: list[Analysis]) -> dict[str, float]:
    """Each source of the asked analyses with its weight: 1 for an analysis's first source, then 0.6, 0.4, 0.3
    (the best weight a source gets from any of them)."""
    steps = (1.0, 0.6, 0.4, 0.3)
    weights: dict[str, float] = {}
    for analysis in analyses:
        for number, source in enumerate(analysis.sources):
            weights[source] = max(weights.get(source, 0.0), steps[min(number, len(steps) - 1)])
    return weights


def expansion(analyses: list[Analysis], question: str, limit: int = 6) -> list[str]:
    """The line items of the asked analyses that the question does not already name (at most ``limit``)."""
    low = question.lower()
    items = [item for analysis in analyses for item in analysis.line_items if item not in low]
    return list(dict.fromkeys(items))[:limit]
