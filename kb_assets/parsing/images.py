"""Image files (PNG, JPEG, TIFF, ...): one page per frame, read by OCR (ocr.py: ``KB_OCR_ENGINE``,
mode ``ocr-rapidocr`` by default, or ``ocr-tesseract``).

The OCR cells go through the layout pass (layout/: running lines, tables, headings, paragraphs),
in pixel units. The limits come first, before anything that depends on the machine (whether OCR can
run here): the pixel count is checked before anything is decoded (decompression bombs:
``ParseOptions.max_image_pixels``), frames beyond ``max_pages`` are refused. A page's image (the frame) is
rendered apart from the parse
(``render.render_page_images``).
"""

from __future__ import annotations

from pathlib import Path

from kb_assets.parsing.layout import Line, PageLines, layout_pages
from kb_assets.parsing.model import (
    DocumentParseError,
    ParsedDocument,
    ParsedPage,
    SourceFile,
)


def parse_image(file: SourceFile) -> ParsedDocument:
    from PIL import Image, ImageSequence, UnidentifiedImageError

    from kb_assets.parsing.ocr import ocr_lines, ocr_unavailable, page_mode

    path, name, options = file.path, file.name, file.options

    try:
        image = Image.open(path)
    except (UnidentifiedImageError, OSError, ValueError) as exc:
        raise DocumentParseError(name, f"not a readable image (truncated or corrupt: {exc})") from exc
    except Image.DecompressionBombError as exc:
        raise DocumentParseError(name, f"image refused as a decompression bomb ({exc})") from exc
    with image:
        width, height = image.size
        if width * height > options.max_image_pixels:
            raise DocumentParseError(
                name,
                f"image of {width}x{height} pixels is over the limit of {options.max_image_pixels} pixels: "
                "refused as a possible decompression bomb",
            )
        frames = getattr(image, "n_frames", 1)
        if frames > options.max_pages:
            raise DocumentParseError(name, f"image has {frames} frames, over the limit of {options.max_pages} pages")
        reason = (
            ocr_unavailable(options.ocr_engine, options.ocr_languages, options.tessdata_dir)
            if options.ocr
            else "OCR is switched off"
        )
        if reason:  # after the limits: a refusal must not depend on what this machine has installed
            raise DocumentParseError(name, f"an image file needs OCR to be read: {reason}")
        pages: dict[int, PageLines] = {}
        try:
            for index, frame in enumerate(ImageSequence.Iterator(image)):
                if frame.size[0] * frame.size[1] > options.max_image_pixels:
                    raise DocumentParseError(name, f"frame {index + 1} is over the pixel limit: refused")
                gray = frame.convert("L")
                pl = PageLines(width=float(gray.width), height=float(gray.height), body_font="ocr", ocr=True)
                cells = ocr_lines(gray, options.ocr_engine, options.ocr_languages, options.tessdata_dir)
                pl.lines = [Line(c.text, c.l, c.t, c.r, c.b, "ocr") for c in cells]
                pages[index] = pl
        except (OSError, ValueError, EOFError) as exc:
            raise DocumentParseError(name, f"not a readable image (truncated or corrupt: {exc})") from exc
    blocks = layout_pages(pages, {})
    parsed = [
        ParsedPage(
            i,
            blocks.get(i, []),
            options.ocr_engine,
            page_mode(options.ocr_engine),
            width=pages[i].width,
            height=pages[i].height,
        )
        for i in sorted(pages)
    ]
    warnings = [] if any(p.blocks for p in parsed) else ["no text found by OCR"]
    return ParsedDocument(
        title=Path(name).stem, mime=file.mime, source_kind=file.source_kind, pages=parsed, warnings=warnings
    )
