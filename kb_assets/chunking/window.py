"""The model window: the embedding prefix, and pieces split (never truncated) until each fits."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from kb_assets.chunking.pieces import Piece
from kb_assets.lib.text import split_to_size

PREFIX_PART_CHARS = 80  # each part of the embedding prefix is at most this long

CountTokens = Callable[[list[str]], list[int]]


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= PREFIX_PART_CHARS else text[: PREFIX_PART_CHARS - 1].rstrip() + "…"


def embedding_prefix(title: str, section_path: tuple[str, ...], page_label: str) -> str:
    """Document title > section path (its last two levels) > page label."""
    parts = [title, *section_path[-2:], page_label]
    return " > ".join(_short(p) for p in parts if p)


def _halves(piece: Piece) -> list[Piece]:
    """Split a piece in two: tables/code/toc by lines (a table keeps its header), text by sentences."""
    header = piece.table_header + "\n" if piece.table_header else ""
    body = piece.content[len(header) :]
    lines = body.split("\n")
    if piece.kind in ("table", "code", "toc") and len(lines) > 1:
        cut = len(lines) // 2
        if piece.kind == "code":  # prefer a blank line near the middle
            blanks = [i for i, row in enumerate(lines) if not row.strip() and 0 < i < len(lines) - 1]
            if blanks:
                cut = min(blanks, key=lambda i: abs(i - cut))
        first, second = "\n".join(lines[:cut]).rstrip("\n"), "\n".join(lines[cut:]).lstrip("\n")
        second_line = None
        if piece.line_start is not None:
            second_line = piece.line_start + body[: len(body) - len(second)].count("\n")
        return [replace(piece, content=header + first), replace(piece, content=header + second, line_start=second_line)]
    halves = split_to_size(body, max(20, len(body) // 2 + 1))
    if len(halves) == 1:  # one unbreakable sentence: cut between characters (a space when there is one)
        middle = len(body) // 2
        space = body.rfind(" ", 0, middle)
        cut = space if space > len(body) // 4 else middle
        halves = [body[:cut].strip(), body[cut:].strip()]
    return [replace(piece, content=header + half) for half in halves if half]


def fit_to_window(
    pieces: list[tuple[Piece, str]], count_tokens: CountTokens, max_tokens: int
) -> list[tuple[Piece, str]]:
    """(piece, prefix) pairs split until every ``prefix + content`` fits ``max_tokens`` (counted with
    the model's tokenizer); nothing is truncated. Order is kept."""
    counts = count_tokens([f"{prefix}\n{piece.content}" for piece, prefix in pieces]) if pieces else []
    out: list[tuple[Piece, str]] = []
    for (piece, prefix), tokens in zip(pieces, counts, strict=False):
        if tokens <= max_tokens:
            out.append((piece, prefix))
            continue
        halves = _halves(piece)
        if len(halves) < 2 or any(len(h.content) >= len(piece.content) for h in halves):
            raise ValueError(
                f"page {piece.page_index + 1}: a {piece.kind} piece of {len(piece.content)} characters "
                f"cannot be split to fit the {max_tokens}-token window"
            )
        out.extend(fit_to_window([(h, prefix) for h in halves], count_tokens, max_tokens))
    return out
