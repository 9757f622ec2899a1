"""Check every label of the detail-question set against the text of the real manuals.

    .venv/bin/python benchmarks/check_detail_questions.py [--corpus DIR] [--questions FILE] [--show ID]

For each row of ``benchmarks/detail_questions.jsonl`` the page text is extracted with pypdfium2
(``PdfDocument(path)[i].get_textpage().get_text_range()``) and the row is bad unless

* its answer phrase is found on the labelled pages ``[first, last]`` (0-based physical pages), comparing
  whitespace-collapsed, case-folded text, or the same with all whitespace removed (PDF line breaks split
  Chinese text and long options);
* the phrase is specific: found on at most two pages of the whole document;
* the labelled pages are not table-of-contents pages, the query does not contain the answer, the query
  is written in the row's language (``zh`` has Chinese characters, ``en`` has none);
* the query is paraphrased, not copied: it shares no run of 7 words (English) or 8 Chinese characters
  (whitespace ignored) with the labelled page text;
* the fields are well formed (ids unique, kb matches file, lang/kind/split in their vocabularies).

It also checks that about a third of every kb/lang/kind stratum is frozen as ``split: test``, then
prints the counts per kb, lang, kind and split. Exit status 1 on any bad row.

``--corpus`` is the directory the Debian packages were unpacked into (``../shared/eval/fetch-corpus.sh
DIR``); by default ``./corpus-cache`` or ``~/.cache/kb-assets/dev-corpus`` (as ``dev_corpus.py``).
``--show ID`` prints the labelled page text of one row, to review a question by hand.

``--home DIR`` (an ingested dev corpus, ``dev_corpus.py``) also reports, per language and split, the
rows whose answer phrase is inside one chunk of its labelled pages as the parser made them (the
answer-in-context check of ``retrieval_quality.py``): a row that is not can never be an answer hit,
whatever the ranking, so this is the parser's ceiling on answer@k. At parser version 2, 180 of 183
were: the rest were a space-separated list read as a table whose rows were mixed (fixed in version
3, ``parsing/layout/tables.py``), a table of code lines read the same way, and typographic quotes.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
QUESTIONS = REPO / "benchmarks" / "detail_questions.jsonl"
CORPUS_CANDIDATES = [REPO / "corpus-cache", Path.home() / ".cache" / "kb-assets" / "dev-corpus"]
FILES = {
    "usr/share/R/doc/manual/R-data.pdf": "r-manuals",
    "usr/share/R/doc/manual/R-admin.pdf": "r-manuals",
    "usr/share/R/doc/manual/R-lang.pdf": "r-manuals",
    "usr/share/debian-reference/debian-reference.en.pdf": "debian-en",
    "usr/share/doc/debian-edu-doc-zh-cn/debian-edu-bookworm-manual.pdf": "edu-zh",
}
LANGS = {"en", "zh"}
KINDS = {"paragraph", "table", "code"}
SPLITS = {"dev", "test"}
MAX_PAGES = 2  # an answer phrase found on more pages than this is not specific
COPY_WORDS = 7  # English: a shared run of this many words means the query copies the page
COPY_CHARS = 8  # Chinese: a shared run of this many Chinese characters (whitespace ignored)
CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
WORD = re.compile(r"[\w.$~/+-]+", re.UNICODE)


def collapse(text: str) -> str:
    """Whitespace runs to one space, case-folded: the answer-in-context normalization."""
    return re.sub(r"\s+", " ", text).strip().casefold()


def squeeze(text: str) -> str:
    """All whitespace removed, case-folded: survives line breaks inside words and Chinese text."""
    return re.sub(r"\s+", "", text).casefold()


def found(answer: str, text: str) -> bool:
    return collapse(answer) in collapse(text) or squeeze(answer) in squeeze(text)


def page_texts(path: Path) -> list[str]:
    import pypdfium2 as pdfium

    doc = pdfium.PdfDocument(str(path))
    try:
        return [doc[i].get_textpage().get_text_range() for i in range(len(doc))]
    finally:
        doc.close()


def longest_shared_words(query: str, page: str) -> int:
    q = [w.casefold() for w in WORD.findall(query)]
    p = " " + " ".join(w.casefold() for w in WORD.findall(page)) + " "
    best = 0
    for i in range(len(q)):
        for j in range(i + best + 1, len(q) + 1):
            if " " + " ".join(q[i:j]) + " " in p:
                best = j - i
            else:
                break
    return best


def longest_shared_chars(query: str, page: str) -> int:
    """Longest run of Chinese characters of the query found in the page (names, paths and commands
    quoted in ASCII do not count: a user has to type them as they are)."""
    p = squeeze(page)
    best = 0
    for run in re.findall(CJK.pattern + "+", squeeze(query)):
        for i in range(len(run)):
            while i + best < len(run) and run[i : i + best + 1] in p:
                best += 1
    return best


def check_row(row: dict, pages: list[str]) -> list[str]:
    problems = []
    first, last = row["pages"]
    if not (0 <= first <= last < len(pages)):
        return [f"pages {row['pages']} outside the document ({len(pages)} pages)"]
    labelled = "\n".join(pages[first : last + 1])
    answer = row["answer"]
    if not found(answer, labelled):
        problems.append(f"answer {answer!r} not on pages {row['pages']}")
    where = [i for i, text in enumerate(pages) if found(answer, text)]
    if len(where) > MAX_PAGES:
        problems.append(f"answer {answer!r} not specific: on {len(where)} pages {where[:8]}")
    if set(range(first, last + 1)) & set(row.get("toc_pages") or []):
        problems.append("labelled page is a table-of-contents page")
    if squeeze(answer) in squeeze(row["query"]):
        problems.append("the query contains the answer")
    has_cjk = bool(CJK.search(row["query"]))
    if has_cjk != (row["lang"] == "zh"):
        problems.append(f"query language does not match lang={row['lang']}")
    if row["lang"] == "zh":
        shared = longest_shared_chars(row["query"], labelled)
        if shared >= COPY_CHARS:
            problems.append(f"query copies {shared} characters of the page")
    else:
        shared = longest_shared_words(row["query"], labelled)
        if shared >= COPY_WORDS:
            problems.append(f"query copies {shared} consecutive words of the page")
    return problems


def check_fields(rows: list[dict]) -> list[str]:
    problems = []
    ids = collections.Counter(r.get("id") for r in rows)
    problems += [f"duplicate id {i}" for i, n in ids.items() if n > 1]
    for r in rows:
        rid = r.get("id")
        missing = [k for k in ("id", "kb", "file", "query", "lang", "kind", "pages", "answer", "split") if k not in r]
        if missing:
            problems.append(f"{rid}: missing {missing}")
            continue
        if FILES.get(r["file"]) != r["kb"]:
            problems.append(f"{rid}: file {r['file']} does not belong to kb {r['kb']}")
        if r["lang"] not in LANGS or r["kind"] not in KINDS or r["split"] not in SPLITS:
            problems.append(f"{rid}: lang/kind/split out of vocabulary")
        p = r["pages"]
        if not (isinstance(p, list) and len(p) == 2 and all(isinstance(x, int) for x in p) and p[0] <= p[1]):
            problems.append(f"{rid}: pages must be [first, last]")
        if not str(r["answer"]).strip() or not str(r["query"]).strip():
            problems.append(f"{rid}: empty answer or query")
    return problems


def check_split(rows: list[dict]) -> list[str]:
    problems = []
    strata = collections.defaultdict(list)
    for r in rows:
        strata[(r["kb"], r["lang"], r["kind"])].append(r["split"])
    for key, splits in sorted(strata.items()):
        test, n = splits.count("test"), len(splits)
        if abs(test - n / 3) > 1:
            problems.append(f"stratum {key}: {test} of {n} rows in test, expected about a third")
    return problems


def report(rows: list[dict]) -> None:
    by = collections.Counter((r["kb"], r["lang"], r["kind"], r["split"]) for r in rows)
    keys = sorted({(kb, lang) for kb, lang, _, _ in by})
    print(
        f"{'kb':10} {'lang':4} "
        + " ".join(f"{k + '/' + s:>14}" for k in sorted(KINDS) for s in sorted(SPLITS))
        + f" {'total':>6}"
    )
    for kb, lang in keys:
        cells = [by[(kb, lang, k, s)] for k in sorted(KINDS) for s in sorted(SPLITS)]
        print(f"{kb:10} {lang:4} " + " ".join(f"{c:>14}" for c in cells) + f" {sum(cells):>6}")
    kinds = collections.Counter(r["kind"] for r in rows)
    splits = collections.Counter(r["split"] for r in rows)
    langs = collections.Counter(r["lang"] for r in rows)
    files = collections.Counter(Path(r["file"]).name for r in rows)
    print(f"total {len(rows)}; lang {dict(langs)}; kind {dict(kinds)}; split {dict(splits)}")
    print(f"per file {dict(files)}")
    print(
        f"table+code share {(kinds['table'] + kinds['code']) / len(rows):.2f}; "
        f"test share {splits['test'] / len(rows):.2f}"
    )


def reachable(rows: list[dict], home: Path) -> None:
    """Print, per language and split, how many rows' answers a chunk of their labelled pages holds."""
    import polars as pl

    from kb_assets.retrieval.evaluation import answer_in

    chunks = pl.concat(
        [
            pl.read_parquet(f, columns=["source_uri", "page_index", "page_end", "content"])
            for f in sorted((home / "lake" / "chunks").glob("*.parquet"))
        ]
    )
    counts = collections.Counter()
    for row in rows:
        first, last = row["pages"]
        on_pages = chunks.filter(
            pl.col("source_uri").str.ends_with("/" + Path(row["file"]).name)
            & (pl.col("page_index") <= last)
            & (pl.col("page_end") >= first)
        )
        held = any(answer_in(row["answer"], text, row["lang"]) for text in on_pages["content"])
        counts[(row["lang"], row["split"], held)] += 1
        if not held:
            print(f"UNREACHABLE {row['id']} ({row['split']}): no chunk of pages {row['pages']} holds {row['answer']!r}")
    for lang in sorted(LANGS):
        for split in sorted(SPLITS):
            total = counts[(lang, split, True)] + counts[(lang, split, False)]
            if total:
                print(f"answer inside a chunk of its page: {lang} {split} {counts[(lang, split, True)]} of {total}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path)
    parser.add_argument("--questions", type=Path, default=QUESTIONS)
    parser.add_argument("--show", metavar="ID", help="print the labelled page text of this row and exit")
    parser.add_argument("--home", type=Path, help="an ingested dev corpus: report the answers its chunks hold")
    args = parser.parse_args()

    corpus = args.corpus or next((c for c in CORPUS_CANDIDATES if c.is_dir()), None)
    if corpus is None or not corpus.is_dir():
        print("no corpus: pass --corpus DIR (unpacked by ../shared/eval/fetch-corpus.sh DIR)", file=sys.stderr)
        return 2
    rows = [json.loads(line) for line in args.questions.read_text(encoding="utf-8").splitlines() if line.strip()]

    problems = check_fields(rows)
    if problems:
        print("\n".join(problems))
        return 1

    texts: dict[str, list[str]] = {}
    for f in sorted({r["file"] for r in rows}):
        path = corpus / f
        if not path.exists():
            print(f"missing {path}", file=sys.stderr)
            return 2
        texts[f] = page_texts(path)

    if args.show:
        row = next((r for r in rows if r["id"] == args.show), None)
        if row is None:
            print(f"no row {args.show}", file=sys.stderr)
            return 2
        print(json.dumps(row, ensure_ascii=False))
        first, last = row["pages"]
        for i in range(first, last + 1):
            print(f"----- page {i} -----\n{texts[row['file']][i]}")
        return 0

    bad = 0
    for row in rows:
        row_problems = check_row(row, texts[row["file"]])
        if row_problems:
            bad += 1
            print(f"BAD {row['id']}: " + "; ".join(row_problems))
    split_problems = check_split(rows)
    for p in split_problems:
        print(f"BAD split: {p}")
    report(rows)
    if args.home:
        reachable(rows, args.home)
    if bad or split_problems:
        print(f"{bad} bad rows")
        return 1
    print("all rows OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
