"""Statement nodes: the pages a statement or table titles at its top ("Consolidated Statements of Cash
Flows", "Consolidated Balance Sheets", "Income Statement") as PageIndex nodes of their own, whether or not
an outline or a printed table of contents lists them.

A page is a statement page when its start holds such a title (capitalised, not inside a sentence: not
after a word such as "the" or "in") and the page is mostly figures
(at least ``MIN_NUMBERS`` numbers: a table of contents or a paragraph that names the statement is not
one); the pages after it that continue it ("(continued)", or the same title again) join its node. Each
node's keywords carry the names people ask for it by (``SYNONYMS``: "cash flow statement", "balance
sheet", "income statement", ...), so a question in its own words meets the node when pages are located
(``Catalog.locate_pages``). The nodes are children of the root, after the tree's own nodes; their ids
start with ``statement-``, and chunking does not read them (a chunk's section stays the tree's own), so
adding them re-embeds nothing.
"""

from __future__ import annotations

import re

from kb_assets.lib.rows import NodeRow, PageRow

NODE_PREFIX = "statement-"
HEAD_CHARS = 400  # the start of a page where a statement's title is looked for
MIN_NUMBERS = 25  # numbers on a page for it to be a statement (a table of line items by period)
# a statement's printed title -> the names it is asked for by (generic accounting statements)
SYNONYMS = {
    "cash flows": ["cash flow statement", "statement of cash flows", "cash flows", "cash flow"],
    "balance sheet": ["balance sheet", "statement of financial position", "financial position"],
    "financial position": ["balance sheet", "statement of financial position", "financial position"],
    "operations": ["income statement", "statement of operations", "profit and loss", "p&l", "earnings"],
    "income": ["income statement", "statement of income", "profit and loss", "p&l", "earnings"],
    "earnings": ["income statement", "statement of earnings", "profit and loss", "p&l"],
    "comprehensive income": ["statement of comprehensive income", "comprehensive income"],
    "equity": ["statement of shareholders' equity", "stockholders' equity", "shareholders' equity", "equity"],
}
TITLE = re.compile(
    r"\b((?:condensed\s+)?(?:consolidated\s+)?(?:condensed\s+)?"
    r"(?:statements?\s+of\s+(?:consolidated\s+)?(?:comprehensive\s+income|cash\s+flows?|operations|income|earnings"
    r"|financial\s+position|(?:changes\s+in\s+)?(?:share|stock)holders['\u2019]?\s+equity|equity)"
    r"|balance\s+sheets?|income\s+statements?|cash\s+flows?\s+statements?))\b(?!\s*(?:\.{2,}|\d{1,3}\b))",
    re.I,
)
# what comes before a statement's name inside a sentence ("... in the Consolidated Balance Sheets")
SENTENCE_BEFORE = re.compile(
    r"(?:[,;:]|\b(?:the|our|its|their|these|this|in|on|to|of|and|or|see|from|within|with|at|by|for|as|"
    r"accompanying|following|related|audited|unaudited))\s*\Z",
    re.I,
)
NUMBER = re.compile(r"\(?\$?\s?\d[\d,]*(?:\.\d+)?\)?")


def statement_title(page_text: str) -> str | None:
    """The statement a page's first lines title ("Consolidated Statements of Cash Flows"), if the page is
    mostly figures; None otherwise."""
    if len(NUMBER.findall(page_text)) < MIN_NUMBERS:
        return None
    head = "\n".join(" ".join(line.split()) for line in page_text[:HEAD_CHARS].splitlines())
    for match in TITLE.finditer(head):  # not a contents line "... 45" (the pattern), nor inside a sentence
        if match.group(1)[0].isupper() and not SENTENCE_BEFORE.search(head[: match.start()]):
            return " ".join(match.group(1).split()).title().replace(" Of ", " of ")
    return None


def _kind(title: str) -> str:
    low = title.lower()
    for key in ("comprehensive income", "cash flow", "balance sheet", "financial position", "equity"):
        if key in low:
            return "cash flows" if key == "cash flow" else key
    for key in ("operations", "income", "earnings"):
        if key in low:
            return key
    return "income"


def statement_nodes(pages: list[PageRow], root_id: str, first_ordinal: int, skip: set[int]) -> list[NodeRow]:
    """Nodes for the statement pages of a document (``pages``: records with ``page_index`` and ``text``;
    ``skip``: navigation pages), children of ``root_id``, numbered from ``first_ordinal``."""
    nodes: list[NodeRow] = []
    for page in sorted(pages, key=lambda p: p["page_index"]):
        if page["page_index"] in skip:
            continue
        title = statement_title(page["text"] or "")
        if title is None:
            continue
        last = nodes[-1] if nodes else None
        if last and last["end_page"] == page["page_index"] - 1 and _kind(last["title"]) == _kind(title):
            last["end_page"] = page["page_index"]  # the statement continues on this page
            continue
        kind = _kind(title)
        words = sorted({w for w in re.findall(r"[a-z]+", title.lower()) if len(w) > 2})
        nodes.append(
            {
                "node_id": f"{NODE_PREFIX}{page['page_index']}",
                "parent_id": root_id,
                "ordinal": first_ordinal + len(nodes),
                "title": title,
                "depth": 1,
                "start_page": page["page_index"],
                "end_page": page["page_index"],
                "summary": f"{title}: " + ", ".join(SYNONYMS[kind]),
                "keywords": sorted(set(SYNONYMS[kind]) | set(words)),
            }
        )
    return nodes


# a statement as a question names it in its own words ("per the cash flow statement", "using the balance sheet")
NAMED = re.compile(
    r"\b(balance\s+sheets?|(?:income|cash[\s-]+flows?|earnings|operations)\s+statements?|profit\s+and\s+loss|p\s*&\s*l"
    r"|statements?\s+of\s+(?:consolidated\s+)?(?:comprehensive\s+income|cash\s+flows?|operations|income|earnings"
    r"|financial\s+position|(?:changes\s+in\s+)?(?:share|stock)holders['\u2019]?\s+equity|equity))\b",
    re.I,
)
FAMILIES = {"operations": "income", "earnings": "income", "financial position": "balance sheet"}


def statement_family(title: str) -> str:
    """The statement a title or a name stands for: income, balance sheet, cash flows, comprehensive income
    or equity ("Consolidated Statements of Operations" and "P&L" are both the income statement)."""
    low = " ".join(title.lower().replace("-", " ").split())
    if re.search(r"profit and loss|p\s*&\s*l", low):
        return "income"
    kind = _kind(low)
    return FAMILIES.get(kind, kind)


def named_statements(question: str) -> set[str]:
    """The statements (``statement_family``) a question names: "per its statement of cash flows" names the
    cash flows; "cash flow" alone or "earnings" alone name none (a figure, not where to read it)."""
    return {statement_family(match.group(1)) for match in NAMED.finditer(question)}


def is_statement_node(node: NodeRow) -> bool:
    return str(node.get("node_id", "")).startswith(NODE_PREFIX)
