"""What the command line prints for a person (issue 54): a passage's tables in aligned columns (a compact row
a line when too wide), the score a result is ranked by named as such, a document's kind labelled, ``docs``
without ``None`` for what a failed document lacks, and the ingest summary counting a failed file apart."""

from __future__ import annotations

import re

from click.testing import CliRunner

from kb_assets.cli.render import labelled, passage_lines

TABLE = (
    "The table below.\n\n| Data class | Retention |\n|---|---:|\n| Raw event streams | 30 days |\n| Audit logs | 400 |"
)


def kb_assets(*args: str):
    from kb_assets.cli import main

    return CliRunner().invoke(main, list(args))


def test_a_passages_table_prints_as_aligned_columns_and_compact_rows_when_too_wide():
    lines = passage_lines(TABLE)
    assert lines == [
        "The table below.",
        "Data class         Retention",
        "-----------------  ---------",
        "Raw event streams  30 days",
        "Audit logs               400",
    ]
    assert passage_lines(TABLE, width=20)[-2:] == ["Raw event streams · 30 days", "Audit logs · 400"]
    assert passage_lines("A line\nrunning on.\n\nNext.") == ["A line running on.", "Next."]
    assert passage_lines("| a \\| b | c |") == ["a | b  c"]  # an escaped pipe stays in its cell


def test_a_documents_fields_are_labelled_when_read_with_confidence():
    metadata = {
        "organisation": "Initech Corporation",
        "period": {"label": "FY2022"},
        "kind": "annual report",
        "confidence": {"organisation": 0.9, "period": 0.3, "kind": 0.8},
    }
    assert labelled(metadata) == "organisation: Initech Corporation · kind: annual report"
    assert labelled(None) == ""


def test_search_prints_tables_as_columns_the_chunk_score_named_and_the_kind_labelled(handbook):
    result = kb_assets("search", "How long are backups kept?", "--kb", "handbook", "--limit", "3")

    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert not any(line.strip().startswith("|") for line in lines)  # no Markdown pipes
    rows = [line for line in lines if re.match(r"\s+(Raw event streams|Curated tables)\s", line)]
    assert len(rows) == 2 and rows[0].index("30 days") == rows[1].index("3 years")  # one column
    heads = [line for line in lines if re.match(r"\d+\. ", line)]
    assert len(heads) == 3 and all(re.search(r"\[chunk score \d\.\d{3}\]$", head) for head in heads)
    scores = [float(re.search(r"(\d\.\d{3})\]$", head).group(1)) for head in heads]
    if scores != sorted(scores, reverse=True):  # pages ordered by relevance: the output says so
        assert "ranked by page" in result.output
    assert "   kind: manual" in lines
    assert result.output.count("Backups are kept for 35 days.") == 1  # page 4 twice, the sentence once


def test_ingest_counts_a_failed_file_apart_and_docs_prints_no_none(tmp_path, settings):
    folder = tmp_path / "mixed"
    folder.mkdir()
    (folder / "note.md").write_text("# Note\n\nA note that publishes.\n")
    (folder / "cut.pdf").write_bytes(b"%PDF-1.7\n" + b"0" * 3000)  # a PDF cut short: fails with a reason

    ingested = kb_assets("ingest", str(folder), "--kb", "cli-mixed")

    assert ingested.exit_code == 1, ingested.output
    assert "ingested into cli-mixed: 1 new, 0 changed, 0 unchanged, 0 deleted, 1 failed" in ingested.output
    listed = kb_assets("docs", "--kb", "cli-mixed")
    assert listed.exit_code == 0 and "None" not in listed.output, listed.output
    (failed,) = [line for line in listed.output.splitlines() if line.startswith("failed")]
    assert "cut.pdf" in failed and "pages=" not in failed
    (published,) = [line for line in listed.output.splitlines() if line.startswith("published")]
    assert "pages=1 chunks=1" in published
