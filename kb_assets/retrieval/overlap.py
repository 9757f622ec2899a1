"""Each sentence of a page once per answer (issue 54): two results of one page often get context windows that
overlap (each window must hold its own chunk), so the reader was handed the same sentences twice.

``trim_repeats`` goes through the results in rank order and takes out of a result's ``context`` every unit
that an earlier result of the same page already hands over (its ``context``; its ``content`` where the
content is the passage, a context of ``""``). A unit is a sentence of a paragraph (it ends at ``.``, ``!``
or ``?`` before whitespace, or at ``。！？``; a line break inside a paragraph does not end one), a Markdown
table row, or a line of its own such as a heading. What was taken out is marked ``…``; a context whose
every unit was handed over before becomes ``""`` (``covered_by`` names the earlier result that holds its
chunk). Nothing else changes: not the order, the scores, ``content`` or the first result.

Nothing is lost: a unit is taken out only when an earlier result, which keeps it, holds it whole
(whitespace-collapsed), so every phrase inside one unit is still returned, at a better rank. The
answers of ``benchmarks/detail_questions.jsonl`` are each inside one unit (none crosses a sentence end or
a line), so answer@1/@5 and page hit@k cannot change.
"""

from __future__ import annotations

import re

ELIDED = "…"
# a paragraph's sentence ends: after . ! ? followed by whitespace, after a Chinese full stop, ! or ?
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])")


def trim_repeats(rows: list[dict]) -> None:
    """Take out of each result's ``context`` (in place, rows in rank order) what an earlier result of the same
    page hands over already (see the module docstring)."""
    given: dict[tuple[str, int], list[str]] = {}
    for row in rows:
        key = (row["documentId"], row["pageIndex"])
        context = row.get("context")
        earlier = given.setdefault(key, [])
        if context and earlier:
            row["context"] = without(context, earlier)
        handed = row.get("context") if context else row.get("content") if context == "" else None
        if handed:
            earlier.append(_collapsed(handed))


def covered_by(rows: list[dict], index: int) -> int | None:
    """The index of the earlier result of the same page whose passage holds the chunk of ``rows[index]``,
    when its own context was taken out whole (``""``); else None."""
    row = rows[index]
    if row.get("context") != "":
        return None
    head = _collapsed(row.get("content") or "")[:80]
    for number in range(index):
        other = rows[number]
        same_page = (other["documentId"], other["pageIndex"]) == (row["documentId"], row["pageIndex"])
        if same_page and head and head in _collapsed(other.get("context") or other.get("content") or ""):
            return number
    return None


def without(context: str, earlier: list[str]) -> str:
    """The context less the units found whole in one of the ``earlier`` texts (whitespace-collapsed), each
    run taken out marked ``…``; ``""`` when none of its units is left; the context itself when none goes."""
    pieces = units(context)
    repeated = [
        bool(_WORD.search(text)) and any(_holds(seen, _collapsed(text)) for seen in earlier) for text, _ in pieces
    ]
    if not any(repeated):
        return context
    out: list[str] = []
    gap = ""  # what lies between the last unit kept and the next one: separators, units taken out
    cut = False
    for (text, separator), dropped in zip(pieces, repeated, strict=True):
        if dropped or not _WORD.search(text):  # a repeat, or a bare "…" of the context's own
            cut = cut or dropped
            gap += separator
            continue
        if out or cut:
            out.append(_mark(gap, cut, first=not out))
        out.append(text)
        gap, cut = separator, False
    if not out:
        return ""
    if cut:
        out.append(_mark(gap, cut, first=False, last=True))
    return "".join(out).strip()


_WORD = re.compile(r"\w")


def units(text: str) -> list[tuple[str, str]]:
    """The text as (unit, separator after it) pairs whose concatenation is the text: sentences of paragraphs
    (lines up to a blank line, a table row or a heading-like lone line), table rows, lines."""
    out: list[tuple[str, str]] = []
    for block, separator in _blocks(text):
        if block.lstrip().startswith("|") or "\n" not in block and not _SENTENCE_END.search(block):
            out.append((block, separator))
            continue
        at = 0
        for end in _SENTENCE_END.finditer(block):
            if end.end() > at and block[at : end.start()].strip():
                out.append((block[at : end.start()], block[end.start() : end.end()]))
                at = end.end()
        if block[at:].strip() or not at:
            out.append((block[at:], separator))
        else:  # the block ended with its last sentence
            out[-1] = (out[-1][0], out[-1][1] + block[at:] + separator)
    return out


def _blocks(text: str) -> list[tuple[str, str]]:
    """Paragraphs and table rows with the whitespace after each: a table row is a block of its own; prose lines
    run on until a blank line or a table row."""
    spans: list[list[int]] = []  # [start, end) of each block, without its line break
    prose = False  # the last block is prose that the next prose line continues
    at = 0
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        if not body.strip():
            prose = False
        elif body.lstrip().startswith("|"):
            spans.append([at, at + len(body)])
            prose = False
        elif prose:
            spans[-1][1] = at + len(body)
        else:
            spans.append([at, at + len(body)])
            prose = True
        at += len(line)
    if not spans:
        return [("", text)]
    blocks = [
        (text[a:b], text[b : spans[i + 1][0] if i + 1 < len(spans) else len(text)]) for i, (a, b) in enumerate(spans)
    ]
    return [(text[: spans[0][0]] + blocks[0][0], blocks[0][1]), *blocks[1:]]


def _mark(gap: str, cut: bool, first: bool, last: bool = False) -> str:
    """What stands where units were taken out: ``…`` on a line of its own where lines went, else inline."""
    if not cut:
        return gap
    if "\n" in gap:
        return f"{ELIDED}\n" if first else f"\n{ELIDED}" if last else f"\n{ELIDED}\n"
    return f"{ELIDED} " if first else f" {ELIDED}" if last else f" {ELIDED} "


def _holds(seen: str, unit: str) -> bool:
    """The unit is in the text, starting where a word starts (not "ends." inside "depends.")."""
    at = seen.find(unit)
    while at >= 0:
        if at == 0 or not seen[at - 1].isalnum() or not unit[0].isalnum():
            return True
        at = seen.find(unit, at + 1)
    return False


def _collapsed(text: str) -> str:
    return " ".join(text.split())
