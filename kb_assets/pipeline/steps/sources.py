"""raw_files and parsed_pages: the original bytes in the object store, and the pages parsed from them."""

from __future__ import annotations

import dataclasses
import json
import mimetypes
import tempfile
from pathlib import Path, PurePosixPath

from kb_assets.parsing import DocumentParseError, ParseOptions, parse_document
from kb_assets.pipeline.page_images import has_page_images, page_image_key
from kb_assets.pipeline.planning import sha256_bytes
from kb_assets.pipeline.step_results import ParsedPages, StoredFile
from kb_assets.pipeline.steps.common import DocumentFailed, current, made_again, version_of
from kb_assets.pipeline.versions import after
from kb_assets.stores.catalog import Catalog, Document
from kb_assets.stores.objects import ObjectStore
from kb_assets.stores.paths import source_path


# raw_files -----------------------------------------------------------------------------------
def store_raw_file(
    doc: Document,
    catalog: Catalog,
    store: ObjectStore,
    max_bytes: int,
    run_id: str,
    source_options: dict | None = None,
    version: str = "1",
) -> StoredFile:
    """Copy the source bytes (a local file or an s3:// object, read with ``source_options``) into the
    content-addressed object store and record their version."""
    try:
        data = source_path(doc.source_uri, source_options).read_bytes()
    except FileNotFoundError:
        raise DocumentFailed(f"{doc.source_uri}: source file not found") from None
    except OSError as error:
        raise DocumentFailed(f"{doc.source_uri}: cannot read source file ({error})") from None
    if not data:
        raise DocumentFailed(f"{doc.source_path}: empty file")
    if len(data) > max_bytes:
        raise DocumentFailed(
            f"{doc.source_path}: {len(data)} bytes exceeds the {max_bytes}-byte limit (KB_PARSE_MAX_FILE_BYTES)"
        )
    sha = sha256_bytes(data)
    suffix = PurePosixPath(doc.source_path).suffix
    key = store.put(ObjectStore.original_key(sha, suffix), data)
    mime = mimetypes.guess_type(doc.source_path)[0] or "application/octet-stream"
    with catalog.connect() as conn:
        catalog.update_document(
            conn,
            doc.document_id,
            version=sha,
            object_key=key,
            size_bytes=len(data),
            mime=mime,
            last_run_id=run_id,
            **made_again(doc),
        )
        catalog.record_step(conn, doc.document_id, "raw_files", version)
    return StoredFile(version=sha, bytes=len(data))


# parsed_pages --------------------------------------------------------------------------------
def parse_pages(
    doc: Document, catalog: Catalog, store: ObjectStore, options: ParseOptions, run_id: str, version: str = "1"
) -> ParsedPages:
    """Parse the stored original into page records (text, blocks, parser, mode, label; summaries and
    keywords are ``pageindex_trees``' work) and store figure crops (PDF) in the object store:
    ``figures/{document_id}/{version}/{page_index}-{n}.png`` (key on the figure block). Pages of PDF
    and image documents get the key of their page image (``page_images.page_image_key``), rendered
    later, off the path to publication (the ``page_images`` asset, or on first request).

    Crops are written before the page rows (one transaction); a failed parse writes nothing, and
    the images of earlier versions are removed once the new pages are committed. The source's local copy
    lives in ``options.scratch_dir`` (removed on every exit path; a killed run's by the next run).
    """
    doc_version = version_of(doc)
    existing = catalog.read_pages(doc.document_id)
    if existing and all(p["version"] == doc_version for p in existing) and current(doc, "parsed_pages", version):
        return ParsedPages(pages=len(existing), skipped=True, mode=existing[0]["mode"])
    suffix = PurePosixPath(doc.source_path).suffix
    name = PurePosixPath(doc.source_path).name
    with tempfile.TemporaryDirectory(dir=options.scratch_dir, prefix="parse-") as tmp:
        local = Path(tmp) / f"source{suffix.lower()}"
        if doc.object_key is None:
            raise RuntimeError(f"{doc.source_path}: no stored original to parse (raw_files stores it)")
        local.write_bytes(store.get(doc.object_key))
        try:
            parsed = parse_document(local, name=name, options=options)
        except DocumentParseError as error:
            raise DocumentFailed(str(error)) from None
    if not parsed.pages or not any(page.text.strip() for page in parsed.pages):
        no_text = "; ".join(parsed.warnings[-3:]) or "empty document"
        raise DocumentFailed(f"{name}: no text found ({no_text})")
    pages: list[dict] = []
    images = 0
    with_images = has_page_images(parsed.source_kind)
    for page in parsed.pages:
        image_key = page_image_key(doc.document_id, doc_version, page.page_index) if with_images else None
        blocks, figure = [], 0
        for block in page.blocks:
            record = {k: v for k, v in dataclasses.asdict(block).items() if v is not None and k != "image_png"}
            if block.kind == "figure" and block.image_png:
                figure += 1
                key = f"figures/{doc.document_id}/{doc_version}/{page.page_index}-{figure}.png"
                record["image_key"] = store.put(key, block.image_png)
                images += 1
            blocks.append(record)
        pages.append(
            {
                "page_index": page.page_index,
                "page_label": page.label,
                "text": page.text,
                "blocks": blocks,
                "parser": page.parser,
                "mode": page.mode,
                "image_key": image_key,
                "width": page.width,
                "height": page.height,
            }
        )
    title = parsed.title or name
    unchanged = title == doc.title and same_pages(existing, pages, doc_version)
    with catalog.connect() as conn:
        if not unchanged:
            catalog.replace_pages(conn, doc.document_id, doc_version, pages, run_id, version)
        catalog.update_document(
            conn,
            doc.document_id,
            title=title,
            mime=parsed.mime,
            source_kind=parsed.source_kind,
            page_count=len(pages),
            last_run_id=run_id,
            **made_again(doc),
        )
        catalog.record_step(
            conn, doc.document_id, "parsed_pages", version, invalidate=() if unchanged else after("parsed_pages")
        )
    for old_version in {p["version"] for p in existing} - {doc_version}:
        store.delete_prefix(f"pages/{doc.document_id}/{old_version}")
        store.delete_prefix(f"figures/{doc.document_id}/{old_version}")
    modes: dict[str, int] = {}
    for row in pages:
        modes[row["mode"]] = modes.get(row["mode"], 0) + 1
    return ParsedPages(
        pages=len(pages),
        unchanged=unchanged,
        mode=pages[0]["mode"],
        modes=modes,
        images=images,
        warnings=tuple(parsed.warnings[:20]),
    )


PAGE_FIELDS = ("page_index", "page_label", "text", "blocks", "parser", "mode", "image_key")


def same_pages(stored: list[dict], pages: list[dict], version: str) -> bool:
    """Whether freshly parsed pages equal the stored pages of the same file version (blocks compared as
    the JSON they are stored as)."""
    if len(stored) != len(pages) or any(p["version"] != version for p in stored):
        return False
    for old, new in zip(stored, pages, strict=False):
        new = {**new, "blocks": json.loads(json.dumps(new["blocks"], ensure_ascii=False))}
        if any(old.get(name) != new.get(name) for name in PAGE_FIELDS):
            return False
    return True
