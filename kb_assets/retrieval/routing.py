"""An analyst's question routed to the statements, notes and items that hold its analysis's inputs (issue 44).

"Does X have a reasonably healthy liquidity profile based on its quick ratio?" names neither the balance sheet
nor a row of it. ``structure/analyses.py`` maps the analyses a question names to their sources (statement
families, disclosure topics) and line items; here, for ``pageindex``:

1. the question's BM25 words get the line items it does not name (``expansion``: "total current assets",
   "total current liabilities"), so the chunks holding those rows are candidates;
2. the PageIndex nodes of the documents searched whose title is such a source (statement nodes, section nodes
   of ``structure/topics.py``, and the tree's own nodes: "Note 7 – Debt", "Liquidity and Capital Resources")
   give their pages a routing value: the source's weight (1 for an analysis's first source, then 0.6, 0.4,
   0.3; a statement the question names 1), a broad section's at ``BROAD_SHARE``, a section's pages after its first
   at ``CONTINUED``, at most ``NODE_PAGES`` pages a node, all at ``WHY_SHARE`` for a question asking why; those
   pages' best chunks are read like located pages' (``ROUTED_CHUNKS`` in ``strategies/pageindex.py``);
3. each page's relevance gets ``analysis`` (``SearchConfig.analysis``, 0.5) x its routing value (``analysis`` in a
   row's ``scores``, ``analysisStatement`` where it routes to a statement or the cover).

Development filings (docs/retrieval-log.md, section 9): analysts' questions hit@1 / hit@5 0.28 / 0.63 -> 0.78 /
0.98; every section at its source's weight cost explanations (0.67 -> 0.58 hit@1 on 20 filings); broad sections
at 0.5 and why-questions at 0.25 leave them at 0.58 / 0.93 against 0.60 / 0.91 before (37 filings).

The nodes are read beside the locating (one Postgres query), only when the question asks for an analysis and
its scope names at most ``MAX_DOCUMENTS`` documents (a question naming its company and year names one or two);
without a scope only statement and section nodes are read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from kb_assets.lib.lexical import query_terms
from kb_assets.structure.analyses import Analysis, analyses_asked, expansion, source_weights
from kb_assets.structure.statements import NODE_PREFIX as STATEMENT_PREFIX
from kb_assets.structure.statements import TITLE, named_statements, statement_family
from kb_assets.structure.topics import topics_of
from kb_assets.structure.vocabulary import terms_in

MAX_DOCUMENTS = 20
WHY_SHARE = 0.25
# a question asking what caused something: its answer is a discussion of the figures, not their statement
WHY = re.compile(r"\b(?:why|what (?:drove|caused|explains?|led)|explain|reasons?|driv(?:en|ers?|ing)|credit)\b", re.I)
NODE_PAGES = 3  # pages of a node that are routed to
CONTINUED = 0.6  # a section's later pages, against its first
BROAD_SHARE = 0.5  # the routing value of a broad section (a discussion of results, segments, revenue, liquidity)
BROAD = {"results", "segments", "revenue", "liquidity", "mdna", "business", "risk factors"}  # many pages, many headings
EXACT = {"balance sheet", "income", "cash flows", "equity", "comprehensive income", "cover"}
STATEMENTS = {"balance sheet", "income", "cash flows"}
LINE_ITEM_SHARE = 0.6  # the routing value of the statement that prints a line item the question names


@dataclass
class Routing:
    analyses: list[Analysis]
    weights: dict[str, float]  # source -> weight
    words: list[str]  # the line items added to the question's BM25 words
    pages: dict[tuple[str, int], float] = field(default_factory=dict)  # (document_id, page) -> routing value
    exact: set[tuple[str, int]] = field(default_factory=set)  # the pages routed to as a statement or the cover
    titles: tuple[str, ...] = ()  # the words of the routed nodes' titles (which of their chunks are read)


def routing(question: str) -> Routing | None:
    """The analyses a question asks for, their sources' weights and the line items to look for (None: none).
    A statement the question names ("... in its income statement") is the first source of the analyses that
    read it; a question that asks why (``WHY``: its answer is a discussion, not the figures) has every source
    at ``WHY_SHARE``."""
    asked = analyses_asked(question)
    printed = {t.statement for t in terms_in(question) if t.statement in STATEMENTS}
    if not asked and not printed:
        return None
    weights = source_weights(asked)
    for statement in printed:  # a line item named (by shorthand or name) is read in its statement (issue 53)
        weights[statement] = max(weights.get(statement, 0.0), LINE_ITEM_SHARE)
    if WHY.search(question):
        weights = {source: weight * WHY_SHARE for source, weight in weights.items()}
    for family in named_statements(question) & weights.keys():
        weights[family] = 1.0
    return Routing(asked, weights, expansion(asked, question))


def node_sources(node_id: str, title: str) -> set[str]:
    """The sources a node stands for: a statement node's family, a title's disclosure topics, and the family of
    a tree node titled as a statement ("CONSOLIDATED BALANCE SHEETS" in a PDF's outline)."""
    if node_id.startswith(STATEMENT_PREFIX):
        return {statement_family(title)}
    found = topics_of(title)
    flat = " ".join(title.split())
    if (match := TITLE.search(flat)) and match.start() < 20 and len(flat) < 90 and "notes" not in flat.lower():
        found.add(statement_family(match.group(1)))
    return found


def routed_pages(
    nodes: list[tuple[str, str, str, int, int]], weights: dict[str, float]
) -> dict[tuple[str, int], float]:
    """(document_id, page) -> routing value of the pages of the nodes that are sources of the asked analyses: the
    source's weight, x ``BROAD_SHARE`` for a broad section (results, segments, revenue, liquidity: a filing has
    many such headings, and the question's own words find the page among them better), x ``CONTINUED`` on a
    section's later pages."""
    pages: dict[tuple[str, int], float] = {}
    for document_id, node_id, title, start, end in nodes:
        found = [(weights[s], s in BROAD) for s in node_sources(node_id, title) if s in weights]
        value = max((weight * (BROAD_SHARE if broad else 1.0) for weight, broad in found), default=0.0)
        if not value:
            continue
        statement = node_id.startswith(STATEMENT_PREFIX)
        for page in range(start, min(end, start + NODE_PAGES - 1) + 1):
            share = value if statement or page == start else value * CONTINUED
            pages[(document_id, page)] = max(pages.get((document_id, page), 0.0), share)
    return pages


def title_words(nodes: list[tuple[str, str, str, int, int]], weights: dict[str, float]) -> tuple[str, ...]:
    """The words of the titles of the nodes that are sources ("note 3 acquisition and divestitures"): a routed page's
    heading chunk holds them where it holds no word of the question."""
    titles = {title for _, node_id, title, _, _ in nodes if node_sources(node_id, title) & weights.keys()}
    return tuple(dict.fromkeys(term for title in sorted(titles) for term in query_terms(title) if len(term) > 2))


def exact_pages(nodes: list[tuple[str, str, str, int, int]], weights: dict[str, float]) -> set[tuple[str, int]]:
    """The pages routed to as a statement or the cover (the scorer weighs them apart from a section's)."""
    exact = {s: w for s, w in weights.items() if s in EXACT}
    return set(routed_pages(nodes, exact)) if exact else set()


def expanded(bm25_text: str, words: list[str]) -> str:
    """The question's BM25 words and the line items (each item's words once)."""
    have = set(re.findall(r"\w+", bm25_text.lower()))
    extra = [w for w in dict.fromkeys(w for item in words for w in re.findall(r"\w+", item.lower())) if w not in have]
    return " ".join([bm25_text, *extra]) if extra else bm25_text
