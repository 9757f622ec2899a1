"""PageIndex trees: a node per section with its page range, under a root for the document.

Where the sections come from, first that applies:

1. ``outline``: the PDF's bookmarks (level, title, page), read from the stored original;
2. ``printed-toc``: the printed table of contents found in the page texts, its printed page numbers
   mapped to physical pages (see ``toc.py``);
3. ``headings``: the heading blocks of the parsed pages and their levels;
4. ``page-groups``: 10 pages a node, so every document still has a navigable tree.

A node ends where the next node of the same or a shallower level starts (on the page before it when
that section starts at the top of its page). A node's summary is its title and the first meaningful
paragraph of its section; its keywords are the most frequent page keywords of its range. The root's
summary is the document's catalog: its title and top-level section titles.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from kb_assets.lib.rows import NodeRow, PageRow
from kb_assets.lib.text import normalize_ws
from kb_assets.structure.summaries import (
    SUMMARY_CHARS,
    clip,
    document_keywords,
    summarize,
)
from kb_assets.structure.toc import (
    map_entries,
    navigation_pages,
    printed_toc_pages,
    toc_entries,
)

PAGES_PER_GROUP = 10
MIN_OUTLINE_ENTRIES = 2
MIN_TOC_ENTRIES = 3
CATALOG_CHARS = 400


@dataclass
class DocumentTree:
    nodes: list[NodeRow]  # node_id, parent_id, ordinal, title, depth, start_page, end_page, summary, keywords
    source: str  # "outline" | "printed-toc" | "headings" | "page-groups"
    navigation_pages: list[int] = field(default_factory=list)  # tables of contents, lists of tables, indexes
    toc_pages: list[int] = field(default_factory=list)  # the printed table of contents


def build_document_tree(
    title: str, pages: list[PageRow], outline: list[tuple[int, str, int]] | None = None
) -> DocumentTree:
    """The tree of a document's pages (page records with ``summary``/``keywords`` where known)."""
    pages = sorted(pages, key=lambda p: p["page_index"])
    navigation = navigation_pages(pages)
    toc = printed_toc_pages(pages, navigation)
    entries: list[tuple[int, str, int]] = []
    source = "page-groups"
    if outline and len(outline) >= MIN_OUTLINE_ENTRIES:
        entries, source = list(outline), "outline"
    if not entries and toc:
        mapped = map_entries(toc_entries(pages, toc), pages, toc)
        if len(mapped) >= MIN_TOC_ENTRIES:
            entries, source = mapped, "printed-toc"
    if not entries:
        skip = set(navigation)
        entries = [
            (max(1, int(b.get("level") or 1)), b["text"].strip(), p["page_index"])
            for p in pages
            if p["page_index"] not in skip
            for b in p["blocks"]
            if b["kind"] == "heading" and b["text"].strip()
        ]
        source = "headings" if entries else source
    nodes = _nodes_from_entries(title, entries, pages) if entries else _page_groups(title, pages)
    _describe(title, nodes, pages)
    return DocumentTree(nodes=nodes, source=source, navigation_pages=navigation, toc_pages=toc)


def build_tree(title: str, pages: list[PageRow], outline: list[tuple[int, str, int]] | None = None) -> list[NodeRow]:
    """Nodes (node_id, parent_id, ordinal, title, depth, start_page, end_page, summary, keywords)."""
    return build_document_tree(title, pages, outline).nodes


def _last_page(pages: list[PageRow]) -> int:
    return pages[-1]["page_index"] if pages else 0


def _root(title: str, pages: list[PageRow]) -> NodeRow:
    return {
        "node_id": "n0",
        "parent_id": None,
        "ordinal": 0,
        "title": title,
        "depth": 0,
        "start_page": 0,
        "end_page": _last_page(pages),
    }


def _first_text(page: PageRow | None) -> str:
    if page is None:
        return ""
    block = next((b for b in page["blocks"] if b["text"].strip()), None)
    return normalize_ws(block["text"]).lower() if block else ""


def _starts_page(title: str, page: PageRow | None) -> bool:
    """Whether a section starts at the top of its page (its title is the page's first text)."""
    first, wanted = _first_text(page), normalize_ws(title).lower()
    return bool(first and wanted) and (wanted in first or first in wanted)


def _nodes_from_entries(title: str, entries: list[tuple[int, str, int]], pages: list[PageRow]) -> list[NodeRow]:
    by_index = {p["page_index"]: p for p in pages}
    last_page = _last_page(pages)
    at_top = [_starts_page(heading, by_index.get(page_index)) for _, heading, page_index in entries]
    root = {**_root(title, pages), "level": 0}
    nodes, stack = [root], [root]
    for i, (level, heading, page_index) in enumerate(entries):
        page_index = min(max(page_index, 0), last_page)
        end = last_page
        for j in range(i + 1, len(entries)):
            if entries[j][0] <= level:
                end = entries[j][2] - 1 if at_top[j] else entries[j][2]
                break
        while len(stack) > 1 and stack[-1]["level"] >= level:
            stack.pop()
        node = {
            "node_id": f"n{len(nodes)}",
            "parent_id": stack[-1]["node_id"],
            "ordinal": len(nodes),
            "title": heading,
            "depth": stack[-1]["depth"] + 1,
            "level": level,
            "start_page": page_index,
            "end_page": min(last_page, max(page_index, end)),
        }
        nodes.append(node)
        stack.append(node)
    for node in nodes:
        del node["level"]
    return nodes


def _page_groups(title: str, pages: list[PageRow]) -> list[NodeRow]:
    nodes = [_root(title, pages)]
    last_page = _last_page(pages)
    for start in range(0, last_page + 1, PAGES_PER_GROUP):
        end = min(last_page, start + PAGES_PER_GROUP - 1)
        nodes.append(
            {
                "node_id": f"n{len(nodes)}",
                "parent_id": "n0",
                "ordinal": len(nodes),
                "title": f"Pages {start + 1}-{end + 1}",
                "depth": 1,
                "start_page": start,
                "end_page": end,
            }
        )
    return nodes


def _describe(title: str, nodes: list[NodeRow], pages: list[PageRow]) -> None:
    """Summaries and keywords of the nodes (the root's summary is the catalog summary)."""
    by_index = {p["page_index"]: p for p in pages}
    page_keywords = {p["page_index"]: p.get("keywords") for p in pages}
    if any(words is None for words in page_keywords.values()):  # pages not summarized yet
        computed = document_keywords([p["text"] for p in pages])
        page_keywords = {
            p["page_index"]: words if words is not None else computed[i]
            for i, (p, words) in enumerate(zip(pages, page_keywords.values(), strict=False))
        }
    for node in nodes:
        counts: Counter[str] = Counter()
        first_seen: dict[str, int] = {}
        for index in range(node["start_page"], node["end_page"] + 1):
            for rank, word in enumerate(page_keywords.get(index) or []):
                counts[word] += 1
                first_seen.setdefault(word, index * 100 + rank)
        node["keywords"] = sorted(counts, key=lambda w: (-counts[w], first_seen[w]))[:8]
        if node["depth"] > 0:
            node["summary"] = section_summary(node, by_index)
    nodes[0]["summary"] = catalog_summary(title, nodes)


def section_summary(node: NodeRow, by_index: dict[int, PageRow]) -> str:
    """The node's title and the first meaningful paragraph after its heading, within its pages."""
    wanted = normalize_ws(node["title"]).lower()
    paragraph = ""
    found = done = False
    for index in range(node["start_page"], min(node["end_page"], node["start_page"] + 1) + 1):
        for block in (by_index.get(index) or {}).get("blocks", []):
            text = normalize_ws(block["text"])
            if not found:
                found = (
                    block["kind"] == "heading" and bool(wanted) and (wanted in text.lower() or text.lower() in wanted)
                )
            elif block["kind"] == "heading":
                done = True
            elif block["kind"] in ("paragraph", "list") and len(text) > 40:
                paragraph, done = text, True
            if done:
                break
        if done:
            break
    if not paragraph:
        start = by_index.get(node["start_page"])
        page_summary = (start or {}).get("summary") or (summarize(start["blocks"], []) if start else "")
        return clip(page_summary, SUMMARY_CHARS)
    return clip(f"{node['title']}: {paragraph}", SUMMARY_CHARS)


def catalog_summary(title: str, nodes: list[NodeRow]) -> str:
    """The document's catalog: its title and top-level section titles."""
    top = [n["title"] for n in nodes if n["depth"] == 1]
    text = f"{title}: " + "; ".join(top) if top else title
    return clip(text, CATALOG_CHARS)
