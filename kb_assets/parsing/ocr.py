"""OCR of pages without a text layer (scanned PDF pages, image files), with one of two engines.

``KB_OCR_ENGINE`` (``ParseOptions.ocr_engine``) picks it:

- ``rapidocr`` (the default): RapidOCR's PP-OCRv6 small text detection and recognition models, which
  ship inside the ``rapidocr`` wheel, run by onnxruntime. The project's pip dependencies are all it
  needs: no system package, and the models are loaded from the wheel by explicit path (RapidOCR
  would otherwise check, and on a mismatch download, its own copy). One multilingual model reads
  simplified and traditional Chinese, Japanese, English and other Latin-script languages at once:
  ``KB_OCR_LANGUAGES`` does not apply to it. Page mode ``ocr-rapidocr``, parser ``rapidocr``.
  Memory: ~0.55 GB resident once loaded, peaks near 1.1 GB on a 300-dpi page (tesseract: ~0.2 GB).
- ``tesseract``: tesseract in-process through ``tesserocr`` (``pip install '.[tesseract]'``;
  the wheel bundles libtesseract), with the language data of Debian's ``tesseract-ocr-eng`` /
  ``tesseract-ocr-chi-sim`` (``/usr/share/tesseract-ocr/5/tessdata``, or ``TESSDATA_PREFIX``);
  ``KB_OCR_LANGUAGES`` names its languages (``eng+chi_sim``). Page mode ``ocr-tesseract``.

Why rapidocr by default: it needs nothing outside pip, and on the benchmark scans
(``benchmarks/ocr.py``, figures in its docstring) it read more of the English words and Chinese
characters than tesseract, for several times tesseract's seconds a page on 2 cores: scanned pages
are few beside text-layer pages, and a fresh machine must read them at all.

Output: positioned cells in reading order, in pixel coordinates (top-left origin), which the layout
pass (layout/) turns into headings, paragraphs, lists and tables like text-layer lines. A rapidocr
cell is one detected text box (detection keeps table columns apart); a tesseract cell is the words
of one line, split where they stand far apart. Spaces between CJK characters are removed. Each engine is
built once per process and used under one lock: a tesseract handle is not thread-safe, and an
onnxruntime session already uses every core. When the chosen engine cannot run,
``ocr_unavailable`` says why in one line, and pages stay without text (recorded, never silent).
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from pathlib import Path

from kb_assets.parsing.model import clean_inline
from kb_assets.settings import OCR_ENGINES

ENGINES = OCR_ENGINES
MIN_CONFIDENCE = 10.0  # words tesseract rates below this are dropped (speckles) ...
MIN_SYMBOL_CONFIDENCE = 30.0  # ... and words of no letter or digit below this (rules, dots, smudges)
RAPIDOCR_MODELS = ("PP-OCRv6_det_small.onnx", "PP-OCRv6_rec_small.onnx")  # inside the rapidocr wheel

_TESSDATA_DIRS = (
    "/usr/share/tesseract-ocr/5/tessdata",
    "/usr/share/tesseract-ocr/4.00/tessdata",
    "/usr/share/tessdata",
    "/usr/local/share/tessdata",
)
_CJK = (
    "\u2e80-\u2fdf\u3000-\u303f\u3040-\u30ff\u3100-\u312f\u3400-\u4dbf"
    "\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef"
)
_CJK_GAP = re.compile(f"(?<=[{_CJK}]) (?=[{_CJK}])")

_LOCK = threading.Lock()
_ENGINES: dict[tuple[str, str], object] = {}


@dataclass
class OcrCell:
    """A run of text on one line (a table cell, or a whole line of prose)."""

    text: str
    l: float  # noqa: E741 (l, t, r, b: a box's edges, as docling names them)
    t: float
    r: float
    b: float


def page_mode(engine: str) -> str:
    """The parsed page's mode for pages this engine read (its parser is the engine's name)."""
    return f"ocr-{engine}"


def ocr_unavailable(engine: str, languages: str, tessdata: Path | None = None) -> str | None:
    """None when the engine can run (with these languages, for tesseract), else the reason it cannot.
    ``tessdata``: tesseract's language data folder (TESSDATA_PREFIX), else Debian's."""
    if engine == "rapidocr":
        return _rapidocr_unavailable()
    if engine == "tesseract":
        return _tesseract_unavailable(languages, tessdata)
    return f"OCR unavailable: unknown OCR engine {engine!r} (KB_OCR_ENGINE: {' or '.join(ENGINES)})"


def ocr_lines(image, engine: str, languages: str, tessdata: Path | None = None) -> list[OcrCell]:
    """The text the engine reads in a PIL image (grayscale works best), as cells in reading order,
    in pixel coordinates (top-left origin). Call ``ocr_unavailable`` first."""
    with _LOCK:
        if engine == "rapidocr":
            cells = _rapidocr_cells(image)
        else:
            cells = _tesseract_cells(image, languages, tessdata)
    return [cell for cell in cells if cell.text]


def forget_engines() -> None:
    """Drop the engines built so far: the next ``ocr_lines`` builds its engine afresh."""
    with _LOCK:
        _ENGINES.clear()


# ---------------------------------------------------------------------------------- rapidocr


def _rapidocr_model_dir() -> Path:
    import rapidocr

    return Path(rapidocr.__file__).parent / "models"


def _rapidocr_unavailable() -> str | None:
    try:
        import onnxruntime  # noqa: F401
        from rapidocr import RapidOCR  # noqa: F401  (imports OpenCV, shapely, ...: ~2 s, once)
    except ImportError as exc:
        return f"OCR unavailable: rapidocr/onnxruntime cannot be imported ({exc}); both are project dependencies"
    missing = [name for name in RAPIDOCR_MODELS if not (_rapidocr_model_dir() / name).is_file()]
    if missing:
        return f"OCR unavailable: the rapidocr wheel has no {', '.join(missing)} (reinstall rapidocr)"
    return None


def _rapidocr_engine():
    engine = _ENGINES.get(("rapidocr", ""))
    if engine is None:
        from rapidocr import RapidOCR

        models = _rapidocr_model_dir()
        engine = RapidOCR(
            params={
                "Global.log_level": "error",  # not "The text detection result is empty" for a blank page
                "Global.use_cls": False,  # scans are upright: no 180-degree line classifier (its model is not needed)
                "Det.model_path": str(models / RAPIDOCR_MODELS[0]),
                "Rec.model_path": str(models / RAPIDOCR_MODELS[1]),  # the character list is in the model
            }
        )
        _ENGINES[("rapidocr", "")] = engine
    return engine


def _rapidocr_cells(image) -> list[OcrCell]:
    result = _rapidocr_engine()(image)
    if result.boxes is None or result.txts is None:  # nothing found
        return []
    cells = []
    for box, text in zip(result.boxes, result.txts, strict=False):  # boxes: four corners, in reading order
        xs, ys = [float(p[0]) for p in box], [float(p[1]) for p in box]
        cells.append(OcrCell(_CJK_GAP.sub("", clean_inline(text)), min(xs), min(ys), max(xs), max(ys)))
    return cells


# --------------------------------------------------------------------------------- tesseract


def tessdata_dir(prefix: Path | None = None) -> Path | None:
    """The folder of tesseract's language data: ``prefix`` (TESSDATA_PREFIX) or one of Debian's."""
    candidates = [prefix, *_TESSDATA_DIRS]
    for candidate in candidates:
        if candidate and (Path(candidate) / "eng.traineddata").is_file():
            return Path(candidate)
        if candidate and (Path(candidate) / "tessdata" / "eng.traineddata").is_file():
            return Path(candidate) / "tessdata"
    return None


def _tesseract_unavailable(languages: str, tessdata: Path | None) -> str | None:
    try:
        import tesserocr  # noqa: F401
    except ImportError:
        return "OCR unavailable: the tesserocr package is not installed (pip install '.[tesseract]')"
    folder = tessdata_dir(tessdata)
    if folder is None:
        return "OCR unavailable: no tesseract language data (apt-get install tesseract-ocr-eng tesseract-ocr-chi-sim)"
    missing = [lang for lang in languages.split("+") if not (folder / f"{lang}.traineddata").is_file()]
    if missing:
        return f"OCR unavailable: tesseract language data missing for {', '.join(missing)} in {folder}"
    return None


def _tesseract_engine(languages: str, tessdata: Path | None):
    import tesserocr

    engine = _ENGINES.get(("tesseract", languages))
    if engine is None:
        engine = tesserocr.PyTessBaseAPI(path=str(tessdata_dir(tessdata)) + "/", lang=languages)
        _ENGINES[("tesseract", languages)] = engine
    return engine


def _tesseract_cells(image, languages: str, tessdata: Path | None) -> list[OcrCell]:
    import tesserocr

    RIL = tesserocr.RIL
    words_by_line: list[list[tuple[str, tuple[int, int, int, int]]]] = []
    api = _tesseract_engine(languages, tessdata)
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
    return cells


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
