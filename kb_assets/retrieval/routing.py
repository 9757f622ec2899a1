"""An analyst's question routed to the statements, notes and items that hold its analysis's inputs (issue 44).

"Does X have a reasonably healthy liquidity profile based on its quick ratio?" names neither the balance sheet
nor a row of it. ``structure/analyses.py`` maps the analyses a question names to their sources (statement
families, disclosure topics) and line items; here, for ``pageindex``:

1. the question's BM25 words get the line items it does not name (``expansion``: "total current assets",
   "total current liabilities"), so the chunks holding those rows are candidates;
2. the PageIndex nodes of the documents searched whose title is such a source (statement nodes, section nodes
   of ``structure/topics.py``, and the tree's own nodes: "Note 7 – Debt", "Liquidity and Capital Resources")
   give their pages a routing value: the source's weight (1 for an analysis's first source, then 0.6, 0.4,
   0.3), a section's pages after its first ``CONTINUED`` of it, at most ``NODE_PAGES`` pages a node; those pages
   are searched like located pages (their chunks holding a question word or a line item are read);
3. each page's relevance gets ``analysis`` (``SearchConfig.analysis``) x its routing value (``analysis`` in a
   row's ``scores``).

The nodes are read beside the locating (one Postgres query), only when the question asks for an analysis and
its scope names at most ``MAX_DOCUMENTS`` documents (a question naming its company and year names one or two);
without a scope only statement and section nodes are read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from kb_assets.structure.analyses import Analysis, analyses_asked, expansion, source_weights
from kb_assets.structure.statements import NODE_PREFIX as STATEMENT_PREFIX
from kb_assets.structure.statements import TITLE, named_statements, statement_family
from kb_assets.structure.topics import topics_of

MAX_DOCUMENTS = 20
NODE_PAGES = 3  # pages of a node that are routed to
CONTINUED = 0.6  # a section's later pages, against its first


@dataclass
class Routing:
    analyses: list[Analysis]
    weights: dict[str, float]  # source -> weight
    words: list[str]  # the line items added to the question's BM25 words
    pages: dict[tuple[str, int], float] = field(default_factory=dict)  # (document_id, page) -> routing value


def routing(question: str) -> Routing | None:
    """The analyses a question asks for, their sources' weights and the line items to look for (None: none).
    A statement the question names ("... in its income statement") is the first source of the analyses that
    read it."""
    asked = analyses_asked(question)
    if not asked:
        return None
    weights = source_weights(asked)
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
    """(document_id, page) -> routing value of the pages of the nodes that are sources of the asked analyses."""
    pages: dict[tuple[str, int], float] = {}
    for document_id, node_id, title, start, end in nodes:
        value = max((weights[s] for s in node_sources(node_id, title) if s in weights), default=0.0)
        if not value:
            continue
        statement = node_id.startswith(STATEMENT_PREFIX)
        for page in range(start, min(end, start + NODE_PAGES - 1) + 1):
            share = value if statement or page == start else value * CONTINUED
            pages[(document_id, page)] = max(pages.get((document_id, page), 0.0), share)
    return pages


def expanded(bm25_text: str, words: list[str]) -> str:
    """The question's BM25 words and the line items (each item's words once)."""
    have = set(re.findall(r"\w+", bm25_text.lower()))
    extra = [w for w in dict.fromkeys(w for item in words for w in re.findall(r"\w+", item.lower())) if w not in have]
    return " ".join([bm25_text, *extra]) if extra else bm25_text
