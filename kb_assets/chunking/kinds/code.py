"""Code: consecutive code blocks of a page grouped into functions, classes, ... with line ranges (in
the chunk's section title).

A definition starts at an unindented line that opens one (``def``/``class``/``function``/``fn``/``func``/
``struct``/``interface``/``impl``/``CREATE ...``, a decorator, a Java-style modifier) and takes the
indented blocks after it; comment blocks directly above a definition belong to it. Other top-level
blocks (imports, statements) group until the next definition. Lines are counted in the document's
stored text (its pages' texts one after another, 1-based): the source's lines, except that a run of
blank lines counts as one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kb_assets.chunking.pieces import Piece
from kb_assets.chunking.walk import Walk

_DEFINITION = re.compile(
    r"^(?:@\w|(?:export\s+(?:default\s+)?)?(?:async\s+)?(?:def|class|function|func|fn|struct|interface|enum|impl|"
    r"trait|module|namespace|sub|type|object|record)\b|(?:public|private|protected|internal|static|abstract|final)\s"
    r"|(?:pub(?:\(\w+\))?\s+)(?:fn|struct|enum|trait|mod|type)\b|(?:CREATE|ALTER)\s+\w)",
    re.IGNORECASE,
)
_NAME = re.compile(
    r"\b(?:def|class|function|func|fn|struct|interface|enum|impl|trait|module|namespace|sub|type|object|record|"
    r"TABLE|VIEW|FUNCTION|INDEX|PROCEDURE)\s+(?:\([^)]*\)\s*)?(?:IF\s+NOT\s+EXISTS\s+)?([A-Za-z_$][\w$]*(?:(?:\.|::)[A-Za-z_$][\w$]*)*)",
    re.IGNORECASE,
)
_COMMENT = re.compile(r"^\s*(?:#|//|/\*|\*|--|;|\"\"\"|''')")


def chunk_code(walk: Walk, block: dict, text: str) -> None:
    walk.flush()
    walk.hold("code", (block["text"].strip("\n"), walk.block_line), code_pieces)


def code_pieces(blocks: list[tuple[str, int]], section: tuple[str, ...], page_index: int) -> list[Piece]:
    return [
        Piece("code", unit.text, section, page_index, page_index, code_name=unit.name, line_start=unit.first_line)
        for unit in code_units(blocks)
    ]


@dataclass
class CodeUnit:
    text: str  # the blocks of the unit joined as on the page (found verbatim in the page text)
    name: str  # e.g. "build_tree", "top-level code"
    first_line: int  # 1-based line of the document's stored text
    last_line: int


def _opens_definition(line: str) -> bool:
    return not line[:1].isspace() and bool(_DEFINITION.match(line))


def definition_name(text: str) -> str:
    for line in text.split("\n"):
        if _opens_definition(line) and not line.startswith("@"):
            match = _NAME.search(line)
            return match.group(1) if match else " ".join(line.split())[:60]
    return "top-level code"


def code_units(blocks: list[tuple[str, int]]) -> list[CodeUnit]:
    """Group consecutive code blocks (text, first line) into definitions."""
    groups: list[list[tuple[str, int]]] = []
    for text, line in blocks:
        first = text.split("\n", 1)[0]
        indented = first[:1].isspace() or first.strip() in ("}", "};", "end", "})", ")")
        comment_only = all(_COMMENT.match(row) or not row.strip() for row in text.split("\n"))
        current = groups[-1] if groups else None
        current_is_comments = current is not None and all(
            all(_COMMENT.match(row) or not row.strip() for row in t.split("\n")) for t, _ in current
        )
        if current is None:
            groups.append([(text, line)])
        elif _opens_definition(first):
            if current_is_comments:
                current.append((text, line))  # the comment above a definition belongs to it
            else:
                groups.append([(text, line)])
        elif indented:
            current.append((text, line))
        elif comment_only:
            groups.append([(text, line)])  # may open the next definition
        elif current_is_comments or not any(_opens_definition(t.split("\n", 1)[0]) for t, _ in current):
            current.append((text, line))  # top-level statements stay together
        else:
            groups.append([(text, line)])
    units = []
    for group in groups:
        text = "\n\n".join(t for t, _ in group)
        first_line = group[0][1]
        last_line = group[-1][1] + group[-1][0].count("\n")
        units.append(CodeUnit(text, definition_name(text), first_line, last_line))
    return units
