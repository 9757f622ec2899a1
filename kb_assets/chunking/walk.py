"""The walk over a document's blocks: the pieces made so far, the text being packed, the section in
force, and what the chunkers of block kinds (``kinds/``) leave for the next block."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from kb_assets.chunking.pieces import MIN_CHARS, TARGET_CHARS, Piece
from kb_assets.lib.text import split_to_size

# (held items, section, page_index) -> the pieces of a group of consecutive blocks of one kind
EmitGroup = Callable[[list, tuple[str, ...], int], list[Piece]]


class TextRun:
    """Text being packed into one chunk: parts with the page each came from."""

    def __init__(self) -> None:
        self.parts: list[tuple[str, int]] = []
        self.section: tuple[str, ...] = ()
        self.headings_only = True

    def size(self) -> int:
        return len("\n\n".join(t for t, _ in self.parts))

    def add(self, text: str, page_index: int, section: tuple[str, ...], heading: bool = False) -> None:
        if not self.parts or (heading and self.headings_only):
            self.section = section  # a run of headings takes the section of its last heading
        self.parts.append((text, page_index))
        self.headings_only = self.headings_only and heading

    def take(self, kind: str) -> Piece | None:
        if not self.parts:
            return None
        separator = "\n" if kind == "toc" else "\n\n"  # entries one a line, as printed
        piece = Piece(
            "heading" if self.headings_only and kind == "paragraph" else kind,
            separator.join(t for t, _ in self.parts),
            self.section,
            self.parts[0][1],
            self.parts[-1][1],
        )
        self.parts, self.headings_only = [], True
        return piece


class Walk:
    """The state of ``content_pieces`` as it walks a document's blocks in reading order."""

    def __init__(self) -> None:
        self.pieces: list[Piece] = []
        self.run = TextRun()
        self.section: tuple[str, ...] = ()
        self.page_index = 0
        self.block_line = 1  # the block's first line in the document's text
        self.first_on_page = False  # the block is the first (non-empty) one of its page
        self.previous_page_end: dict | None = None  # the last block of the page before (not a toc page)
        self.pending_image: str | None = None  # an uncaptioned figure's image waiting for the next text chunk
        self.held: list = []  # blocks of a group in progress (``hold``)
        self.held_kind: str | None = None
        self._emit: EmitGroup | None = None

    def flush(self, kind: str = "paragraph") -> None:
        """The text run becomes a piece (a paragraph, heading or toc chunk)."""
        piece = self.run.take(kind)
        if piece is not None:
            if self.pending_image and piece.kind in ("paragraph", "heading") and piece.image_key is None:
                piece, self.pending_image = replace(piece, image_key=self.pending_image), None
            self.pieces.append(piece)

    def add_text(self, text: str, kind: str) -> None:
        """Pack text into the run (a new chunk past ``TARGET_CHARS``): table-of-contents entries whole
        (by lines), other text by sentences."""
        parts = (
            [p for line in text.split("\n") for p in split_to_size(line, TARGET_CHARS)]
            if kind == "toc"
            else split_to_size(text, TARGET_CHARS)
        )
        for part in parts:
            size = self.run.size()
            if self.run.parts and size >= MIN_CHARS and size + 2 + len(part) > TARGET_CHARS:
                self.flush(kind)
            self.run.add(part, self.page_index, self.section)

    def hold(self, kind: str, item, emit: EmitGroup) -> None:
        """Keep ``item`` in a group of consecutive blocks of ``kind``: ``emit`` makes the group's pieces
        when it ends (at a block of another kind or at the end of the page)."""
        self.held_kind, self._emit = kind, emit
        self.held.append(item)

    def release(self) -> None:
        """End the group in progress, if any."""
        if self.held:
            assert self._emit is not None, "held blocks without the function that emits them (hold sets both)"
            self.pieces.extend(self._emit(self.held, self.section, self.page_index))
        self.held, self.held_kind, self._emit = [], None, None
