"""pageindex_trees: the PageIndex tree of a document's pages (titles, depth, page ranges, summaries)."""

from __future__ import annotations

from kb_assets.lib.text import sha256_text
from kb_assets.pipeline.step_results import BuiltTree
from kb_assets.pipeline.steps.common import current, version_of
from kb_assets.pipeline.versions import after
from kb_assets.stores.catalog import Catalog, Document
from kb_assets.stores.objects import ObjectStore
from kb_assets.structure.metadata import read_metadata
from kb_assets.structure.outline import read_outline, read_pdf_info
from kb_assets.structure.pageindex import build_document_tree
from kb_assets.structure.statements import is_statement_node, statement_nodes
from kb_assets.structure.summaries import (
    RULES_SUMMARIZER,
    PageSummarizer,
    summarize_document,
)
from kb_assets.structure.topics import is_section_node, section_nodes

FILING_KINDS = ("annual report", "quarterly report", "current report", "earnings release")


# pageindex_trees -----------------------------------------------------------------------------
def build_pageindex(
    doc: Document,
    catalog: Catalog,
    run_id: str,
    store: ObjectStore | None = None,
    summarizer: PageSummarizer | None = None,
    version: str = "1",
) -> BuiltTree:
    """The document's PageIndex tree, its page summaries/keywords and its table-of-contents pages.

    The tree comes from the PDF outline of the stored original (``store``) when it has one, else from
    a printed table of contents, headings or page groups; statement pages get nodes of their own
    (``structure.statements``), and so do a filing's sections that hold what analyses read
    (``structure.topics``: notes, items, the cover's registered securities). The document's metadata is read
    from its first pages and PDF information (``structure.metadata``). Summaries are cached by page-text hash; the
    optional ``summarizer`` is best-effort (its failure leaves rule-based summaries, never a failure).
    """
    doc_version = version_of(doc)
    nodes = catalog.read_nodes(doc.document_id)
    if nodes and all(n["version"] == doc_version for n in nodes) and current(doc, "pageindex_trees", version):
        return BuiltTree(nodes=len(nodes), skipped=True)
    pages = catalog.read_pages(doc.document_id)
    toc_before = catalog.toc_pages(doc.document_id)
    title = doc.title or doc.source_path
    summarizers = [RULES_SUMMARIZER] + ([summarizer.summarizer_id] if summarizer is not None else [])
    cached = catalog.cached_summaries([sha256_text(p["text"]) for p in pages], summarizers)
    summaries = summarize_document(pages, cached, title, summarizer)
    for page, summary in zip(pages, summaries.pages, strict=False):
        page.update(summary=summary["summary"], keywords=summary["keywords"])
    original = stored_pdf(doc, store)
    tree = build_document_tree(title, pages, read_outline(original) if original else [])
    navigation = set(tree.navigation_pages)
    statements = statement_nodes(pages, tree.nodes[0]["node_id"], len(tree.nodes), navigation)
    tree.nodes += statements
    metadata = read_metadata([p["text"] for p in pages], read_pdf_info(original) if original else {})
    if metadata.get("form") or metadata.get("kind") in FILING_KINDS:  # a filing's notes, items and cover page
        stops = {node["start_page"] for node in statements}
        tree.nodes += section_nodes(pages, tree.nodes[0]["node_id"], len(tree.nodes), navigation, stops)
    # chunks read the tree's titles and page ranges and the table-of-contents pages, not the summaries
    same_structure = navigation == toc_before and tree_shape(nodes, doc_version) == tree_shape(tree.nodes, doc_version)
    with catalog.connect() as conn:
        catalog.store_summaries(conn, summaries.new_cache)
        catalog.update_page_structure(
            conn, doc.document_id, [{**s, "is_toc": s["page_index"] in navigation} for s in summaries.pages]
        )
        catalog.replace_nodes(conn, doc.document_id, doc_version, tree.nodes, run_id, version)
        catalog.store_metadata(conn, doc.document_id, metadata)
        catalog.record_step(
            conn,
            doc.document_id,
            "pageindex_trees",
            version,
            invalidate=() if same_structure else after("pageindex_trees"),
        )
    return BuiltTree(
        nodes=len(tree.nodes),
        depth=max(n["depth"] for n in tree.nodes),
        source=tree.source,
        toc_pages=len(navigation),
        summaries_computed=sum(map(len, summaries.new_cache.values())),
        warnings=tuple(summaries.warnings),
        unchanged=same_structure,
    )


def tree_shape(nodes: list[dict], version: str) -> list[tuple] | None:
    """What chunking reads of a tree (None for a tree of another file version): not its statement or section nodes."""
    if any(n.get("version", version) != version for n in nodes):
        return None
    return sorted(
        (n["node_id"], n["parent_id"], n["ordinal"], n["title"], n["depth"], n["start_page"], n["end_page"])
        for n in nodes
        if not is_statement_node(n) and not is_section_node(n)
    )


def stored_pdf(doc: Document, store: ObjectStore | None) -> bytes | None:
    """The bytes of a stored PDF original (None for other formats or when it cannot be read)."""
    if store is None or not doc.object_key or not doc.object_key.lower().endswith(".pdf"):
        return None
    try:
        return store.get(doc.object_key)
    except OSError:
        return None


def pdf_outline(doc: Document, store: ObjectStore | None) -> list[tuple[int, str, int]]:
    """The bookmarks of a stored PDF original ([] for other formats or when it cannot be read)."""
    original = stored_pdf(doc, store)
    return read_outline(original) if original else []
