"""PageIndex trees (outline, printed table of contents, headings, page groups), table-of-contents
pages, page summaries cached by page-text hash and the optional summarizer endpoint."""

from __future__ import annotations

from pathlib import Path

import pytest

from kb_assets.structure.endpoint import EndpointSummarizer, summarizer_from_settings
from kb_assets.structure.outline import read_outline
from kb_assets.structure.pageindex import build_document_tree
from kb_assets.structure.summaries import RULES_SUMMARIZER, SUMMARY_CHARS, summarize_document
from kb_assets.structure.toc import is_navigation_page
from kb_assets_tests.chat_server import ChatServer
from kb_assets_tests.corpora import EXAMPLE_CORPUS as CORPUS


def page(index: int, blocks: list[tuple[str, str] | tuple[str, str, int]], label: str | None = None) -> dict:
    made = [{"kind": b[0], "text": b[1], **({"level": b[2]} if len(b) > 2 else {})} for b in blocks]
    return {"page_index": index, "page_label": label, "blocks": made, "text": "\n\n".join(b["text"] for b in made)}


BODY = "The agent keeps a local cache of credentials and renews them an hour before they expire."

TOC = "\n".join(
    [
        "1 Getting Started . . . . . . . . . . . . . . . . . . 1",
        "1.1 Installing the agent . . . . . . . . . . . . . . . 1",
        "1.2 First login . . . . . . . . . . . . . . . . . . . . 2",
        "2 Daily Operations . . . . . . . . . . . . . . . . . . 3",
        "2.1 Rotating keys . . . . . . . . . . . . . . . . . . . 3",
        "3 Troubleshooting . . . . . . . . . . . . . . . . . . . 4",
    ]
)


def field_guide(labels: bool) -> list[dict]:
    """A title page, a printed table of contents, then four numbered pages (printed 1-4)."""
    label = (lambda n: str(n)) if labels else (lambda n: None)
    return [
        page(
            0,
            [("heading", "Field Guide", 1), ("paragraph", "Operations handbook, second edition.")],
            "i" if labels else None,
        ),
        page(1, [("paragraph", "Contents"), ("list", TOC)], "ii" if labels else None),
        page(
            2,
            [
                ("paragraph", "Getting Started"),
                ("paragraph", BODY),
                ("paragraph", "Installing the agent"),
                ("paragraph", "Download the package and run the installer with administrator rights."),
            ],
            label(1),
        ),
        page(
            3, [("paragraph", "First login"), ("paragraph", "Sign in with the one-time code sent by email.")], label(2)
        ),
        page(
            4,
            [
                ("paragraph", "Daily Operations"),
                ("paragraph", "Rotating keys"),
                ("paragraph", "Keys are rotated every 30 days by the scheduler."),
            ],
            label(3),
        ),
        page(
            5,
            [("paragraph", "Troubleshooting"), ("paragraph", "Most failures come from an expired certificate.")],
            label(4),
        ),
    ]


def spans(nodes: list[dict]) -> dict[str, tuple[int, int, int]]:
    return {n["title"]: (n["depth"], n["start_page"], n["end_page"]) for n in nodes}


def test_outline_of_a_pdf_gives_the_tree():
    outline = read_outline((CORPUS / "platform-handbook.pdf").read_bytes())
    assert outline[:3] == [(1, "1 Overview", 0), (1, "2 Storage Tiers", 1), (2, "2.1 Object Storage", 1)]
    assert len(outline) == 11
    pages = [
        page(i, [("heading", t, lvl) for lvl, t, p in outline if p == i] + [("paragraph", BODY)]) for i in range(6)
    ]

    tree = build_document_tree("Northwind Data Platform Handbook", pages, outline)

    assert tree.source == "outline"
    got = spans(tree.nodes)
    assert got["Northwind Data Platform Handbook"] == (0, 0, 5)
    assert got["2 Storage Tiers"] == (1, 1, 1)  # the next top-level section starts page 2 at the top
    assert got["2.2 Archive Tier"] == (2, 1, 1)
    assert got["6 Change Management"] == (1, 5, 5)
    assert len(tree.nodes) == 12
    root = tree.nodes[0]
    assert root["summary"].startswith("Northwind Data Platform Handbook: 1 Overview; 2 Storage Tiers")
    node = next(n for n in tree.nodes if n["title"] == "4.1 Retention Schedule")
    assert node["summary"] == f"4.1 Retention Schedule: {BODY}"
    assert node["parent_id"] == next(n["node_id"] for n in tree.nodes if n["title"] == "4 Retention Policy")


def test_a_pdf_without_bookmarks_has_no_outline(tmp_path):
    from reportlab.pdfgen import canvas

    path = tmp_path / "plain.pdf"
    pdf = canvas.Canvas(str(path))
    pdf.drawString(72, 720, "No bookmarks here.")
    pdf.save()
    assert read_outline(path.read_bytes()) == []
    assert read_outline(b"not a pdf") == []


@pytest.mark.parametrize("labels", [True, False], ids=["by-page-labels", "by-title-search"])
def test_printed_table_of_contents_gives_the_tree_on_physical_pages(labels):
    pages = field_guide(labels)

    tree = build_document_tree("Field Guide", pages, outline=None)

    assert tree.source == "printed-toc"
    assert tree.navigation_pages == [1] and tree.toc_pages == [1]
    assert spans(tree.nodes) == {
        "Field Guide": (0, 0, 5),
        "Getting Started": (1, 2, 3),  # printed page 1 is the third physical page
        "Installing the agent": (2, 2, 2),
        "First login": (2, 3, 3),
        "Daily Operations": (1, 4, 4),
        "Rotating keys": (2, 4, 4),
        "Troubleshooting": (1, 5, 5),
    }
    assert tree.nodes[0]["summary"] == "Field Guide: Getting Started; Daily Operations; Troubleshooting"


def test_outline_wins_over_printed_toc_and_headings_win_over_page_groups():
    pages = field_guide(labels=True)
    outline = [(1, "Getting Started", 2), (1, "Troubleshooting", 5)]
    assert build_document_tree("Field Guide", pages, outline).source == "outline"

    plain = [page(i, [("paragraph", BODY)]) for i in range(25)]
    plain[3]["blocks"].insert(0, {"kind": "heading", "text": "Setup", "level": 1})
    assert spans(build_document_tree("Notes", plain).nodes)["Setup"] == (1, 3, 24)
    del plain[3]["blocks"][0]
    tree = build_document_tree("Notes", plain)
    assert tree.source == "page-groups"
    assert [(n["title"], n["start_page"], n["end_page"]) for n in tree.nodes[1:]] == [
        ("Pages 1-10", 0, 9),
        ("Pages 11-20", 10, 19),
        ("Pages 21-25", 20, 24),
    ]


def test_navigation_pages_are_recognized_and_body_pages_are_not():
    assert is_navigation_page("Contents\n" + TOC)
    assert is_navigation_page("Index\nscan . . . . . . . . . 3, 11, 27\nseek . . . . . . . . . 29\nsink . . . . . . 30")
    assert is_navigation_page(
        "Contents\n\n1 概述 1\n\n1.1 部分历史 . . . . . . . . 1\n1.2 结构 . . . . . . 2\n2 安装 . . . . . 3"
    )
    assert not is_navigation_page(BODY + "\n" + "See section 2.1 on page 3 for the details of key rotation.")
    assert not is_navigation_page("Contents")


# -- page summaries --------------------------------------------------------------------------
def test_page_summaries_are_short_and_cached_by_page_text_hash():
    pages = field_guide(labels=True) + [
        page(
            6, [("heading", "备份策略", 1), ("paragraph", "数据备份保留三十五天，归档数据在九十天后转入冷存储。" * 12)]
        )
    ]
    first = summarize_document(pages, {}, "Field Guide")
    assert all(len(p["summary"]) <= SUMMARY_CHARS for p in first.pages)
    assert first.pages[6]["summary"].startswith("备份策略: 数据备份保留三十五天")
    assert any(k in first.pages[6]["keywords"] for k in ("备份", "保留", "归档", "数据"))  # jieba words
    assert len(first.new_cache[RULES_SUMMARIZER]) == len(pages)

    pages[3] = page(3, [("paragraph", "First login"), ("paragraph", "Sign in with a hardware key.")], "2")
    second = summarize_document(pages, first.new_cache, "Field Guide")

    assert list(second.new_cache[RULES_SUMMARIZER]) == [second.pages[3]["text_sha"]]  # only the changed page
    assert [p["summary"] for i, p in enumerate(second.pages) if i != 3] == [
        p["summary"] for i, p in enumerate(first.pages) if i != 3
    ]


def test_summarizer_is_skipped_when_not_configured():
    from kb_assets.settings import Settings

    settings = Settings.from_env({"KB_HOME": "/tmp/unused"})
    assert summarizer_from_settings(settings.summarizer.url, settings.summarizer.model) is None
    result = summarize_document(field_guide(labels=True), {}, "Field Guide", None)
    assert result.warnings == [] and {p["summary_source"] for p in result.pages} == {RULES_SUMMARIZER}


def test_a_failing_summarizer_endpoint_never_blocks_and_leaves_rule_based_summaries():
    pages = field_guide(labels=True)
    with ChatServer(500) as endpoint:
        summarizer = EndpointSummarizer(url=endpoint.url, model="tiny", api_key="secret", timeout_seconds=5)
        result = summarize_document(pages, {}, "Field Guide", summarizer)

    assert len(endpoint.requests) == 1  # the first failure stops further calls
    assert endpoint.requests[0]["path"] == "/v1/chat/completions"
    assert endpoint.requests[0]["auth"] == "Bearer secret"
    assert {p["summary_source"] for p in result.pages} == {RULES_SUMMARIZER}
    assert result.pages == summarize_document(pages, {}, "Field Guide").pages
    assert "HTTP 500" in result.warnings[0]
    assert "llm:tiny" not in result.new_cache  # failures are never cached


def test_a_working_summarizer_endpoint_writes_summaries_that_are_cached():
    pages = field_guide(labels=True)[:2]
    answer = {"choices": [{"message": {"content": "  A field guide for\noperators.  "}}]}
    with ChatServer(200, answer) as endpoint:
        first = summarize_document(pages, {}, "Field Guide", EndpointSummarizer(url=endpoint.url, model="tiny"))
        again = summarize_document(
            pages, first.new_cache, "Field Guide", EndpointSummarizer(url=endpoint.url, model="tiny")
        )
    assert [p["summary"] for p in first.pages] == ["A field guide for operators."] * 2
    assert len(endpoint.requests) == 2  # once per page; the second run reads the cache
    assert again.pages == first.pages and again.new_cache == {}


# -- through the pipeline --------------------------------------------------------------------
def test_pipeline_tree_of_the_handbook_pdf_comes_from_its_outline(handbook, catalog):
    doc = next(d for d in catalog.list_documents(["handbook"]) if d.source_path == "platform-handbook.pdf")
    nodes = catalog.read_nodes(doc.document_id)
    expected = read_outline((CORPUS / "platform-handbook.pdf").read_bytes())
    assert [(n["depth"], n["title"], n["start_page"]) for n in nodes[1:]] == expected
    assert nodes[0]["summary"].startswith("Northwind Data Platform Handbook: 1 Overview;")
    assert catalog.toc_pages(doc.document_id) == set()
    pages = catalog.read_pages(doc.document_id)
    assert all(p["summary"] and len(p["summary"]) <= SUMMARY_CHARS for p in pages)


def _field_guide_pdf(path: Path) -> None:
    """A PDF without bookmarks: title page, printed contents, four pages numbered 1-4 in the footer."""
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    pdf = canvas.Canvas(str(path), pagesize=A4, invariant=1)
    pdf.setTitle("Field Guide")

    def lines(items, top=760):
        y = top
        for size, text in items:
            pdf.setFont("Helvetica-Bold" if size > 11 else "Helvetica", size)
            pdf.drawString(72, y, text)
            y -= size * 2.2

    lines([(24, "Field Guide"), (11, "Operations handbook, second edition.")])
    pdf.showPage()
    lines([(16, "Contents")] + [(11, line) for line in TOC.split("\n")])
    pdf.showPage()
    sections = [
        [
            (16, "1 Getting Started"),
            (11, BODY),
            (13, "1.1 Installing the agent"),
            (11, "Download the package and run the installer with administrator rights."),
        ],
        [(13, "1.2 First login"), (11, "Sign in with the one-time code sent by email.")],
        [
            (16, "2 Daily Operations"),
            (13, "2.1 Rotating keys"),
            (11, "Keys are rotated every 30 days by the scheduler."),
        ],
        [(16, "3 Troubleshooting"), (11, "Most failures come from an expired certificate.")],
    ]
    for number, section in enumerate(sections, 1):
        lines(section)
        pdf.setFont("Helvetica", 9)
        pdf.drawString(290, 30, str(number))
        pdf.showPage()
    pdf.save()


def test_pipeline_printed_toc_pdf_gets_its_tree_and_a_marked_toc_page(settings, tmp_path, catalog, lake, handbook):
    from kb_assets.launch.ingest import ingest

    folder = tmp_path / "guides"
    folder.mkdir()
    _field_guide_pdf(folder / "field-guide.pdf")

    report = ingest([folder], "guides", settings)

    assert not report.failures, report.failures
    doc = catalog.list_documents(["guides"])[0]
    assert catalog.toc_pages(doc.document_id) == {1}
    nodes = {n["title"]: (n["depth"], n["start_page"], n["end_page"]) for n in catalog.read_nodes(doc.document_id)}
    assert nodes["Getting Started"] == (1, 2, 3)
    assert nodes["First login"] == (2, 3, 3)
    assert nodes["Troubleshooting"] == (1, 5, 5)
    chunks = lake.read("chunks", doc.document_id)
    assert set(chunks.filter(page_index=1)["kind"].to_list()) == {"toc"}
