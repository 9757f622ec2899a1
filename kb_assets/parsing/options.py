"""Fixed limits and scales of parsing that no setting changes. What a parse may do and take, the
settings' part, is :class:`kb_assets.settings.ParseOptions` (``KB_PARSE_*``, ``KB_OCR_*``, ``KB_PARSE_WORKERS``,
``TESSDATA_PREFIX``, ``DOCLING_ARTIFACTS_PATH``)."""

MAX_PACK_RATIO = 200  # a ZIP member unpacking to more than 200x its packed size (and > 10 MB) is a bomb
MAX_ZIP_MEMBERS = 20_000
PAGE_IMAGE_SCALE = 1.0  # page renders: 72 dpi
PAGE_IMAGE_MAX_SIDE = 1400  # page renders of image files: at most this many pixels a side
FIGURE_IMAGE_SCALE = 2.0  # figure crops: 144 dpi
OCR_DPI = 300
MAX_RENDER_PIXELS = 40_000_000  # any render (page, crop, OCR) is scaled down to stay under this
