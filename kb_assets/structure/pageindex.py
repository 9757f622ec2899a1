"""PageIndex trees: a node per heading with its page range, under a root for the document.

Without headings, pages are grouped (10 a node) so every document still has a navigable tree.
"""

from __future__ import annotations

from kb_assets.structure.summaries import document_keywords, summarize

PAGES_PER_GROUP = 10


def build_tree(title: str, pages: list[dict]) -> list[dict]:
    """Nodes (node_id, parent_id, ordinal, title, depth, start_page, end_page, summary, keywords)."""
    pages = sorted(pages, key=lambda p: p["page_index"])
    last_page = pages[-1]["page_index"] if pages else 0
    headings = []   # (level, title, page_index, first_block_on_page)
    for page in pages:
        for position, block in enumerate(b for b in page["blocks"] if b["text"].strip()):
            if block["kind"] == "heading":
                headings.append((max(1, int(block.get("level") or 1)), block["text"].strip(),
                                 page["page_index"], position == 0))
    page_summary = {p["page_index"]: p.get("summary") or "" for p in pages}
    page_keywords = {p["page_index"]: p.get("keywords") or [] for p in pages}

    root = {"node_id": "n0", "parent_id": None, "ordinal": 0, "title": title, "depth": 0,
            "start_page": 0, "end_page": last_page}
    nodes = [root]
    if headings:
        stack = [root]
        for i, (level, heading, page_index, at_top) in enumerate(headings):
            end = last_page
            for next_level, _, next_page, next_at_top in headings[i + 1:]:
                if next_level <= level:
                    end = max(page_index, next_page - 1 if next_at_top else next_page)
                    break
            while len(stack) > 1 and stack[-1]["depth"] >= level:
                stack.pop()
            node = {"node_id": f"n{len(nodes)}", "parent_id": stack[-1]["node_id"], "ordinal": len(nodes),
                    "title": heading, "depth": stack[-1]["depth"] + 1, "start_page": page_index,
                    "end_page": end}
            nodes.append(node)
            stack.append(node)
    else:
        for start in range(0, last_page + 1, PAGES_PER_GROUP):
            end = min(last_page, start + PAGES_PER_GROUP - 1)
            nodes.append({"node_id": f"n{len(nodes)}", "parent_id": "n0", "ordinal": len(nodes),
                          "title": f"Pages {start + 1}-{end + 1}", "depth": 1, "start_page": start,
                          "end_page": end})
    for node in nodes:
        covered = range(node["start_page"], node["end_page"] + 1)
        keywords: list[str] = []
        for index in covered:
            keywords.extend(k for k in page_keywords.get(index, []) if k not in keywords)
        node["keywords"] = keywords[:8]
        node["summary"] = page_summary.get(node["start_page"], "")
    root["summary"] = catalog_summary(title, nodes)
    return nodes


def catalog_summary(title: str, nodes: list[dict]) -> str:
    """The document's catalog: its title and top-level section titles."""
    top = [n["title"] for n in nodes if n["depth"] == 1]
    text = f"{title}: " + "; ".join(top) if top else title
    return text[:400]


def summarize_pages(pages: list[dict]) -> list[dict]:
    """Add rule-based ``summary`` and ``keywords`` to page records (TF-IDF within this document)."""
    keywords = document_keywords([p["text"] for p in pages])
    for page, page_keywords in zip(pages, keywords):
        page["keywords"] = page_keywords
        page["summary"] = summarize(page["blocks"], page_keywords)
    return pages
