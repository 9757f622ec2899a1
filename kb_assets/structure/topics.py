"""Disclosure topics: what a section of a filing is about, read from its title ("Note 7 – Debt", "Item 5. Market
for Registrant's Common Equity ...", "Liquidity and Capital Resources"), and the section nodes that give a
filing's notes, items and cover page a PageIndex node where its tree has none.

``topics_of(title)`` names the topics of a title (a closed list, ``TOPICS``: the places of a 10-K, 10-Q or
earnings release that financial analyses read, beside the statements of ``statements.py``); ``analyses.py``
routes a question to them. ``section_nodes(pages, ...)`` finds, on a document's pages, the headings that
start such a section (a heading block or a line "Note 4 — Acquisitions", "NOTE 4. ACQUISITIONS", "Item 7.
Management's Discussion ...") and the cover page's table of the securities registered under Section 12(b),
as nodes with ids starting ``section-`` (chunking does not read them, as it does not read statement nodes).
A section node runs from its heading's page to the page before the next section heading (at most
``MAX_SECTION_PAGES``).
"""

from __future__ import annotations

import re

from kb_assets.lib.rows import NodeRow, PageRow
from kb_assets.structure.statements import TITLE

NODE_PREFIX = "section-"
MAX_SECTION_PAGES = 4
MAX_ITEMS = 4  # a page naming more items lists them (a table of contents the tree did not mark)
HEADING_CHARS = 120  # a line longer than this is a sentence, not a heading
# topic -> the words of a section title that name it (case-insensitive; a title may name several)
TOPICS: dict[str, str] = {
    "cover": r"securities registered pursuant to section 12\s*\(b\)|\bcover page\b",
    "business": r"\bitem\s*1\s*[.:\-\u2013\u2014]?\s*business\b|^business(?: overview)?$|^(?:our\s+)?products"
    r"(?:\s+and\s+services)?(?:\s+performance)?$|^(?:principal\s+)?products and services\b"
    r"|^overview of (?:the|our) business",
    "risk factors": r"\bitem\s*1a\b|\brisk factors\b",
    "properties": r"\bitem\s*2\s*[.:\-\u2013\u2014]?\s*properties\b",
    "legal": r"\bitem\s*3\b|legal proceedings|\blitigation\b",
    "market for equity": r"\bitem\s*5\b|market for (?:the\s+)?(?:registrant|company)|issuer purchases|stock performance"
    r"|\bdividends?\b|(?:share|stock) repurchases?",
    "mdna": r"\bitem\s*[27]\s*[.:\-\u2013\u2014]?\s*management.s discussion|management.s discussion and analysis",
    "results": r"results of operations|\bnet (?:sales|revenues?)\b|^revenues?$|operating (?:income|margin)|gross margin"
    r"|segment (?:operating )?(?:performance|results)|(?:fiscal )?year highlights|financial highlights"
    r"|operating results",
    "liquidity": r"liquidity|capital resources|sources and uses of cash|^cash flows?$|free cash flow",
    "segments": r"\bsegments?\b|geographic (?:data|information|areas)",
    "revenue": r"\brevenues?\b|disaggregat",
    "acquisitions": r"\bacquisitions?\b|business combinations?|\bmergers?\b",
    "divestitures": r"divestitures?|discontinued operations|dispositions?|held for sale",
    "debt": r"\bdebt\b|borrowings|credit (?:facilit|agreement)|notes payable|financing arrangements"
    r"|long-term obligations",
    "leases": r"\bleases?\b|\bleasing\b",
    "income taxes": r"income tax|provision for (?:income )?taxes|taxes on (?:income|earnings)",
    "restructuring": r"restructuring|severance|exit (?:costs|activities)|reorganization",
    "inventories": r"\binventor(?:y|ies)\b",
    "property": r"property,? plant|fixed assets|capital expenditures",
    "goodwill": r"goodwill|intangible",
    "impairment": r"impairment",
    "stock compensation": r"stock-based|share-based|stock compensation|equity compensation|stock (?:incentive )?plans?",
    "earnings per share": r"earnings per share|(?:net )?(?:income|earnings) per (?:common )?share",
    "commitments": r"commitments|guarantees|contingenc",
    "pensions": r"pensions?|retirement|postretirement|benefit plans",
    "equity": r"(?:share|stock)holders.? equity|capital stock|share capital|^equity$|changes in equity",
    "fair value": r"fair value|financial instruments|derivatives?|hedg",
    "market risk": r"\bitem\s*7a\b|market risk",
    "subsequent events": r"subsequent events?",
    "outlook": r"\boutlook\b|\bguidance\b",
    "employees": r"human capital|\bemployees\b",
}
_COMPILED = {topic: re.compile(pattern, re.I) for topic, pattern in TOPICS.items()}
# a line that starts a section: "Note 4 — Acquisitions", "NOTE 4. ACQUISITIONS", "4. Acquisitions" is not one
# (numbered lists), "Item 7. Management's ..."
SECTION_LINE = re.compile(
    r"^\s*(?:NOTE|Note)\s+\d{1,2}[A-Z]?\s*[.:\-\u2013\u2014]?\s+\S.{0,100}$|^\s*(?:ITEM|Item)\s+\d{1,2}[A-C]?\s*[.:\-\u2013\u2014]\s*\S.{0,110}$",
    re.M,
)
ITEM_NAMED = re.compile(r"\bitem\s+\d{1,2}[A-C]?\b", re.I)
REGISTERED = re.compile(r"securities\s+registered\s+pursuant\s+to\s+section\s+12\s*\(\s*b\s*\)", re.I)
STATEMENT = re.compile(r"\W{0,3}" + TITLE.pattern, re.I)  # a statement's title: its own node (statements.py)
CONTENTS_LINE = re.compile(r"(?:\.{2,}|\s)\d{1,3}\s*$")  # "Item 7. Management's Discussion ..... 23"


def topics_of(title: str) -> set[str]:
    """The topics a section title names ("Note 11 – Segment Information and Geographic Data": segments)."""
    flat = " ".join(title.split()).strip(" .:-\u2013\u2014")
    return {topic for topic, pattern in _COMPILED.items() if pattern.search(flat)}


def _headings(page: PageRow) -> list[str]:
    """A page's section headings: its heading blocks that name a topic, and its lines that start a note or an item
    (none on a page that names more than ``MAX_ITEMS`` items)."""
    text = page.get("text") or ""
    if len(ITEM_NAMED.findall(text)) > MAX_ITEMS:
        return []
    items = [" ".join(m.group(0).split()) for m in SECTION_LINE.finditer(text)]
    found = [
        " ".join(block["text"].split())
        for block in page.get("blocks") or []
        if block.get("kind") == "heading" and 2 < len(block["text"].strip()) <= HEADING_CHARS
    ]
    found += items
    return [h for h in dict.fromkeys(found) if topics_of(h) and not CONTENTS_LINE.search(h) and not STATEMENT.match(h)]


def section_nodes(
    pages: list[PageRow],
    root_id: str,
    first_ordinal: int,
    skip: set[int],
    stops: frozenset[int] | set[int] = frozenset(),
) -> list[NodeRow]:
    """Section nodes of a document (``pages``: records with ``page_index``, ``text`` and ``blocks``; ``skip``:
    navigation pages, whose lines list sections rather than start them), children of ``root_id``, numbered
    from ``first_ordinal``: the cover page's registered securities and every heading that names a topic (a
    statement's title is the statement's node). A section ends before the next one or a page of ``stops``
    (the statements' first pages)."""
    starts: list[tuple[int, str]] = []
    for page in sorted(pages, key=lambda p: p["page_index"]):
        if page["page_index"] in skip:
            continue
        if not any(title.startswith("Cover page") for _, title in starts) and REGISTERED.search(page.get("text") or ""):
            starts.append((page["page_index"], "Cover page: securities registered pursuant to Section 12(b)"))
        starts += [(page["page_index"], heading) for heading in _headings(page)]
    last = max((p["page_index"] for p in pages), default=0)
    nodes = []
    for number, (start, title) in enumerate(starts):
        following = sorted({page for page, _ in starts[number + 1 :] if page > start} | {p for p in stops if p > start})
        end = min((following[0] - 1) if following else last, start + MAX_SECTION_PAGES - 1)
        if title.startswith("Cover page"):
            end = start
        nodes.append(
            {
                "node_id": f"{NODE_PREFIX}{start}-{number}",
                "parent_id": root_id,
                "ordinal": first_ordinal + number,
                "title": title,
                "depth": 1,
                "start_page": start,
                "end_page": max(start, end),
                "summary": f"{title}: " + ", ".join(sorted(topics_of(title))),
                "keywords": sorted(topics_of(title)),
            }
        )
    return nodes


def is_section_node(node: dict) -> bool:
    return str(node.get("node_id", "")).startswith(NODE_PREFIX)
