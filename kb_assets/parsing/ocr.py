"""OCR of pages without a text layer (scanned PDF pages, image files) with Debian's tesseract.

tesseract runs in-process through ``tesserocr`` (its wheel bundles libtesseract); the language data
comes from Debian's ``tesseract-ocr-eng`` / ``tesseract-ocr-chi-sim`` packages
(``/usr/share/tesseract-ocr/5/tessdata``, or ``TESSDATA_PREFIX``). One engine per process and
language set, used under a lock (a tesseract handle is not thread-safe).

Output: positioned cells (words of one line, split where they stand far apart), in tesseract's
reading order, which the PDF layout pass turns into headings, paragraphs, lists and tables like
text-layer lines; tesseract's spaces between CJK characters are removed. Page mode ``ocr-tesseract``. Without tesserocr or the language data, ``ocr_unavailable`` says why
and pages stay without text (recorded, never silent).
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path

from kb_assets.parsing.model import clean_inline

PARSER = "tesseract"
MODE = "ocr-tesseract"
MIN_CONFIDENCE = 10.0  # words tesseract rates below this are dropped (speckles) ...
MIN_SYMBOL_CONFIDENCE = 30.0  # ... and words of no letter or digit below this (rules, dots, smudges)

_TESSDATA_DIRS = (
    "/usr/share/tesseract-ocr/5/tessdata",
    "/usr/share/tesseract-ocr/4.00/tessdata",
    "/usr/share/tessdata",
    "/usr/local/share/tessdata",
)
_CJK = "\u2e80-\u2fdf\u3000-\u303f\u3040-\u30ff\u3100-\u312f\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef"
_CJK_GAP = re.compile(f"(?<=[{_CJK}]) (?=[{_CJK}])")

_LOCK = threading.Lock()
_ENGINES: dict[str, object] = {}


def tessdata_dir() -> Path | None:
    candidates = [os.environ.get("TESSDATA_PREFIX"), *_TESSDATA_DIRS]
    for candidate in candidates:
        if candidate and (Path(candidate) / "eng.traineddata").is_file():
            return Path(candidate)
        if candidate and (Path(candidate) / "tessdata" / "eng.traineddata").is_file():
            return Path(candidate) / "tessdata"
    return None


def ocr_unavailable(languages: str) -> str | None:
    """None when OCR can run with these languages, else the reason it cannot."""
    try:
        import tesserocr  # noqa: F401
    except ImportError:
        return "OCR unavailable: the tesserocr package is not installed"
    folder = tessdata_dir()
    if folder is None:
        return "OCR unavailable: no tesseract language data (apt-get install tesseract-ocr-eng tesseract-ocr-chi-sim)"
    missing = [lang for lang in languages.split("+") if not (folder / f"{lang}.traineddata").is_file()]
    if missing:
        return f"OCR unavailable: tesseract language data missing for {', '.join(missing)} in {folder}"
    return None


def _engine(languages: str):
    import tesserocr

    engine = _ENGINES.get(languages)
    if engine is None:
        engine = tesserocr.PyTessBaseAPI(path=str(tessdata_dir()) + "/", lang=languages)
        _ENGINES[languages] = engine
    return engine


@dataclass
class OcrCell:
    """A run of words on one text line (a line is split where words stand far apart: table cells)."""

    text: str
    l: float
    t: float
    r: float
    b: float


def ocr_lines(image, languages: str) -> list[OcrCell]:
    """The text tesseract reads in a PIL image (grayscale works best), as cells in reading order,
    in pixel coordinates (top-left origin)."""
    import tesserocr

    RIL = tesserocr.RIL
    words_by_line: list[list[tuple[str, tuple[int, int, int, int]]]] = []
    with _LOCK:
        api = _engine(languages)
        try:
            api.SetImage(image)
            api.Recognize()
            iterator = api.GetIterator()
            while iterator is not None:
                if iterator.IsAtBeginningOf(RIL.TEXTLINE) or not words_by_line:
                    words_by_line.append([])
                try:
                    word = iterator.GetUTF8Text(RIL.WORD)
                except RuntimeError:  # "No text returned": an empty page
                    break
                box = iterator.BoundingBox(RIL.WORD)
                word = (word or "").strip()
                if word and box and _keep(word, iterator.Confidence(RIL.WORD)):
                    words_by_line[-1].append((word, box))
                if not iterator.Next(RIL.WORD):
                    break
        finally:
            api.Clear()
    cells: list[OcrCell] = []
    for words in words_by_line:
        if not words:
            continue
        height = max(box[3] - box[1] for _, box in words)
        run = [words[0]]
        for word in words[1:]:
            if word[1][0] - run[-1][1][2] > 1.2 * height:  # a wide gap: a new cell
                cells.append(_cell(run))
                run = []
            run.append(word)
        cells.append(_cell(run))
    return [cell for cell in cells if cell.text]


def _keep(word: str, confidence: float) -> bool:
    if confidence < MIN_CONFIDENCE:
        return False
    return confidence >= MIN_SYMBOL_CONFIDENCE or any(ch.isalnum() for ch in word)


def _cell(words: list[tuple[str, tuple[int, int, int, int]]]) -> OcrCell:
    text = _CJK_GAP.sub("", clean_inline(" ".join(w for w, _ in words)))
    return OcrCell(
        text,
        min(b[0] for _, b in words),
        min(b[1] for _, b in words),
        max(b[2] for _, b in words),
        max(b[3] for _, b in words),
    )
