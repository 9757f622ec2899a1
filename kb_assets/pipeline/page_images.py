"""Page images: PNG renders of the pages of PDF and image documents, apart from the parse.

A page record carries the key its image will have (``pages/<documentId>/<version>/<pageIndex>.png``)
from the moment it is parsed; the render comes later and off the path to publication: the
``page_images`` asset renders a run's missing pages after its documents are published, and the
service renders a page on its image's first request (``ensure_page_image``). Either way the PNG is
made from the stored original and cached in the object store.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from kb_assets.parsing.render import render_page_images
from kb_assets.pipeline.step_results import RenderedImages
from kb_assets.stores.catalog import Catalog, Document
from kb_assets.stores.objects import ObjectStore

PAGE_IMAGE_KINDS = ("pdf", "image")  # source kinds whose pages have an image
KEY = re.compile(r"^pages/(?P<document_id>[A-Za-z0-9_-]+)/(?P<version>[0-9a-f]{64})/(?P<page_index>\d{1,6})\.png$")


def page_image_key(document_id: str, version: str, page_index: int) -> str:
    return f"pages/{document_id}/{version}/{page_index}.png"


def has_page_images(source_kind: str | None) -> bool:
    return source_kind in PAGE_IMAGE_KINDS


def original_of(doc: Document, version: str) -> str:
    """The object key of the document's original at that version (content-addressed)."""
    return ObjectStore.original_key(version, PurePosixPath(doc.source_path).suffix)


def render_missing(doc: Document, catalog: Catalog, store: ObjectStore) -> RenderedImages:
    """Render the document's page images that the object store lacks; counts of rendered and present."""
    pages = [p for p in catalog.read_pages(doc.document_id) if p["image_key"]]
    missing = [p for p in pages if not store.exists(p["image_key"])]
    for version in sorted({p["version"] for p in missing}):
        original = original_of(doc, version)
        if not store.exists(original):
            continue
        wanted = [p for p in missing if p["version"] == version]
        renders = render_page_images(store.get(original), doc.source_kind or "", [p["page_index"] for p in wanted])
        for page in wanted:
            if page["page_index"] in renders:
                store.put(page["image_key"], renders[page["page_index"]])
    return RenderedImages(rendered=len(missing), present=len(pages) - len(missing))


def ensure_page_image(key: str, catalog: Catalog, store: ObjectStore) -> bool:
    """Make a page image exist if its page does (the key is the image key of a stored page whose
    original is stored): render and cache it. True when it exists."""
    if store.exists(key):
        return True
    match = KEY.match(key)
    if match is None:
        return False
    doc = catalog.get_document(match["document_id"])
    if doc is None or doc.source_kind is None or not has_page_images(doc.source_kind):
        return False
    page_index = int(match["page_index"])
    page = catalog.page_facts([(doc.document_id, page_index)]).get((doc.document_id, page_index))
    original = original_of(doc, match["version"])
    if page is None or page["image_key"] != key or not store.exists(original):
        return False
    renders = render_page_images(store.get(original), doc.source_kind, [page_index])
    if page_index not in renders:
        return False
    store.put(key, renders[page_index])
    return True
