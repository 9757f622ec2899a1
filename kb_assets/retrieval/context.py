"""The passage handed to the reader: at most ``budget`` characters of the result's page, chosen for the
question (issue 15).

A chunk is 200-400 characters of text (tables up to 800); the detail a question asks for is often in the
chunk before or after the one that matched, or elsewhere on the same page. ``passages`` gives every
result the window of its page's text (Postgres ``pages.text``, read with the page facts every search
already reads: no extra round trip) of at most ``budget`` characters that covers the most question
terms, each weighted by its rarity among the result pages (a term on every page weighs little, an
identifier such as ``write.table`` or ``--no-same-owner`` found on one weighs most), cut at whitespace.
Holding the whole chunk adds ``CHUNK_WEIGHT`` x an average term's weight (the chunk matched the query
by dense and BM25 score, which see meaning the terms miss); ties go to the window nearest the chunk. A
page's second result gets a window that shows what its first did not: occurrences already shown count
for nothing.

Terms are matched case-folded, a Latin form at the start of a word (a one-letter form as a whole word),
a Chinese form across the line breaks a PDF leaves inside Chinese text. The chunk is found in its page
as it is, else ignoring whitespace (chunks drop the spaces next to Chinese characters); a chunk not
found (tables rendered as Markdown, 1-2% of results) gives its own content, cut to the budget.

Issue 53: a table page's context is its head and compact rows (the whole table when it fits, else the rows of the
question's terms and its analyses' line items, then their neighbours; the periods asked where even those do not
fit: ``table_passage``), and a prose page's the sentences that hold the question's terms and figures
(``prose_passage``) where they hold more of it than one window.

Measured on the dev split of ``benchmarks/detail_questions.jsonl`` (pageindex), answer-in-context @1 /
@5: the window around the chunk with the most distinct terms (before) en 0.84 / 0.93, zh 0.54 / 0.71;
this window en 0.86 / 0.95, zh 0.65 / 0.81 (zh: every question whose answer is on a top-5 result's page).
Chunk weight 0 (the chunk counts for nothing): en @5 0.92; 2: zh 0.63 / 0.79; a window that must hold
the chunk: en 0.84 / 0.95, zh 0.56 / 0.73 (with the whitespace-blind chunk finding not yet there).
"""

from __future__ import annotations

import bisect
import functools
import math
import re
from collections.abc import Sequence

from kb_assets.retrieval.lexical_query import code_tokens
from kb_assets.retrieval.rerank import question_words

CHUNK_WEIGHT = 1.0
NEXT_TO = 0.75  # a sentence next to one chosen, in units of an average term's weight (an answer reads on)
# what holding the whole chunk is worth, in units of an average term's weight

Term = str | tuple[str, ...]  # a term: one form, or several forms any of which counts for it


def question_terms(query: str, translations: dict[str, list[str]] | None = None) -> list[Term]:
    """The question's content words with their forms (``rerank.question_words``: stems, a Chinese word's
    English words) and its identifiers and code tokens kept whole."""
    return [word.forms for word in question_words(query, translations)] + list(code_tokens(query))


def _find(page: str, content: str) -> tuple[int, int] | None:
    """(start, end) of the content in the page: as it is, else ignoring whitespace (a PDF's line breaks,
    the spaces chunking drops next to Chinese characters)."""
    head, tail = content.strip()[:48], content.strip()[-48:]
    start = page.find(head) if head else -1
    if start >= 0:
        end = page.find(tail, start)
        return start, min(end + len(tail) if end >= 0 else start + len(content.strip()), len(page))
    kept = [i for i, ch in enumerate(page) if not ch.isspace()]
    squeezed, flat = "".join(page[i] for i in kept), "".join(content.split())
    start = squeezed.find(flat[:40]) if flat else -1
    if start < 0:
        return None
    end = squeezed.find(flat[-40:], start)
    end = end + len(flat[-40:]) if end >= 0 else start + len(flat)
    return kept[start], kept[min(end, len(kept)) - 1] + 1


def _snap(text: str, start: int, end: int) -> tuple[int, int]:
    """[start, end) without a word cut at either edge."""
    if start > 0 and not text[start - 1].isspace():
        space = text.find(" ", start, min(end, start + 24))
        start = space + 1 if space >= 0 else start
    if end < len(text) and not text[end].isspace():
        space = text.rfind(" ", max(start, end - 24), end)
        end = space if space > start else end
    return start, end


def _pattern(form: str) -> str:
    """A form as a regular expression: Chinese across whitespace, Latin as it is (word edges are checked
    on each match: a look-behind in front of the pattern makes ``re`` try every position, 30x slower)."""
    return r"\s*".join(map(re.escape, form)) if not form[:1].isascii() else re.escape(form)


def _word_edges(folded: str, start: int, end: int) -> bool:
    """A Latin match begins a word (a one-letter one is a whole word); a Chinese one always counts."""
    if not folded[start].isascii():
        return True
    if start > 0 and _alnum(folded[start - 1]):
        return False
    return end - start > 1 or end == len(folded) or not _alnum(folded[end])


def _alnum(ch: str) -> bool:
    return ch.isascii() and ch.isalnum()


def occurrences(terms: list[Term], text: str) -> dict[tuple[str, ...], list[tuple[int, int]]]:
    """Each term's (start, end) spans in the text, by its forms (any form counts for it)."""
    folded = text.casefold()
    squeezed = "".join(folded.split())  # a plain substring test first: most terms are not on most pages
    out: dict[tuple[str, ...], list[tuple[int, int]]] = {}
    for term in terms:
        forms = tuple(f.casefold() for f in ((term,) if isinstance(term, str) else term) if f)
        if not forms or forms in out:
            continue
        if not any(f in (folded if f[:1].isascii() else squeezed) for f in forms):
            out[forms] = []
            continue
        pattern = "|".join(_pattern(f) for f in sorted(forms, key=len, reverse=True))
        out[forms] = [m.span() for m in re.finditer(pattern, folded) if _word_edges(folded, *m.span())]
    return out


def rarity(found: list[dict[tuple[str, ...], list[tuple[int, int]]]]) -> dict[tuple[str, ...], float]:
    """Each term's weight from its ``occurrences`` in n texts (the result pages):
    log(1 + (n + 1) / (df + 0.5)), df the texts holding it."""
    keys = {key for spans in found for key in spans}
    return {key: math.log(1 + (len(found) + 1) / (sum(1 for spans in found if spans.get(key)) + 0.5)) for key in keys}


def _best(
    length: int,
    hits: list[tuple[int, int, tuple[str, ...]]],
    weight: dict[tuple[str, ...], float],
    budget: int,
    chunk: tuple[int, int] | None = None,
    chunk_value: float = 0.0,
) -> tuple[int, float]:
    """(start, value) of the best window of ``budget`` characters over a text of ``length``: the weight of
    the distinct terms it holds (plus ``chunk_value`` when it holds the whole ``chunk``); ties go to the
    window nearest the chunk (else the first). Windows start at an occurrence or end at one (or hold the
    chunk at either edge): the best set of occurrences is reached so. One pass: an occurrence enters
    when the window's end passes its end, and leaves when the window's start passes its start."""
    last = max(0, length - budget)
    starts = {0} | {max(0, min(a, last)) for a, _, _ in hits} | {max(0, min(e - budget, last)) for _, e, _ in hits}
    if chunk:
        starts |= {max(0, min(chunk[0], last)), max(0, min(chunk[1] - budget, last))}
    middle = (chunk[0] + chunk[1]) / 2 if chunk else None
    by_end = sorted(range(len(hits)), key=lambda i: hits[i][1])
    by_start = sorted(range(len(hits)), key=lambda i: hits[i][0])
    entered = left = 0
    counts: dict[tuple[str, ...], int] = {}
    inside: set[int] = set()
    value = 0.0
    best, best_key = 0, None
    for a in sorted(starts):
        b = a + budget
        while left < len(by_start) and hits[by_start[left]][0] < a:
            if by_start[left] in inside:
                key = hits[by_start[left]][2]
                counts[key] -= 1
                value -= weight[key] if counts[key] == 0 else 0.0
            left += 1
        while entered < len(by_end) and hits[by_end[entered]][1] <= b:
            if hits[by_end[entered]][0] >= a:
                inside.add(by_end[entered])
                key = hits[by_end[entered]][2]
                counts[key] = counts.get(key, 0) + 1
                value += weight[key] if counts[key] == 1 else 0.0
            entered += 1
        total = value + (chunk_value if chunk and a <= chunk[0] and chunk[1] <= b else 0.0)
        rank = (round(total, 9), -abs((a + b) / 2 - middle) if middle is not None else -a)
        if best_key is None or rank > best_key:
            best, best_key = a, rank
    # centre the window on what it holds, so that cutting at whitespace loses none of it
    held = [(h, e) for h, e, _ in hits if best <= h and e <= best + budget]
    if chunk and best <= chunk[0] and chunk[1] <= best + budget:
        held.append(chunk)
    if held:
        low, high = min(h for h, _ in held), max(e for _, e in held)
        best = max(0, min(last, int(low - (budget - (high - low)) / 2)))
    assert best_key is not None, "no window ranked"  # starts always holds 0
    return best, best_key[0]


def coverage(
    spans: dict[tuple[str, ...], list[tuple[int, int]]],
    length: int,
    weights: dict[tuple[str, ...], float] | None = None,
    budget: int = 800,
) -> float:
    """The weighted share of the terms (their ``occurrences`` in a page of ``length`` characters) that the
    page's best window of ``budget`` characters holds (0..1)."""
    weight = {key: (weights or {}).get(key, 1.0) for key in spans}
    total = sum(weight.values())
    if not total:
        return 0.0
    hits = [(a, b, key) for key, found in spans.items() for a, b in found]
    return _best(length, hits, weight, budget)[1] / total


def window(
    page_text: str,
    content: str,
    terms: list[Term],
    budget: int = 800,
    weights: dict[tuple[str, ...], float] | None = None,
    shown: Sequence[tuple[int, int]] = (),
    chunk_weight: float = CHUNK_WEIGHT,
    found: dict[tuple[str, ...], list[tuple[int, int]]] | None = None,
) -> tuple[str, int, int]:
    """(text, start, end): the window of the page for the chunk and the terms (see the module docstring);
    ``shown``: spans of this page already given, whose occurrences count for nothing. ``text`` is the page,
    or the chunk's content when the chunk is not found on it."""
    text = page_text or ""
    located = _find(text, content)
    if located is None:
        text = content[:budget]
        return text, 0, len(text)
    start, end = located
    if len(text) <= budget:
        return text, 0, len(text)
    spans = found if found is not None and text is page_text else occurrences(terms, text)
    weight = {key: (weights or {}).get(key, 1.0) for key in spans}
    average = sum(weight.values()) / len(weight) if weight else 1.0
    hits = [
        (a, b, key) for key, found in spans.items() for a, b in found if not any(s <= a and b <= e for s, e in shown)
    ]
    best, _ = _best(len(text), hits, weight, budget, (start, end), chunk_weight * average)
    a, b = _snap(text, best, best + budget)
    return text, a, b


def page_passage(
    page_text: str,
    content: str,
    terms: list[Term],
    budget: int = 800,
    weights: dict[tuple[str, ...], float] | None = None,
) -> str:
    """At most ``budget`` characters of the page for the chunk and the terms (see the module docstring)."""
    text, a, b = window(page_text, content, terms, budget, weights)
    return text[a:b].strip()


SENTENCE_END = re.compile(
    r"(?<=[.!?;:])[\"”)]?\s+(?=[A-Z0-9(\"“$])|(?<=[。！？；])\s*|\n\s*\n|\n(?=\s*(?:[-•*#|]|\d+\.\s))"
)


def sentences(text: str) -> list[tuple[int, int]]:
    """(start, end) of the text's sentences (a paragraph break, a list item or a table row also ends one)."""
    spans, start = [], 0
    for match in SENTENCE_END.finditer(text):
        if text[start : match.start()].strip():
            spans.append((start, match.start()))
        start = match.end()
    if text[start:].strip():
        spans.append((start, len(text)))
    return spans


def prose_passage(
    page_text: str,
    content: str,
    terms: list[Term],
    budget: int,
    weights: dict[tuple[str, ...], float] | None = None,
    shown: Sequence[tuple[int, int]] = (),
    chunk_weight: float = CHUNK_WEIGHT,
    found: dict[tuple[str, ...], list[tuple[int, int]]] | None = None,
) -> tuple[str, tuple[int, int]]:
    """(text, shown span) of a prose page for the chunk and the terms (issue 53): the sentences that hold the
    question's terms and figures, best first by what they add (a term not yet held weighs its rarity, one held
    already a quarter; a sentence with a figure beside a term, one of the matched chunk's, and one next to a sentence
    chosen, a term's average more: an answer reads on), then their neighbours, in page order ("…" where sentences are
    left out), within ``budget``. Where they hold no more of the question than the best window of ``window`` (half
    an average term's weight), the window is given: a detail that sits in one place keeps its surroundings. A page
    that fits, or a chunk not found on its page, gives the window.

    Development filings (docs/retrieval-log.md, section 10): passage@5 with the window 0.82, these sentences 0.85
    (0.84 with the window kept where it holds as much; the manuals' answers moved otherwise: Chinese answer@1 0.71 ->
    0.67)."""
    located = _find(page_text, content)
    if located is None or len(page_text) <= budget:
        text, a, b = window(page_text, content, terms, budget, weights, shown, chunk_weight, found)
        return text[a:b].strip(), (a, b)
    spans = [(a, b) for a, b in sentences(page_text) if b - a <= budget]
    found = found if found is not None else occurrences(terms, page_text)
    weight = {key: (weights or {}).get(key, 1.0) for key in found}
    average = sum(weight.values()) / len(weight) if weight else 1.0
    held_by: list[set[tuple[str, ...]]] = [set() for _ in spans]  # the terms each sentence holds
    starts = [a for a, _ in spans]
    for key, hits in found.items():
        for h, e in hits:
            n = bisect.bisect_right(starts, h) - 1
            if n >= 0 and e <= spans[n][1] and not _inside(h, e, shown):
                held_by[n].add(key)
    figure = [bool(re.search(r"\d", page_text[a:b])) for a, b in spans]
    in_chunk = [a < located[1] and located[0] < b for a, b in spans]
    chosen: set[int] = set()
    covered: set[tuple[str, ...]] = set()
    used = 0
    candidates = [n for n in range(len(spans)) if held_by[n] or in_chunk[n]]  # the rest are worth nothing alone
    while True:
        best, best_value = None, 0.0
        for n in candidates:
            a, b = spans[n]
            if n in chosen or used + (b - a) + 3 > budget:
                continue
            held = held_by[n]
            value = sum(weight[k] for k in held - covered) + 0.25 * sum(weight[k] for k in held & covered)
            value += 0.5 * average if figure[n] and held else 0.0
            value += chunk_weight * average if in_chunk[n] else 0.0
            value += NEXT_TO * average if value and (n - 1 in chosen or n + 1 in chosen) else 0.0
            if value > best_value:
                best, best_value = n, value
        if best is None:
            break
        chosen.add(best)
        covered |= held_by[best]
        used += spans[best][1] - spans[best][0] + 3
    distance = 1  # then the neighbours of the sentences chosen, nearest first: a passage reads on
    while chosen and distance < len(spans):
        grown = False
        for n in sorted(chosen):
            for near in (n - distance, n + distance):
                if (
                    0 <= near < len(spans)
                    and near not in chosen
                    and used + spans[near][1] - spans[near][0] + 3 <= budget
                ):
                    chosen.add(near)
                    used += spans[near][1] - spans[near][0] + 3
                    grown = True
        if not grown:
            break
        distance += 1
    text, a, b = window(page_text, content, terms, budget, weights, shown, chunk_weight, found)
    in_window = {key for key, hits in found.items() for h, e in hits if a <= h and e <= b and not _inside(h, e, shown)}
    if sum(weight[k] for k in covered) <= sum(weight[k] for k in in_window) + 0.5 * average:
        return text[a:b].strip(), (a, b)  # the sentences hold no more of the question than one window
    order = sorted(chosen)
    runs: list[list[int]] = []
    for n in order:
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    text = " … ".join(" ".join(page_text[spans[r[0]][0] : spans[r[-1]][1]].split()) for r in runs)
    return text[:budget], (spans[order[0]][0], spans[order[-1]][1])


def _inside(start: int, end: int, shown: Sequence[tuple[int, int]]) -> bool:
    return any(s <= start and end <= e for s, e in shown)


FIGURE = re.compile(r"^[$€£(\s-]*\d[\d,.]*\)?\s*%?$")  # a table cell that is a figure: "7,351", "(530.8)", "$ 28,408"


def is_table(content: str) -> bool:
    """A chunk or page that is mostly a table of figures (a statement: most of its lines are Markdown rows,
    most of whose cells after the label are numbers; results do not carry the chunk kind, and a statement
    page's best chunk is often its title block). A manual's table of options or names is not one."""
    lines = [line.strip() for line in content.splitlines() if line.strip()]
    rows = [line for line in lines if line.startswith("|")]
    if not rows or len(rows) * 2 <= len(lines):
        return False
    cells = [cell.strip() for row in rows for cell in row.strip("|").split("|")[1:] if cell.strip()]
    return bool(cells) and sum(bool(FIGURE.match(cell)) for cell in cells) * 2 > len(cells)


HEADER_CHARS = 400  # at most this much of a table page's head (its title, units and column periods) is kept


def table_header(page_text: str) -> tuple[int, int]:
    """(start, end) of a table page's head: the lines before its first row of figures (the statement's title,
    its units, the periods its columns are for), the last ``HEADER_CHARS`` of them when longer."""
    offset = 0
    for line in page_text.splitlines(keepends=True):
        cells = [c.strip() for c in line.strip().strip("|").split("|")[1:] if c.strip()]
        if line.lstrip().startswith("|") and any(FIGURE.match(c) for c in cells):
            break
        offset += len(line)
    start = max(0, offset - HEADER_CHARS)
    if start:
        newline = page_text.find("\n", start, offset)
        start = newline + 1 if newline >= 0 else start
    return start, offset


def compact_row(line: str) -> str:
    """A Markdown row without its empty and lone currency cells: "| Inventories |  | $ | 7,351 | 4,946 |" ->
    "| Inventories | 7,351 | 4,946 |" (the same words and figures, a third shorter: more rows fit the budget)."""
    stripped = line.strip()
    if not stripped.startswith("|"):
        return stripped
    cells = [c.strip() for c in stripped.strip("|").split("|")]
    kept = [c for c in cells if c and c not in ("$", "€", "£", "%")]
    return "| " + " | ".join(kept) + " |" if kept else ""


@functools.lru_cache(maxsize=256)
def line_items(words_asked: tuple[str, ...]) -> list[str]:
    """The printed labels of the rows an analysis the question asks for reads ("total current assets" for a
    quick ratio: ``structure/analyses.py``), from its words (in the question's order)."""
    from kb_assets.structure.analyses import analyses_asked, expansion

    words = " ".join(words_asked)
    return [item.lower() for item in expansion(analyses_asked(words), words, limit=12)]


def table_passage(
    page_text: str,
    content: str,
    terms: list[Term],
    budget: int,
    weights: dict[tuple[str, ...], float] | None = None,
    shown: Sequence[tuple[int, int]] = (),
    chunk_weight: float = CHUNK_WEIGHT,
    found: dict[tuple[str, ...], list[tuple[int, int]]] | None = None,
) -> tuple[str, tuple[int, int]]:
    """(text, shown span) of a table page for the chunk and the terms (issue 53): the page's head
    (``table_header``: title, units, the periods of the columns) and its rows made compact (``compact_row``); the
    whole table when it fits ``budget``, else the rows that hold the question's terms and its analyses' line items
    (``line_items``), the matched chunk's rows, then their neighbours, in page order ("…" where rows are left
    out). Rows already shown by the page's earlier result count for nothing."""
    head_start, head_end = table_header(page_text)
    head = "\n".join(compact_row(line) for line in page_text[head_start:head_end].splitlines() if line.strip())
    rows: list[tuple[int, int, str]] = []  # (start, end, compact text) of the lines after the head
    offset = head_end
    for line in page_text[head_end:].splitlines(keepends=True):
        if line.strip() and (text := compact_row(line)):
            rows.append((offset, offset + len(line), text))
        offset += len(line)
    if not rows:
        text, a, b = window(page_text, content, terms, budget, weights, shown, chunk_weight, found)
        return text[a:b].strip(), (a, b)
    room = budget - len(head) - 3
    if sum(len(r[2]) + 1 for r in rows) <= room:
        whole = "\n".join(r[2] for r in rows)
        return (f"{head}\n…\n{whole}" if head else whole), (rows[0][0], rows[-1][1])
    found = found if found is not None else occurrences(terms, page_text)
    value = _row_values(rows, found, content, terms, weights, shown, chunk_weight)
    wanted = sum(len(r[2]) + 3 for r, v in zip(rows, value, strict=True) if v > 0)
    if wanted > room and (keep := asked_columns(head, rows, terms)) is not None:
        rows = [(a, b, _cells(text, keep)) for a, b, text in rows]  # the rows asked do not fit: the periods asked
    chosen: set[int] = set()
    used = 0
    for number in sorted(range(len(rows)), key=lambda n: (-value[n], n)):
        if value[number] <= 0:
            break
        if used + len(rows[number][2]) + 3 <= room:
            chosen.add(number)
            used += len(rows[number][2]) + 3
    distance = 1  # then the neighbours of the rows chosen, nearest first (a statement's rows read together)
    while chosen and distance < len(rows):
        grown = False
        for number in sorted(chosen):
            for near in (number - distance, number + distance):
                if 0 <= near < len(rows) and near not in chosen and used + len(rows[near][2]) + 3 <= room:
                    chosen.add(near)
                    used += len(rows[near][2]) + 3
                    grown = True
        if not grown and used + 40 > room:
            break
        distance += 1
    if not chosen:
        text, a, b = window(page_text, content, terms, budget, weights, shown, chunk_weight, found)
        return text[a:b].strip(), (a, b)
    lines, previous = [], None
    for number in sorted(chosen):
        if previous is not None and number != previous + 1:
            lines.append("…")
        lines.append(rows[number][2])
        previous = number
    order = sorted(chosen)
    return (f"{head}\n…\n" if head else "") + "\n".join(lines), (rows[order[0]][0], rows[order[-1]][1])


def asked_columns(head: str, rows: list[tuple[int, int, str]], terms: list[Term]) -> set[int] | None:
    """The figure columns of the periods the question names and the one before each (what it is compared with),
    where the head prints one year a column in the order of the rows' figures (None: keep every column)."""
    from kb_assets.retrieval.scope import _years

    asked = _years(" ".join(t if isinstance(t, str) else t[0] for t in terms))
    years_row = next((text for _, _, text in rows if _is_years(text)), "")
    printed = [int(y) for y in re.findall(r"(?<!\d)((?:19|20)\d\d)(?!\d)", years_row or head)]
    widths = [len(_figures(text)) for _, _, text in rows if _figures(text) and not _is_years(text)]
    if not asked or not widths or len(set(printed)) != len(printed) or len(printed) < 3:
        return None
    width = max(set(widths), key=widths.count)
    if width != len(printed) or not asked & set(printed):
        return None
    keep = {printed.index(y) for y in asked if y in printed}
    keep |= {printed.index(y - 1) for y in asked if y - 1 in printed}
    return keep if len(keep) < width else None


def _is_years(row: str) -> bool:
    """A row of column headings that are years ("|  | 2023 | 2022 | 2021 |")."""
    cells = [c.strip() for c in row.strip().strip("|").split("|") if c.strip()]
    return len(cells) >= 2 and all(re.fullmatch(r"(?:19|20)\d\d", c) for c in cells)


def _figures(row: str) -> list[str]:
    return [c for c in (c.strip() for c in row.strip("|").split("|")[1:]) if c and FIGURE.match(c)]


def _cells(row: str, keep: set[int]) -> str:
    """A compact row with only the figure columns kept (its label and any row of another shape as it is)."""
    cells = [c.strip() for c in row.strip().strip("|").split("|")]
    if _is_years(row):  # the column headings: one a column, in order
        return "| " + " | ".join(c for n, c in enumerate(c for c in cells if c) if n in keep) + " |"
    figures = [n for n, c in enumerate(cells) if n > 0 and FIGURE.match(c)]
    if not row.startswith("|") or len(figures) != len(cells) - 1:
        return row
    return "| " + " | ".join([cells[0]] + [cells[n] for i, n in enumerate(figures) if i in keep]) + " |"


def _row_values(
    rows: list[tuple[int, int, str]],
    found: dict[tuple[str, ...], list[tuple[int, int]]],
    content: str,
    terms: list[Term],
    weights: dict[tuple[str, ...], float] | None,
    shown: Sequence[tuple[int, int]],
    chunk_weight: float,
) -> list[float]:
    """Each row's worth for the question: the weight of the question's terms it holds, a line item of the asked
    analyses in its label, being one of the matched chunk's rows; nothing for a row a page's earlier result showed."""
    items = line_items(tuple(t if isinstance(t, str) else t[0] for t in terms))
    flat = " ".join(content.split()).lower()
    average = sum((weights or {}).values()) / len(weights) if weights else 1.0
    starts = [start for start, _, _ in rows]
    held: list[set[tuple[str, ...]]] = [set() for _ in rows]  # the terms each row holds (the page's hits, by place)
    for key, hits in found.items():
        for hit, _ in hits:
            number = bisect.bisect_right(starts, hit) - 1
            if number >= 0 and hit < rows[number][1]:
                held[number].add(key)
    values = []
    for (start, end, text), keys in zip(rows, held, strict=True):
        if any(s <= start and end <= e for s, e in shown):
            values.append(0.0)
            continue
        value = sum((weights or {}).get(key, 1.0) for key in keys)
        label = text.strip("| ").split("|")[0].strip().lower()
        if any(item in label for item in items):
            value += 2 * average
        if len(text) > 8 and " ".join(text.split()).lower() in flat:
            value += chunk_weight * average
        if _is_years(text):  # the periods of the columns: read with every row
            value += 10 * average
        values.append(value)
    return values


def passages(
    rows: list[dict],
    page_texts: dict[tuple[str, int], str],
    terms: list[Term],
    budget: int,
    chunk_weight: float = CHUNK_WEIGHT,
    table_budget: int = 0,
) -> None:
    """Set each result row's ``context`` (in place), rows in rank order; terms weighted by their rarity
    among the rows' pages, a page's later rows showing what its earlier ones did not. A context holds at most
    ``budget`` characters (prose); for a table chunk or a chunk on a page that is mostly table, ``table_budget``
    (when larger) bounds its ``content`` and ``context`` together, and the context is the page's head (title, units,
    column periods) and the rows around the one that matched (a statement's line item is asked with its period).
    No result's content + context passes the larger of the two (a longer content is cut to it, with no context)."""
    found = {key: occurrences(terms, text) for key, text in page_texts.items()}  # read once a page
    weights = rarity(list(found.values()))
    shown: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for row in rows:
        key = (row["documentId"], row["pageIndex"])
        page = page_texts.get(key) or ""
        table = table_budget > budget and (is_table(row["content"]) or is_table(page))  # off (0): nothing parsed
        ceiling = max(budget, table_budget)  # no result's content + context passes it
        room = min(ceiling - len(row["content"]), budget if not table else ceiling)
        if room <= 0:  # a chunk larger than the ceiling (a rule-based table piece): itself, cut, is the passage
            row["content"], row["context"] = row["content"][: ceiling - 1].rstrip() + "…", ""
            continue
        if table and is_table(page):
            row["context"], span = table_passage(
                page, row["content"], terms, room, weights, shown.get(key, []), found=found.get(key)
            )
        else:
            row["context"], span = prose_passage(
                page, row["content"], terms, room, weights, shown.get(key, []), chunk_weight, found.get(key)
            )
        shown.setdefault(key, []).append(span)
