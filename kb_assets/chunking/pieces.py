"""A piece: the content of one chunk before the model window is applied, with its pages and section."""

from __future__ import annotations

from dataclasses import dataclass

TARGET_CHARS = 400  # text is packed up to this size...
MIN_CHARS = 200  # ...and a chunk under this size takes the next piece too
TABLE_TARGET_CHARS = 800  # row groups (header included) up to this size, at least one row


@dataclass(frozen=True)
class Piece:
    kind: str
    content: str
    section_path: tuple[str, ...]
    page_index: int
    page_end: int
    table_header: str | None = None
    image_key: str | None = None
    code_name: str | None = None  # code: the definition's name...
    line_start: int | None = None  # ...and its first line in the page text

    @property
    def section_title(self) -> str | None:
        if self.code_name is not None and self.line_start is not None:
            last = self.line_start + self.content.count("\n")
            return f"{self.code_name} (lines {self.line_start}-{last})"
        return self.section_path[-1] if self.section_path else None
