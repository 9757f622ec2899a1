"""Tables: row groups of up to ``TABLE_TARGET_CHARS``, each with the header row repeated in front
(``table_header``), never split inside a row (unless one row alone overflows the model window). A
table that goes on at the top of the next page takes the header of the part before the break."""

from __future__ import annotations

from kb_assets.chunking.pieces import TABLE_TARGET_CHARS, Piece
from kb_assets.chunking.walk import Walk


def chunk_table(walk: Walk, block: dict, text: str) -> None:
    walk.flush()
    before = walk.previous_page_end if walk.first_on_page else None
    continued = before if before is not None and before["kind"] == "table" else None
    walk.pieces.extend(table_pieces(block, walk.section, walk.page_index, continued))


def table_header(block: dict) -> tuple[str, int] | None:
    """A table block's header (its first row's line, and a markdown separator line if there is one)
    and how many lines it takes; None when the block is not a table of rows with a header."""
    rows = block.get("rows") or []
    lines = block["text"].split("\n")
    header_lines = len(lines) - len(rows) + 1
    if len(rows) < 2 or header_lines not in (1, 2):
        return None
    return "\n".join(lines[:header_lines]), header_lines


def table_pieces(block: dict, section: tuple[str, ...], page_index: int, continued: dict | None = None) -> list[Piece]:
    """Row groups of a table block, each starting with the header row (never split inside a row).

    ``continued``: the table that ended the previous page. When this block (the first on its page)
    has as many columns and does not start with that table's header, it is the rest of that table:
    all its rows are data rows and that header is repeated in front of them.
    """
    rows = block.get("rows") or []
    lines = block["text"].split("\n")
    found = table_header(block)
    previous = table_header(continued) if continued is not None else None
    if (
        previous is not None
        and continued is not None
        and rows
        and len(rows[0]) == len((continued.get("rows") or [[]])[0])
        and lines[0] != previous[0].split("\n")[0]
        and len(lines) == len(rows)
    ):
        header, body = previous[0], lines
    elif found is None:
        return [Piece("table", block["text"], section, page_index, page_index)]
    else:
        header, body = found[0], lines[found[1] :]
    pieces: list[Piece] = []
    group: list[str] = []
    size = len(header)
    for line in body:
        if group and size + 1 + len(line) > TABLE_TARGET_CHARS:
            pieces.append(
                Piece("table", "\n".join([header, *group]), section, page_index, page_index, table_header=header)
            )
            group, size = [], len(header)
        group.append(line)
        size += 1 + len(line)
    pieces.append(Piece("table", "\n".join([header, *group]), section, page_index, page_index, table_header=header))
    return pieces
