"""Text helpers shared by structure, chunking, retrieval and lineage: whitespace normalization,
hashing, sentence splitting and packing, words for keywords and query terms."""

from __future__ import annotations

import hashlib
import re

from kb_assets.lib.segmentation import words as jieba_words

_CJK_CLASS = "\u3000-\u303f\u3400-\u9fff\uff00-\uffef"
_CJK = re.compile(f"[{_CJK_CLASS}]")
_SPACE_NEAR_CJK = re.compile(f"(?<=[{_CJK_CLASS}]) | (?=[{_CJK_CLASS}])")
SPACE_NEAR_CJK = _SPACE_NEAR_CJK  # the spaces normalize_ws drops from collapsed text (chunking/regions.py maps them)
_SENTENCE_END = re.compile(r"(?<=[.!?;:])\s+(?=\S)|(?<=[。！？；])")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_\-]{2,}|[\u3400-\u9fff]{2,}")
_STOPWORDS = set(
    """the and for are but not you all any can had her was one our out has his how its may new now
 old see two who did get let put say she too use with this that from they will would there their what when
 which were been have into than then them these those each other some such only also more most very just
 over under about after before between through during without within upon your yours page""".split()
)


def normalize_ws(text: str) -> str:
    """Runs of whitespace become one space; spaces next to CJK characters go (Chinese has none)."""
    collapsed = " ".join(text.split())
    return _SPACE_NEAR_CJK.sub("", collapsed)


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sentences(text: str) -> list[str]:
    """Sentences of a paragraph, each keeping its own characters (joined by a space they normalize back)."""
    parts = [part.strip() for part in _SENTENCE_END.split(text)]
    return [part for part in parts if part]


def split_to_size(text: str, max_chars: int) -> list[str]:
    """Split a long text at sentence boundaries (then at spaces, then hard) into pieces <= max_chars."""
    if len(text) <= max_chars:
        return [text]
    pieces: list[str] = []
    current = ""
    for sentence in sentences(text):
        for part in _hard_split(sentence, max_chars):
            candidate = join_pieces(current, part)
            if len(candidate) <= max_chars:
                current = candidate
            else:
                pieces.append(current)
                current = part
    if current:
        pieces.append(current)
    return [p for p in pieces if p]


def join_pieces(left: str, right: str) -> str:
    """Join two pieces of one text: no space where a CJK character meets the cut, else one space."""
    if not left:
        return right
    if _CJK.match(right[:1]) or _CJK.match(left[-1:]):
        return left + right
    return f"{left} {right}"


def _hard_split(text: str, max_chars: int) -> list[str]:
    if len(text) <= max_chars:
        return [text]
    words = text.split(" ")
    if len(words) == 1:  # no spaces (e.g. Chinese): cut by characters
        return [text[i : i + max_chars] for i in range(0, len(text), max_chars)]
    out, current = [], ""
    for word in words:
        for piece in [word] if len(word) <= max_chars else _hard_split(word, max_chars):
            candidate = join_pieces(current, piece)
            if len(candidate) <= max_chars:
                current = candidate
            else:
                out.append(current)
                current = piece
    if current:
        out.append(current)
    return out


def tokenize(text: str) -> list[str]:
    """Words for keywords: English words (lowercased, no stopwords) and jieba words for Chinese."""
    words = []
    for match in _WORD.finditer(text):
        token = match.group(0)
        if token[0].isascii():
            token = token.lower()
            if token not in _STOPWORDS:
                words.append(token)
        else:
            words.extend(w for w in jieba_words(token) if len(w) >= 2)
    return words
