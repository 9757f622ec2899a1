"""Page images and figure crops as PNG: PDF pages rendered by pypdfium2, image files' frames.

Page renders are 72 dpi (``PAGE_IMAGE_SCALE``), figure crops 144 dpi (``FIGURE_IMAGE_SCALE``); any
render is scaled down to stay under ``MAX_RENDER_PIXELS`` (giant page boxes).
"""

from __future__ import annotations

import math

from kb_assets.parsing.model import ParsedPage
from kb_assets.parsing.options import (
    FIGURE_IMAGE_SCALE,
    MAX_RENDER_PIXELS,
    PAGE_IMAGE_SCALE,
)


def safe_scale(width: float, height: float, scale: float) -> float:
    """The scale, lowered so that the render stays under MAX_RENDER_PIXELS (giant page boxes)."""
    pixels = max(width, 1.0) * max(height, 1.0) * scale * scale
    if pixels > MAX_RENDER_PIXELS:
        scale *= math.sqrt(MAX_RENDER_PIXELS / pixels)
    return scale


def png_bytes(image) -> bytes:
    """A PIL image as PNG bytes."""
    from io import BytesIO

    buffer = BytesIO()
    image.save(buffer, format="PNG", compress_level=1)
    return buffer.getvalue()


def render_pdf_images(
    pdf, parsed: list[ParsedPage], boxes: dict[int, list[tuple[float, float, float, float]]], color: set[int]
) -> None:
    """Page renders (72 dpi) and figure crops (144 dpi) as PNG, into the parsed pages and blocks.
    Pages without pictures (``color``: the pages with some) are rendered in grayscale: PNG encoding
    of a grayscale page costs a third of an RGB one (measured 16 vs 40 ms a page) and text loses
    nothing but the colour of links."""
    import dataclasses

    for page in parsed:
        pdf_page = pdf[page.page_index]
        width, height = pdf_page.get_size()
        scale = safe_scale(width, height, PAGE_IMAGE_SCALE)
        grayscale = page.page_index not in color
        page.image_png = png_bytes(pdf_page.render(scale=scale, grayscale=grayscale).to_pil())
        figures = iter(boxes.get(page.page_index, []))
        for n, block in enumerate(page.blocks):
            if block.kind != "figure":
                continue
            box = next(figures, None)
            if box is None:
                break
            left, top, right, bottom = box
            crop = (max(left, 0.0), max(height - bottom, 0.0), max(width - right, 0.0), max(top, 0.0))
            crop_scale = safe_scale(right - left, bottom - top, FIGURE_IMAGE_SCALE)
            image = pdf_page.render(scale=crop_scale, crop=crop).to_pil()
            page.blocks[n] = dataclasses.replace(block, image_png=png_bytes(image))
