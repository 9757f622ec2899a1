"""Printed tables of contents: find the navigation pages and read their entries as tree entries.

A *navigation page* is a page whose lines are mostly entries that end in a page number: dot-leader
lines (``2.1 Basic types . . . . 3``, ``seek . . . . 29, 31``) and numbered title lines without leaders
(``3 结构 2``). These are tables of contents, lists of tables/figures and back-of-book indexes; they
list every title, so search demotes them (``pages.is_toc``).

The printed table of contents is the first run of navigation pages in the first half of the document.
Its entries give printed page numbers; they are mapped to physical pages through the printed page
labels of the pages after it (``pages.page_label``), else through the page offset found most often
by looking each title up on the pages after the table of contents.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from kb_assets.lib.text import normalize_ws

_PAGE_NO = r"(?:\d{1,4}|[ivxlcdm]{1,7})"
# "Title . . . . 12" / "Title.......12, 15" (dot leaders, possibly several page numbers)
_LEADER_ENTRY = re.compile(
    rf"^(?P<title>.*?\S)\s*(?:\.\s?){{3,}}\s*(?P<page>{_PAGE_NO})(?:\s*[,–-]\s*{_PAGE_NO})*\s*$", re.IGNORECASE
)
_LEADER_ANYWHERE = re.compile(rf"(?:\.\s?){{4,}}\s*{_PAGE_NO}\b", re.IGNORECASE)
# "12.3 Title 45" / "A Appendix 232" (a numbered title without leaders, ending in its page)
_NUMBERED_ENTRY = re.compile(
    rf"^(?P<number>(?:\d{{1,3}}|[A-Z])(?:\.\d{{1,3}})*\.?)\s+(?P<title>\S.*?)\s+(?P<page>{_PAGE_NO})$", re.IGNORECASE
)
_NUMBERING = re.compile(r"^(?:\d{1,3}|[A-Z])(?:\.\d{1,3})*\.?(?=\s)")
_LIST_OF = re.compile(r"^(list of (tables|figures|examples|listings)|表格|插图|图表)", re.IGNORECASE)

MIN_ENTRIES = 3  # a navigation page has at least this many entries...
MIN_ENTRY_SHARE = 0.5  # ...making up at least this share of its lines


@dataclass(frozen=True)
class TocEntry:
    level: int  # 1 = top
    title: str  # without numbering, e.g. "Basic types"
    label: str  # the printed page, e.g. "3" or "iv"
    numbered_title: str  # as printed, e.g. "2.1 Basic types"


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.split("\n") if line.strip()]


def is_navigation_page(text: str) -> bool:
    """Mostly entries that end in a page number (table of contents, list of tables, index)."""
    lines = _lines(text)
    if not lines:
        return False
    leaders = sum(len(_LEADER_ANYWHERE.findall(line)) for line in lines)
    if leaders < MIN_ENTRIES:
        return False
    numbered = sum(1 for line in lines if not _LEADER_ANYWHERE.search(line) and _NUMBERED_ENTRY.match(line))
    return (leaders + numbered) >= MIN_ENTRY_SHARE * max(len(lines), leaders)


def navigation_pages(pages: list[dict]) -> list[int]:
    """page_index of every navigation page (tables of contents, lists of tables, indexes)."""
    return [p["page_index"] for p in pages if is_navigation_page(p["text"])]


def printed_toc_pages(pages: list[dict], navigation: list[int] | None = None) -> list[int]:
    """The first run of navigation pages starting in the first half of the document (one
    non-navigation page may interrupt it, e.g. a blank page)."""
    navigation = sorted(navigation if navigation is not None else navigation_pages(pages))
    if not pages or not navigation:
        return []
    last = max(p["page_index"] for p in pages)
    if navigation[0] > last // 2:
        return []
    run = [navigation[0]]
    for index in navigation[1:]:
        if index - run[-1] > 2:
            break
        run.append(index)
    return run


def toc_entries(pages: list[dict], toc_pages: list[int]) -> list[TocEntry]:
    """The entries of the table of contents, in order; lists of tables/figures are left out."""
    entries: list[TocEntry] = []
    by_index = {p["page_index"]: p for p in pages}
    in_list_of = False
    for index in toc_pages:
        for line in _lines(by_index[index]["text"]):
            if _LIST_OF.match(line):
                in_list_of = True
                continue
            match = _LEADER_ENTRY.match(line) or _NUMBERED_ENTRY.match(line)
            if not match or in_list_of:
                continue
            printed = (
                " ".join(match.group("title").split())
                if "number" not in match.groupdict()
                else f"{match.group('number')} {' '.join(match.group('title').split())}"
            )
            numbering = _NUMBERING.match(printed)
            if numbering and numbering.group(0).isalpha() and not printed[numbering.end() :].strip()[:1].isupper():
                numbering = None  # "A new thing", not appendix "A Appendix"
            if numbering:
                number = numbering.group(0).rstrip(".")
                level = number.count(".") + 1
                title = printed[numbering.end() :].strip()
            else:
                level, title = 1, printed
            if title:
                entries.append(TocEntry(level, title, match.group("page").lower(), printed))
    return entries


def _roman(label: str) -> bool:
    return bool(re.fullmatch(r"[ivxlcdm]+", label))


def map_entries(entries: list[TocEntry], pages: list[dict], toc_pages: list[int]) -> list[tuple[int, str, int]]:
    """(level, title, page_index) of the entries whose printed page maps to a physical page.

    Entries are in reading order, so their pages never go back: mapping stops at the first entry
    that would (e.g. a list of figures that restarts at page 1).
    """
    after = [p for p in sorted(pages, key=lambda p: p["page_index"]) if p["page_index"] > max(toc_pages)]
    by_label: dict[str, int] = {}
    for page in after:
        label = (page.get("page_label") or "").strip().lower()
        if label and label not in by_label:
            by_label[label] = page["page_index"]
    labelled = sum(1 for e in entries if e.label in by_label)
    offset = None
    if labelled < max(1, len(entries) // 2):
        offset = _page_offset(entries, after)
        if offset is None:
            return []
    mapped: list[tuple[int, str, int]] = []
    last_page = max(p["page_index"] for p in pages)
    for entry in entries:
        if offset is None or _roman(entry.label):
            page_index = by_label.get(entry.label)
        else:
            page_index = int(entry.label) + offset
        if page_index is None or not 0 <= page_index <= last_page:
            continue
        if mapped and page_index < mapped[-1][2]:
            break
        mapped.append((entry.level, entry.title, page_index))
    return mapped


def _page_offset(entries: list[TocEntry], after: list[dict]) -> int | None:
    """The physical-minus-printed page offset most titles agree on (None when none is found)."""
    texts = [(p["page_index"], normalize_ws(p["text"]).lower()) for p in after]
    votes: Counter[int] = Counter()
    for entry in entries:
        if _roman(entry.label):
            continue
        printed = int(entry.label)
        title = normalize_ws(entry.title).lower()
        if len(title) < 4:
            continue
        found = [index for index, text in texts if title in text]
        if found:
            # the page nearest to the printed number is the section's own page (not a mention)
            votes[min(found, key=lambda index: abs(index - printed)) - printed] += 1
    if not votes:
        return None
    offset, count = votes.most_common(1)[0]
    return offset if count >= 2 or len(entries) <= 2 else None
