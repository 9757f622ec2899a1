"""Page labels printed on the page: the page number found in a removed header/footer ("12",
"Page 4 of 6", "iv"), kept only where the PDF has no labels of its own and the number counts up by
one from a neighbouring page.
"""

from __future__ import annotations

import re

from kb_assets.parsing.layout.lines import Line, PageLines

_PAGE_NUMBER = re.compile(
    r"^(?:(?:page|p\.|seite|第)\s*)?[-\u2013\u2014]?\s*(\d{1,5}|[ivxlcdm]{1,8})\s*[-\u2013\u2014]?"
    r"(?:\s*(?:of|/|页)\s*\d+)?\s*页?$",
    re.IGNORECASE,
)
_EDGE_NUMBER = re.compile(r"(?:^(\d{1,5})\s+\S|\S\s+(\d{1,5})$)")


def printed_number(dropped: list[Line]) -> str | None:
    """The page number printed in removed header/footer lines ("12", "Page 4 of 6", "iv")."""
    for line in dropped:
        match = _PAGE_NUMBER.match(line.text)
        if match:
            return match.group(1)
    for line in dropped:
        match = _EDGE_NUMBER.search(line.text)
        if match:
            return match.group(1) or match.group(2)
    return None


def _number_value(text: str | None) -> int | None:
    if not text:
        return None
    if text.isdigit():
        return int(text)
    values = {"i": 1, "v": 5, "x": 10, "l": 50, "c": 100, "d": 500, "m": 1000}
    total, prev = 0, 0
    for ch in reversed(text.lower()):
        value = values.get(ch)
        if value is None:
            return None
        total += -value if value < prev else value
        prev = max(prev, value)
    return total


def add_printed_labels(pages: dict[int, PageLines], labels: list[str | None]) -> None:
    """Keep a printed page number only where the PDF has no labels and a neighbouring page's number
    is one less or one more (so a stray number in a header is not taken for the page number)."""
    if any(labels):
        for pl in pages.values():
            pl.printed_number = None
        return
    values = {i: _number_value(pl.printed_number) for i, pl in pages.items()}
    for index, pl in pages.items():
        value = values[index]
        if value is None or not (values.get(index - 1) == value - 1 or values.get(index + 1) == value + 1):
            pl.printed_number = None
