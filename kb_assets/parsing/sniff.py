"""What a file really is, from its first bytes, and whether it is safe to unpack.

``sniff`` names the content (``pdf``, ``docx``/``pptx``/``xlsx``, ``zip``, ``ole2``, ``encrypted-office``,
an image format, ``binary`` or ``text``), independent of the file name. ``parse_document`` compares it
with the extension: a supported format under the wrong extension is parsed as what it is (with a
warning), anything else is refused with a reason.

``check_zip`` guards the Office formats (ZIP packages) against decompression bombs: the declared
unpacked sizes of all members, the packing ratio of each large member and the member count are
checked before docling opens the package.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

from kb_assets.parsing.model import DocumentParseError
from kb_assets.parsing.options import MAX_PACK_RATIO, MAX_ZIP_MEMBERS

HEAD_BYTES = 8192
IMAGE_KINDS = ("png", "jpeg", "tiff", "gif", "bmp", "webp")
PACKAGES = ("docx", "pptx", "xlsx")  # Office Open XML: ZIP packages, checked by check_zip
# what a format expects to find (formats.py): every image kind is "image"
CONTENT_FAMILIES = ("pdf", *PACKAGES, "image", "text")

_UNICODE_BOMS = (b"\xff\xfe", b"\xfe\xff", b"\x00\x00\xfe\xff")  # UTF-16/32 text holds NUL bytes
_OLE2 = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_IMAGE_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "png"),
    (b"\xff\xd8\xff", "jpeg"),
    (b"II*\x00", "tiff"),
    (b"MM\x00*", "tiff"),
    (b"GIF87a", "gif"),
    (b"GIF89a", "gif"),
    (b"BM", "bmp"),
)
_DESCRIBE = {
    "pdf": "a PDF",
    "docx": "a Word document (DOCX)",
    "pptx": "a PowerPoint presentation (PPTX)",
    "xlsx": "an Excel workbook (XLSX)",
    "zip": "a ZIP archive",
    "ole2": "a legacy Office 97-2003 file (.doc/.xls/.ppt)",
    "encrypted-office": "a password-protected Office document",
    "binary": "binary data",
    "text": "text",
}


def describe(kind: str) -> str:
    return _DESCRIBE.get(kind) or f"a {kind.upper()} image"


def family(kind: str) -> str:
    """The content family of a sniffed kind: ``image`` for every image format, else the kind."""
    return "image" if kind in IMAGE_KINDS else kind


def sniff(path: Path) -> str:
    """What the file's first bytes say it is (see the module docstring)."""
    with open(path, "rb") as handle:
        head = handle.read(HEAD_BYTES)
    if b"%PDF-" in head[:1024]:
        return "pdf"
    if head.startswith(b"PK\x03\x04"):
        return _zip_kind(path)
    if head.startswith(_OLE2):
        with open(path, "rb") as handle:
            data = handle.read(1 << 20)
        # an encrypted OOXML package is an OLE2 file with an "EncryptedPackage" stream (UTF-16 name)
        return "encrypted-office" if "EncryptedPackage".encode("utf-16-le") in data else "ole2"
    for magic, kind in _IMAGE_MAGIC:
        if head.startswith(magic) and (kind != "bmp" or len(head) > 26):
            return kind
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "webp"
    if not head.startswith(_UNICODE_BOMS) and b"\x00" in head:
        return "binary"
    return "text"


def _zip_kind(path: Path) -> str:
    try:
        with zipfile.ZipFile(path) as archive:
            names = set(archive.namelist())
    except (zipfile.BadZipFile, OSError, ValueError):
        return "zip"  # truncated or damaged: the format reader reports it
    if "[Content_Types].xml" in names:
        for prefix, kind in (("word/", "docx"), ("ppt/", "pptx"), ("xl/", "xlsx")):
            if any(name.startswith(prefix) for name in names):
                return kind
    return "zip"


def check_zip(path: Path, name: str, max_unpacked_bytes: int) -> None:
    """Refuse a ZIP package that is encrypted or would unpack to more than the limits allow."""
    try:
        with zipfile.ZipFile(path) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise DocumentParseError(
            name, f"not a valid Office file (the ZIP package is truncated or corrupt: {exc})"
        ) from exc
    if len(members) > MAX_ZIP_MEMBERS:
        raise DocumentParseError(name, f"the package has {len(members)} parts (limit {MAX_ZIP_MEMBERS}): refused")
    if any(m.flag_bits & 0x1 for m in members):
        raise DocumentParseError(name, "encrypted ZIP package (a password is required)")
    total = sum(m.file_size for m in members)
    if total > max_unpacked_bytes:
        raise DocumentParseError(
            name,
            f"unpacks to {total} bytes, over the limit of {max_unpacked_bytes} (KB_PARSE_MAX_UNPACKED_BYTES): "
            "refused as a possible decompression bomb",
        )
    for m in members:
        if m.file_size > 10 * 1024 * 1024 and m.file_size > MAX_PACK_RATIO * max(m.compress_size, 1):
            raise DocumentParseError(
                name,
                f"part {m.filename!r} unpacks {m.file_size // max(m.compress_size, 1)}x its packed size "
                f"(limit {MAX_PACK_RATIO}x): refused as a decompression bomb",
            )
