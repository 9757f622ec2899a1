"""Logical pages for formats without pages: source code by top-level definition with line ranges,
text split at headings, large sheets by row ranges with the header kept."""

from __future__ import annotations

from kb_assets.parsing import Block, parse_document


def test_code_pages_hold_whole_definitions_with_line_numbers(tmp_path):
    small = "\n\n".join(f"function helper{i}(x) {{\n  return x + {i};\n}}" for i in range(12))
    long_body = "\n".join(f"  total += step({i});" for i in range(80))
    source = (
        "// billing helpers\nimport { step } from './step.js';\n\n"
        + small
        + "\n\n/** sums every step */\nexport function total() {\n  let total = 0;\n"
        + long_body
        + "\n  return total;\n}\n"
    )
    path = tmp_path / "billing.js"
    path.write_text(source)
    doc = parse_document(path)
    assert doc.source_kind == "code" and {p.mode for p in doc.pages} == {"code-definitions"}
    lines = source.split("\n")
    for page in doc.pages:
        first, last = (int(n) for n in page.label.removeprefix("lines ").split("-"))
        # the label is the page's exact line range: its first and last code lines are those lines
        assert page.blocks[0].text.split("\n")[0] == lines[first - 1]
        assert page.blocks[-1].text.split("\n")[-1] == lines[last - 1]
    # no definition is cut between pages unless it is longer than a page
    for i in range(12):
        holding = [p.page_index for p in doc.pages if f"function helper{i}(x)" in p.text]
        assert len(holding) == 1 and f"return x + {i};" in doc.pages[holding[0]].text
    total_pages = [p for p in doc.pages if "total += step(" in p.text]
    assert len(total_pages) >= 2  # 85 lines: continued by line range
    assert total_pages[0].blocks[0].text.startswith("/** sums every step */\nexport function total() {")


def test_text_pages_start_at_headings(tmp_path):
    path = tmp_path / "README.txt"
    path.write_text(
        "Northwind tools.\n\nInstall\n=======\n\nRun make install.\n\nUsage\n=====\n\n"
        "Call the tool.\n\nOptions\n-------\n\nUse --fast for speed.\n"
    )
    doc = parse_document(path)
    assert [p.label for p in doc.pages] == ["lines 1-1", "lines 3-6", "lines 8-16"]
    assert doc.pages[1].blocks == [Block("heading", "Install", level=1), Block("paragraph", "Run make install.")]
    assert doc.pages[2].blocks[2] == Block("heading", "Options", level=2)  # a sub-heading stays on its page


def test_large_sheet_continues_by_row_range_with_header(tmp_path):
    import openpyxl

    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "Usage"
    ws.append(["team", "gb"])
    for i in range(120):
        ws.append([f"team{i}", i])
    wb.create_sheet("Notes").append(["owner", "platform"])
    wb.save(tmp_path / "usage.xlsx")
    doc = parse_document(tmp_path / "usage.xlsx")
    assert [p.label for p in doc.pages] == ["Usage rows 2-51", "Usage rows 52-101", "Usage rows 102-121", "Notes"]
    for page in doc.pages[:3]:
        assert page.blocks[0] == Block("heading", "Usage", level=1)
        assert page.blocks[1].rows[0] == ("team", "gb")
    assert "| team60 | 60 |" in doc.pages[1].text
