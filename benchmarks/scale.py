"""Cost as a knowledge base grows: one-page Markdown notes ingested in batches into one knowledge base.

    .venv/bin/python benchmarks/scale.py [--pdf fullrefman.pdf] [--first 200] [--more 1800[,18000]]
        [--edit 10] [--queries 50] [--bare] [--home DIR] [--keep] [--partitioning buckets:N]

The notes: with ``--pdf``, every page of that PDF with at least 40 words (pypdfium2's text) is one note,
``# first line``, a blank line, then the rest of the page (the issue measured the pages of R's reference
manual, ``/usr/share/doc/r-doc-pdf/fullrefman.pdf`` of Debian's r-doc-pdf); when more notes are asked for
than the PDF has pages, the pages repeat with a copy number in the title. Without ``--pdf``, a
deterministic generator writes varied English notes of 60-250 words from a fixed vocabulary and seed, so
the script runs anywhere.

In a fresh ``KB_HOME`` (a temporary folder, or ``--home``, which must be new or empty; ``DAGSTER_HOME`` under
it, telemetry off) on the embedded profile, timed with ``time.perf_counter``:

1. the first ``--first`` notes are written into one folder and ingested (``kb_assets.launch.ingest.ingest``,
   as ``kb-assets ingest`` does);
2. each batch of ``--more`` (a comma list: successive batches) is written into the same folder and the
   folder ingested again, so every ingest rescans all the notes, as a user would;
3. ``--edit`` notes spread over the folder get a new paragraph and the folder is ingested again;
4. a no-op re-run: the folder ingested once more, nothing changed (no run should start).

It prints the batches (documents new and in all, seconds, seconds a new document and its ratio to the
first batch's, runs, failures, MB under ``KB_HOME`` and in Dagster's storage after it), the edit and the
no-op, the files and MB under each top folder of ``KB_HOME`` at the end (Dagster's storage also by
folder), and search p50/p95 in ms of ``--queries`` queries, each a note's first line, through the
service's searcher (``make_searcher``, one encoder thread a query, as ``kb-assets serve``) after the first
batch and at the end, with how many found their note in the top 10. ``--bare`` adds, per batch, the
bare work the ingest cannot avoid: encoding the batch's chunk inputs (as the lake holds them) with the
ingest's encoder in this process, model loaded.

The first batch also pays the process's start: loading the Dagster definitions and the encoder. On a
shared machine figures compare within one run only (the load average is printed).
``--partitioning buckets:N`` ingests under hash-bucket partitions (``KB_PARTITIONING``); each batch also
prints the Dagster events its runs wrote, in all and per new document.
Each batch also prints the CPU seconds a new note cost in this process (ingest, its threads and children) and in
the embedded Milvus engine and Postgres (read from ``/proc``): on a shared machine those move less with the load
than the wall-clock seconds do.
The embedded services are stopped and the folders removed at the end, unless ``--keep``.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

KB = "scale"
SEED = 20260101
MIN_PDF_WORDS = 40
MB = 1024 * 1024

NOUNS = """
account address agent archive array backup balance batch buffer bundle cache calendar channel chapter
checksum client cluster column command comment compiler config console container contract counter dataset
deadline default device diagram dictionary directory document domain draft driver editor engine entry
estimate event example export factor feature field figure filter folder format formula function gateway
graph group handler header histogram history host image index input instance interface invoice issue item
kernel key label language layer layout ledger library license limit line link list loader log machine
manual map market matrix measure memory message method metric mirror model module monitor network node
note object option order output owner package page panel parameter parser partition patch path pattern
payload permission pipeline plot policy pool port process profile project prompt property protocol proxy
query queue quota range record region registry release replica report repository request resource
response result revision role route rule sample schedule schema scope script section sensor server
service session setting shell signal snapshot socket source spreadsheet stack statement status step
storage stream string summary switch symbol system table tag target task template tenant terminal test
thread ticket timeout token topic trace transaction tree trigger tutorial type unit update upload user
value variable vector version view volume warning window worker workflow zone
""".split()
ADJECTIVES = """
active annual automatic available basic binary brief central clean common compact complete complex
current custom daily default dense direct distinct dynamic early empty exact external fast final fixed
formal frequent full general global hidden high idle initial inner internal large late legacy linear
local logical long low main manual minimal missing mobile monthly narrow native nested new nightly
normal numeric old open optional ordinary outer partial plain primary private public quick random raw
recent regular relative remote robust rough safe secondary secure shared short simple single slow small
sparse stable static strict strong temporary tiny total typical unique unused upper urgent valid visible
weekly wide
""".split()
VERBS = """
accepts adds adjusts allows builds caches changes checks cleans collects combines compares compresses
computes contains converts copies counts creates defines deletes describes detects drops encodes
ensures estimates expands exports extracts fetches filters finds fixes formats groups handles holds
ignores imports includes indexes inserts keeps lists loads locks maps marks measures merges moves
names opens orders parses passes prints reads records reduces refreshes removes renames repeats
replaces reports resolves restores returns rotates runs samples saves scans schedules searches selects
sends sets shows skips sorts splits starts stops stores summarizes tracks updates uploads uses
validates verifies writes
""".split()
ADVERBS = """
again always carefully early easily first later locally manually never often once quickly rarely slowly usually
""".split()
PREPOSITIONS = """
about across after against before behind below beside between during for from inside into near of on over through
under with within without
""".split()
DETERMINERS = "a the each every one another this that any some no its".split()
OPENERS = ["", "", "", "In practice, ", "By default, ", "Usually ", "When needed, ", "After a restart, ", "Note that "]


def _phrase(rng: random.Random) -> str:
    words = [rng.choice(DETERMINERS)]
    if rng.random() < 0.6:
        words.append(rng.choice(ADJECTIVES))
    words.append(rng.choice(NOUNS))
    if words[0] == "a" and words[1][0] in "aeiou":
        words[0] = "an"
    return " ".join(words)


def _sentence(rng: random.Random) -> str:
    parts = [_phrase(rng), rng.choice(VERBS), _phrase(rng)]
    if rng.random() < 0.7:
        parts += [rng.choice(PREPOSITIONS), _phrase(rng)]
    if rng.random() < 0.3:
        parts.append(rng.choice(ADVERBS))
    if rng.random() < 0.25:
        parts += ["and", rng.choice(VERBS), _phrase(rng)]
    text = rng.choice(OPENERS) + " ".join(parts)
    return text[0].upper() + text[1:] + "."


def generated_note(number: int) -> str:
    """Note ``number`` (the same text on every run): a title line and 60-250 words in 1-4 paragraphs."""
    rng = random.Random(f"{SEED}-{number}")
    title = f"{rng.choice(ADJECTIVES).capitalize()} {rng.choice(NOUNS)} {rng.choice(PREPOSITIONS)} {_phrase(rng)}"
    target, words, paragraphs, full = rng.randint(60, 250), 0, [], False
    while not full:
        sentences: list[str] = []
        for _ in range(rng.randint(2, 6)):
            sentence = _sentence(rng)
            if words >= 60 and words + len(sentence.split()) > target:
                full = True
                break
            sentences.append(sentence)
            words += len(sentence.split())
        if sentences:
            paragraphs.append(" ".join(sentences))
    return f"# {title}\n\n" + "\n\n".join(paragraphs) + "\n"


def pdf_pages(pdf: Path) -> list[tuple[str, str]]:
    """(first line, the rest) of every page of ``pdf`` with at least MIN_PDF_WORDS words."""
    import pypdfium2 as pdfium

    pages = []
    document = pdfium.PdfDocument(str(pdf))
    try:
        for index in range(len(document)):
            page = document[index]
            textpage = page.get_textpage()
            text = textpage.get_text_range().replace("\r\n", "\n").replace("\r", "\n")
            textpage.close()
            page.close()
            if len(text.split()) < MIN_PDF_WORDS:
                continue
            lines = [line.rstrip() for line in text.strip().split("\n")]
            pages.append((" ".join(lines[0].split()), "\n".join(lines[1:]).strip()))
    finally:
        document.close()
    return pages


class Notes:
    """Writes notes ``0..n`` into one folder as ``note-00000.md`` and so on, and knows their first lines."""

    def __init__(self, folder: Path, pdf: Path | None):
        self.folder = folder
        self.pages = pdf_pages(pdf) if pdf else None
        self.titles: list[str] = []
        if self.pages is not None:
            print(f"{pdf}: {len(self.pages)} pages with at least {MIN_PDF_WORDS} words")
            if not self.pages:
                raise SystemExit("no page of the PDF has enough words")

    def text(self, number: int) -> str:
        if self.pages is None:
            return generated_note(number)
        copy, index = divmod(number, len(self.pages))
        title, rest = self.pages[index]
        return f"# {title}{f' (copy {copy + 1})' if copy else ''}\n\n{rest}\n"

    def path(self, number: int) -> Path:
        return self.folder / f"note-{number:05d}.md"

    def write(self, count: int) -> None:
        if self.pages is not None and len(self.titles) < len(self.pages) <= len(self.titles) + count:
            print(f"  (more notes than the PDF's {len(self.pages)} pages: the pages repeat, numbered copies)")
        for number in range(len(self.titles), len(self.titles) + count):
            text = self.text(number)
            self.path(number).write_text(text, encoding="utf-8")
            self.titles.append(text.split("\n", 1)[0].removeprefix("# ").strip())

    def edit(self, count: int) -> list[int]:
        """A new paragraph in ``count`` notes spread evenly over the folder; their numbers."""
        total = len(self.titles)
        chosen = sorted({i * total // count for i in range(count)}) if count else []
        for number in chosen:
            rng = random.Random(f"{SEED}-edit-{number}")
            path = self.path(number)
            addition = " ".join(_sentence(rng) for _ in range(3))
            path.write_text(path.read_text(encoding="utf-8") + f"\nRevised: {addition}\n", encoding="utf-8")
        return chosen


def tree(path: Path) -> tuple[int, int]:
    """Files and bytes under ``path`` (links not followed; what cannot be read is skipped)."""
    files = size = 0
    for root, _, names in os.walk(path, onerror=lambda error: None):
        for name in names:
            try:
                stat = os.lstat(os.path.join(root, name))
            except OSError:
                continue
            files, size = files + 1, size + stat.st_size
    return files, size


def stores(home: Path) -> dict[str, tuple[int, int]]:
    """Files and bytes of each top folder of ``home``; top-level files together under '(files)'."""
    result: dict[str, tuple[int, int]] = {}
    loose = [0, 0]
    for entry in sorted(home.iterdir()):
        if entry.is_dir() and not entry.is_symlink():
            result[entry.name] = tree(entry)
        else:
            try:
                loose[0], loose[1] = loose[0] + 1, loose[1] + entry.lstat().st_size
            except OSError:
                pass
    if loose[0]:
        result["(files)"] = (loose[0], loose[1])
    return result


def largest(home: Path, count: int) -> list[tuple[int, str]]:
    """The ``count`` largest files under ``home``: (bytes, path relative to it)."""
    import heapq

    sizes = []
    for root, _, names in os.walk(home, onerror=lambda error: None):
        for name in names:
            path = os.path.join(root, name)
            try:
                sizes.append((os.lstat(path).st_size, os.path.relpath(path, home)))
            except OSError:
                continue
    return heapq.nlargest(count, sizes)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _proc_cpu(pid: int) -> tuple[float, float, int]:
    """(own CPU seconds, CPU seconds of its waited-for children, parent pid) of a live process; zeros if gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0, 0.0, 0
    utime, stime, cutime, cstime = (int(v) for v in fields[11:15])
    return (utime + stime) / CLOCK_TICKS, (cutime + cstime) / CLOCK_TICKS, int(fields[1])


def _tree_cpu(root: int | None) -> float:
    """CPU seconds of a process, its live descendants and the children they have waited for."""
    if not root:
        return 0.0
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            parents.setdefault(_proc_cpu(int(entry.name))[2], []).append(int(entry.name))
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        own, waited, _ = _proc_cpu(pid)
        total += own + waited
        todo += parents.get(pid, [])
    return total


def service_cpu(home: Path) -> dict[str, float]:
    """CPU seconds so far of this process (with its children) and of the embedded services of ``home``."""
    import json

    times = os.times()
    figures = {"ingest": times.user + times.system + times.children_user + times.children_system}
    try:
        figures["milvus"] = _tree_cpu(json.loads((home / "milvus.json").read_text()).get("pid"))
    except (OSError, ValueError):
        figures["milvus"] = 0.0
    try:
        figures["postgres"] = _tree_cpu(int((home / "postgres/data/postmaster.pid").read_text().split()[0]))
    except (OSError, ValueError, IndexError):
        figures["postgres"] = 0.0
    return figures


@dataclass
class Batch:
    label: str
    new: int
    documents: int
    seconds: float
    runs: int
    failed: int
    home_bytes: int
    dagster_bytes: int
    events: int = 0
    bare: float | None = None
    cpu: dict[str, float] | None = None  # CPU seconds of the batch: ingest, milvus, postgres


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load {one:.1f}/{five:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pdf", type=Path, help="a PDF whose pages become notes (default: generated notes)")
    parser.add_argument("--first", type=int, default=200, help="notes of the first batch")
    parser.add_argument("--more", default="1800", help="notes of each further batch, a comma list")
    parser.add_argument("--edit", type=int, default=10, help="notes edited after the last batch")
    parser.add_argument("--queries", type=int, default=50, help="queries timed after the first batch and at the end")
    parser.add_argument("--bare", action="store_true", help="also time encoding each batch's chunk inputs alone")
    parser.add_argument("--home", type=Path, help="KB_HOME (new or empty; default: a temporary folder)")
    parser.add_argument("--keep", action="store_true", help="keep KB_HOME, the notes and the services running")
    parser.add_argument("--partitioning", default="documents", help="KB_PARTITIONING: documents or buckets:N")
    args = parser.parse_args()
    more = [int(n) for n in args.more.split(",") if n.strip()]
    if args.first < 1 or any(n < 1 for n in more) or args.edit < 0 or args.queries < 1:
        parser.error("--first, --more and --queries must be positive, --edit not negative")

    work = Path(tempfile.mkdtemp(prefix="kb-bench-scale-"))
    work.chmod(0o755)
    home = (args.home or work / "home").resolve()
    if home.exists() and any(home.iterdir()):
        parser.error(f"--home {home} is not empty")
    home.mkdir(parents=True, exist_ok=True)
    folder = work / "notes"
    folder.mkdir()
    os.environ.update(KB_HOME=str(home), DAGSTER_HOME=str(home / "dagster"), DAGSTER_DISABLE_TELEMETRY="1")
    (home / "dagster").mkdir(exist_ok=True)
    notes = Notes(folder, args.pdf)
    print(f"{os.cpu_count()} cores, {load()}; KB_HOME {home}, notes in {folder}", flush=True)

    from kb_assets.launch.ingest import ingest
    from kb_assets.service.api import make_searcher, one_thread_per_query
    from kb_assets.services import stop_milvus, stop_postgres
    from kb_assets.settings import Settings, partitioning_setting

    settings = replace(Settings.from_env(), partitioning=partitioning_setting(args.partitioning))
    print(f"KB_PARTITIONING={settings.partitioning}", flush=True)

    def events_of(run_ids: list[str]) -> int:
        """Dagster events the runs wrote (their event log records)."""
        from kb_assets.launch.instance import dagster_instance

        instance = dagster_instance(settings)
        return sum(len(instance.get_records_for_run(run_id, limit=1_000_000).records) for run_id in run_ids)

    def step_seconds(run_ids: list[str]) -> dict[str, float]:
        """Seconds each step of the runs took, summed over the runs (from their step start to success or failure)."""
        import dagster as dg

        from kb_assets.launch.instance import dagster_instance

        instance, started, took = dagster_instance(settings), {}, {}
        kinds = {dg.DagsterEventType.STEP_START, dg.DagsterEventType.STEP_SUCCESS, dg.DagsterEventType.STEP_FAILURE}
        for run_id in run_ids:
            for record in instance.get_records_for_run(run_id, of_type=kinds, limit=1_000_000).records:
                entry = record.event_log_entry
                if entry.dagster_event.event_type == dg.DagsterEventType.STEP_START:
                    started[(run_id, entry.step_key)] = entry.timestamp
                elif (run_id, entry.step_key) in started:
                    seconds = entry.timestamp - started[(run_id, entry.step_key)]
                    took[entry.step_key] = took.get(entry.step_key, 0.0) + seconds
        return took

    def timed_ingest() -> tuple[float, object]:
        started = time.perf_counter()
        report = ingest([folder], KB, settings)
        return time.perf_counter() - started, report

    def cpu_since(before: dict[str, float]) -> dict[str, float]:
        now = service_cpu(home)
        return {name: now[name] - before.get(name, 0.0) for name in now}

    def bare_seconds(document_ids: list[str]) -> float:
        """Encoding the documents' chunk inputs with the ingest's encoder (model loaded before timing)."""
        from kb_assets.stores import Stores

        own = Stores(settings)
        texts = [t for d in document_ids for t in own.lake.read("chunks", d)["embedding_input"].to_list()]
        model = own.model()
        model.encode(texts[:4])
        started = time.perf_counter()
        model.encode(texts)
        return time.perf_counter() - started

    def searches() -> tuple[float, float, int, int]:
        """p50 and p95 ms of --queries searches, each a note's first line; how many found their note."""
        searcher = make_searcher(one_thread_per_query(settings))
        try:
            total = len(notes.titles)
            numbers = sorted({i * total // args.queries for i in range(args.queries)})
            for number in numbers[:3]:  # warm up: model, collection, catalog connections
                searcher.search(_request(notes.titles[number]))
            timings, found = [], 0
            for number in numbers:
                started = time.perf_counter()
                response = searcher.search(_request(notes.titles[number]))
                timings.append((time.perf_counter() - started) * 1000)
                name = notes.path(number).name
                found += any((r.get("sourceUri") or "").endswith(name) for r in response.results)
            return statistics.median(timings), percentile(timings, 0.95), found, len(numbers)
        finally:
            searcher.close()

    batches: list[Batch] = []
    search_figures: list[tuple[str, tuple[float, float, int, int]]] = []
    try:
        for index, count in enumerate([args.first, *more]):
            notes.write(count)
            cpu_before = service_cpu(home)
            seconds, report = timed_ingest()
            cpu = cpu_since(cpu_before)
            sizes = stores(home)
            batch = Batch(
                label="first" if index == 0 else f"more {index}",
                new=len(report.new),
                documents=len(notes.titles),
                seconds=seconds,
                runs=len(report.run_ids),
                failed=len(report.failures),
                home_bytes=sum(b for _, b in sizes.values()),
                dagster_bytes=sizes.get("dagster", (0, 0))[1],
                events=events_of(report.run_ids),
                cpu=cpu,
            )
            if args.bare:
                batch.bare = bare_seconds(report.new)
            batches.append(batch)
            print(
                f"  {batch.label}: {batch.new} new of {batch.documents} notes in {seconds:.1f} s, "
                f"{batch.runs} runs, {batch.failed} failed, {batch.events:,} Dagster events, "
                f"Dagster {batch.dagster_bytes / MB:.1f} MB, CPU s a note "
                + " / ".join(f"{name} {value / max(1, batch.new):.3f}" for name, value in cpu.items())
                + f" ({load()})",
                flush=True,
            )
            took = step_seconds(report.run_ids)
            print("    steps, s a note: " + ", ".join(f"{k} {v / max(1, batch.new):.3f}" for k, v in took.items()))
            if index == 0:
                search_figures.append((f"after the first batch ({batch.documents} notes)", searches()))
        edited = notes.edit(args.edit)
        edit_seconds, edit_report = timed_ingest()
        edit_events = events_of(edit_report.run_ids)
        print(
            f"  edit: {len(edit_report.changed)} changed of {len(edited)} edited in {edit_seconds:.1f} s ({load()})",
            flush=True,
        )
        noop_seconds, noop_report = timed_ingest()
        print(f"  no-op: {len(noop_report.run_ids)} runs in {noop_seconds:.2f} s ({load()})", flush=True)
        search_figures.append((f"at the end ({len(notes.titles)} notes)", searches()))
        final = stores(home)
        dagster_parts = stores(home / "dagster") if (home / "dagster").is_dir() else {}
        biggest = largest(home, 8)
        from kb_assets.stores import Stores

        tables = sorted(Stores(settings).catalog.table_sizes().items(), key=lambda item: -item[1][1])[:6]
    finally:
        if args.keep:
            print(f"kept: KB_HOME {home} (services running), notes {folder}")
        else:
            stop_milvus(home)
            stop_postgres(home)
            shutil.rmtree(work, ignore_errors=True)
            shutil.rmtree(home, ignore_errors=True)

    print()
    first = batches[0].seconds / max(1, batches[0].new)
    bare = args.bare
    header = (
        "| batch | new | documents | seconds | s / new document | ratio to first | runs | failed "
        "| KB_HOME MB | Dagster MB | Dagster events | events / new document "
        "| CPU s / new document: ingest, Milvus, Postgres |"
    )
    print(header + (" bare encode s | ingest / bare |" if bare else ""))
    print("|---" * (header.count("|") - 1 + (2 if bare else 0)) + "|")
    for b in batches:
        per = b.seconds / max(1, b.new)
        row = (
            f"| {b.label} | {b.new:,} | {b.documents:,} | {b.seconds:.1f} | {per:.3f} | {per / first:.2f} | {b.runs} | "
            f"{b.failed} | {b.home_bytes / MB:.1f} | {b.dagster_bytes / MB:.1f} | {b.events:,} | "
            f"{b.events / max(1, b.new):.1f} | "
            + ", ".join(f"{value / max(1, b.new):.3f}" for value in (b.cpu or {}).values())
            + " |"
        )
        if bare:
            row += f" {b.bare:.1f} | {b.seconds / b.bare:.1f}x |" if b.bare else " - | - |"
        print(row)
    print()
    total = len(notes.titles)
    print(
        f"edit: {len(edited)} notes ({len(edit_report.changed)} changed) in {edit_seconds:.2f} s, "
        f"{edit_seconds / max(1, len(edited)):.2f} s a note, {len(edit_report.run_ids)} runs, "
        f"{edit_events:,} Dagster events"
    )
    print(
        f"no-op re-run over {total:,} notes: {noop_seconds:.2f} s ({noop_seconds / total * 1000:.2f} ms a note), "
        f"{len(noop_report.run_ids)} runs"
    )
    print()
    print(f"stores after {total:,} notes (files and MB under each top folder of KB_HOME):")
    print("| folder | files | MB |")
    print("|---|---|---|")
    for name, (files, size) in final.items():
        print(f"| {name} | {files:,} | {size / MB:.1f} |")
    print(
        f"| all | {sum(f for f, _ in final.values()):,} | {sum(s for _, s in final.values()) / MB:.1f} |"
        f" ({sum(s for _, s in final.values()) / total / 1024:.1f} KB a note)"
    )
    print("largest files: " + ", ".join(f"{path} {size / MB:.1f} MB" for size, path in biggest))
    print(
        "largest catalog tables (rows, MB with indexes): "
        + ", ".join(f"{t} {r:,} {b / MB:.1f}" for t, (r, b) in tables)
    )
    if dagster_parts:
        files, size = final.get("dagster", (0, 0))
        print()
        print(f"Dagster storage alone: {files:,} files, {size / MB:.1f} MB ({size / total / 1024:.1f} KB a note)")
        print("| dagster/ | files | MB |")
        print("|---|---|---|")
        for name, (files, size) in dagster_parts.items():
            print(f"| {name} | {files:,} | {size / MB:.2f} |")
    print()
    print("search (make_searcher, default strategy; queries: note first lines):")
    print("| when | queries | p50 ms | p95 ms | note in top 10 |")
    print("|---|---|---|---|---|")
    for when, (p50, p95, found, count) in search_figures:
        print(f"| {when} | {count} | {p50:.1f} | {p95:.1f} | {found}/{count} |")
    print(f"\n{load()}")


def _request(query: str):
    from kb_assets.retrieval.search import SearchRequest

    return SearchRequest(query=query, knowledge_base_ids=[KB], limit=10)


if __name__ == "__main__":
    main()
