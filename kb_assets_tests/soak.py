"""A bounded soak of the service (issue 9): 4 clients send searches, page and lineage requests to a real
uvicorn server on 127.0.0.1 while ingests add, change and delete documents of another knowledge base
and the Milvus Lite server is killed once (the service restarts it: ``retrieval/healing.py``).

Every answer is checked: a 5xx is an error; a search must answer 200 with results from the stable
document it asks about (hybrid) or results marked ``fallback_pages`` (no score); a page must hold its
text; a lineage must verify; requests about the churning knowledge base may also find a document
gone (404). After the last ingest, ``verify`` must report the stores consistent. Loops are bounded in
count and time; traffic goes to 127.0.0.1 only. Used by ``test_soak.py`` (about 60 s) and
``benchmarks/soak.py`` (the long form).
"""

from __future__ import annotations

import logging
import os
import random
import signal
import socket
import statistics
import threading
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kb_assets.pipeline.verify import VerifyReport
from pathlib import Path

import httpx

STABLE = {
    "backups.md": (
        "# Backup handbook\n\n## Retention\n\nNightly backups of the billing database are kept for 35 days "
        "in the cold tier. Restores are rehearsed every quarter.\n",
        "How long are billing backups kept?",
        "35 days",
    ),
    "oncall.md": (
        "# On-call guide\n\n## Rotation\n\nThe pager rotation changes every Monday at 09:00 and the "
        "secondary engineer is paged after 15 minutes.\n",
        "When does the pager rotation change?",
        "Monday",
    ),
}
KEY = "soak-key"


@dataclass
class SoakReport:
    requests: int = 0
    errors: list[str] = field(default_factory=list)  # 5xx and wrong answers
    fallbacks: int = 0
    gone: int = 0  # 404 for a churned document
    latencies_ms: list[float] = field(default_factory=list)
    ingests: int = 0
    ingest_failures: list[str] = field(default_factory=list)
    milvus_killed_at_s: float | None = None
    milvus_restarts: int = 0  # by the service's watchdog
    milvus_back: bool = False  # a new server by the end (watchdog or an ingest)
    unavailable: int = 0  # 503 with Retry-After while a store was down: the answer the service owes, not an error
    postgres_stopped_at_s: float | None = None
    ingest_killed_at_s: float | None = None
    lost_documents: list[str] = field(default_factory=list)  # files present at the end but not published
    leftover_processes: list[str] = field(default_factory=list)  # processes of a killed ingest still alive
    killed_ingest_children: int = 0  # the processes the killed ingest had started (its parse workers)
    verify: VerifyReport | None = None
    seconds: float = 0.0

    def p95_ms(self) -> float:
        if len(self.latencies_ms) < 2:
            return self.latencies_ms[0] if self.latencies_ms else 0.0
        return statistics.quantiles(self.latencies_ms, n=20)[-1]

    def summary(self) -> str:
        return (
            f"{self.requests} requests in {self.seconds:.0f} s, {len(self.errors)} errors, "
            f"{self.fallbacks} fallback answers, {self.gone} gone (404), p95 {self.p95_ms():.0f} ms; "
            f"{self.ingests} ingests ({len(self.ingest_failures)} with failed documents), Milvus killed at "
            f"{self.milvus_killed_at_s} s, back: {self.milvus_back} (the service restarted it "
            f"{self.milvus_restarts}x); Postgres stopped at {self.postgres_stopped_at_s} s, an ingest killed at "
            f"{self.ingest_killed_at_s} s (with {self.killed_ingest_children} child processes); "
            f"{self.unavailable} answers 503 with Retry-After; "
            f"{len(self.lost_documents)} lost documents, {len(self.leftover_processes)} leftover processes; "
            f"verify consistent: {self.verify.consistent if self.verify else None}"
        )


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _prepare(home: Path, settings):
    """The stable knowledge base (ingested once) and the churn folder; returns the stable facts."""
    from kb_assets.launch.ingest import ingest

    stable = home / "soak" / "stable"
    stable.mkdir(parents=True, exist_ok=True)
    for name, (text, _, _) in STABLE.items():
        (stable / name).write_text(text, encoding="utf-8")
    report = ingest([stable], "soak-stable", settings)
    assert not report.failures, report.failures


def _churn_text(n: int) -> str:
    return (
        f"# Churn note {n}\n\n## Body\n\nThis note {n} records that the warehouse load {n} finished at "
        f"{n % 24:02d}:00 and that {n * 7} rows were checked.\n"
    )


def run_soak(
    settings,
    home: Path,
    duration_s: float = 60.0,
    max_requests: int = 2000,
    kill_milvus_at_s: float | None = 20.0,
    clients: int = 4,
    seed: int = 7,
    min_ingests: int = 0,
    stop_postgres_at_s: float | None = None,
    postgres_down_s: float = 10.0,
    kill_ingest_at_s: float | None = None,
) -> SoakReport:
    """``min_ingests``: go on past ``duration_s`` (up to four times it) until that many ingests ran, so a
    loaded machine still churns the documents the clients read. ``stop_postgres_at_s``: stop the embedded
    Postgres then, for ``postgres_down_s`` (a request meanwhile may answer 503 with Retry-After, never
    another 5xx); ``kill_ingest_at_s``: start a ``kb-assets ingest`` process of a large document then and
    kill -9 it while it parses (its parse workers must die with it)."""
    import uvicorn

    from kb_assets.launch.ingest import ingest
    from kb_assets.pipeline.verify import verify
    from kb_assets.service.api import create_app
    from kb_assets.services import milvus_status
    from kb_assets.stores import Stores, open_milvus

    _prepare(home, settings)
    stores = Stores(settings)
    stable_docs = {d.source_path: d for d in stores.catalog.list_documents(["soak-stable"])}
    stable_chunks = [c for d in stable_docs.values() for c in stores.lake.read("chunks", d.document_id)["chunk_id"]]
    churn = home / "soak" / "churn"
    churn.mkdir(parents=True, exist_ok=True)
    for n in range(3):
        (churn / f"note-{n}.md").write_text(_churn_text(n), encoding="utf-8")
    ingest([churn], "soak-churn", settings)

    app_settings = replace(settings, api_keys=f"{KEY}=soak-stable,soak-churn")
    app = create_app(app_settings, heal=True)
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, name="soak-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the soak server did not start")
        time.sleep(0.05)

    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line a request otherwise, on a soak of thousands
    report = SoakReport()
    lock = threading.Lock()
    started = time.monotonic()
    stop_at = started + duration_s
    base = f"http://127.0.0.1:{port}"
    headers = {"Authorization": f"Bearer {KEY}"}

    def record(ok: bool, what: str, ms: float, fallback: bool = False, gone: bool = False, answer=None):
        with lock:
            report.requests += 1
            report.latencies_ms.append(ms)
            report.fallbacks += fallback
            report.gone += gone
            if answer is not None and answer.status_code == 503 and answer.headers.get("Retry-After"):
                report.unavailable += 1  # a store is down and the service says when to come back
            elif not ok:
                report.errors.append(what)

    hard_stop = started + 4 * duration_s

    def running(margin: float = 0.0) -> bool:
        now = time.monotonic()
        return now < stop_at - margin or (report.ingests < min_ingests and now < hard_stop)

    def more() -> bool:
        with lock:
            return running() and report.requests < max_requests

    def client_loop(number: int):
        rng = random.Random(seed + number)
        with httpx.Client(base_url=base, headers=headers, timeout=60) as http:
            while more():
                kind = rng.choice(("search", "search", "page", "lineage", "churn", "ready"))
                t0 = time.perf_counter()
                try:
                    if kind == "search":
                        name = rng.choice(list(STABLE))
                        _, question, expected = STABLE[name]
                        r = http.post(
                            "/v1/kb/search", json={"query": question, "knowledgeBaseIds": ["soak-stable"], "limit": 3}
                        )
                        ms = (time.perf_counter() - t0) * 1000
                        body = r.json() if r.status_code == 200 else {}
                        rows = body.get("results") or []
                        fallback = bool(rows) and all(
                            x["retrievalSource"] == "fallback_pages" and x["score"] is None for x in rows
                        )
                        right = bool(rows) and (
                            fallback
                            or any(
                                x["documentId"] == stable_docs[name].document_id and expected in x["content"]
                                for x in rows
                            )
                        )
                        record(
                            r.status_code == 200 and right,
                            f"search {question!r}: {r.status_code} {str(body)[:200]}",
                            ms,
                            fallback=fallback,
                            answer=r,
                        )
                    elif kind == "page":
                        name = rng.choice(list(STABLE))
                        doc = stable_docs[name]
                        r = http.get(f"/v1/documents/{doc.document_id}/pages/0")
                        ms = (time.perf_counter() - t0) * 1000
                        right = r.status_code == 200 and STABLE[name][2] in r.json()["text"]
                        record(right, f"page {name}: {r.status_code} {r.text[:200]}", ms, answer=r)
                    elif kind == "lineage":
                        chunk = rng.choice(stable_chunks)
                        r = http.get(f"/v1/chunks/{chunk}/lineage")
                        ms = (time.perf_counter() - t0) * 1000
                        record(
                            r.status_code == 200 and r.json()["verified"],
                            f"lineage {chunk}: {r.status_code} {r.text[:200]}",
                            ms,
                            answer=r,
                        )
                    elif kind == "ready":  # the probes: any Host (a pod IP), no key, no data
                        r = http.get("/readyz", headers={"Host": "10.0.0.7:8000", "Authorization": ""})
                        ms = (time.perf_counter() - t0) * 1000
                        ok = r.status_code == 200 or (r.status_code == 503 and bool(r.headers.get("Retry-After")))
                        record(ok and "soak" not in r.text, f"readyz: {r.status_code} {r.text[:200]}", ms)
                    else:
                        r = http.post(
                            "/v1/kb/search",
                            json={
                                "query": "warehouse load rows checked",
                                "knowledgeBaseIds": ["soak-churn"],
                                "limit": 5,
                            },
                        )
                        ms = (time.perf_counter() - t0) * 1000
                        rows = r.json().get("results", []) if r.status_code == 200 else []
                        fallback = bool(rows) and all(x["retrievalSource"] == "fallback_pages" for x in rows)
                        right = r.status_code == 200 and all(x["knowledgeBaseId"] == "soak-churn" for x in rows)
                        gone, p = False, r
                        if right and rows and rng.random() < 0.5:  # then its page: there, or gone meanwhile
                            p = http.get(f"/v1/documents/{rows[0]['documentId']}/pages/{rows[0]['pageIndex']}")
                            gone = p.status_code == 404
                            right = p.status_code == 200 or gone
                        record(
                            right,
                            f"churn: {r.status_code} {r.text[:200]}",
                            ms,
                            fallback=fallback,
                            gone=gone,
                            answer=p,
                        )
                except httpx.HTTPError as error:
                    record(False, f"{kind}: {type(error).__name__}: {error}", (time.perf_counter() - t0) * 1000)

    def churn_loop():
        rng = random.Random(seed)
        n = 3
        while running(margin=5):
            present = sorted(churn.glob("note-*.md"))
            action = rng.choice(("add", "change", "delete")) if len(present) > 1 else "add"
            if action == "add":
                (churn / f"note-{n}.md").write_text(_churn_text(n), encoding="utf-8")
                n += 1
            elif action == "change":
                target = rng.choice(present)
                target.write_text(target.read_text(encoding="utf-8") + f"\nRevised at step {n}.\n", encoding="utf-8")
                n += 1
            else:
                rng.choice(present).unlink()
            try:
                result = ingest([churn], "soak-churn", settings)
                failures = str(result.failures)[:300] if result.failures else None
            except Exception as error:  # Milvus died under this ingest: a later one (a new process) retries
                failures = f"{type(error).__name__}: {str(error)[:300]}"
                open_milvus.cache_clear()  # what a new `kb-assets ingest` process would do: find the server again
            with lock:
                report.ingests += 1
                if failures:
                    report.ingest_failures.append(failures)

    def killer():
        if kill_milvus_at_s is None:
            return
        while time.monotonic() < started + kill_milvus_at_s:
            time.sleep(0.1)
        pid = milvus_status(settings.home)["pid"]
        if pid:
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
            report.milvus_killed_at_s = round(time.monotonic() - started, 1)

    def postgres_outage():
        if stop_postgres_at_s is None:
            return
        from kb_assets.services import ensure_postgres, stop_postgres

        while time.monotonic() < started + stop_postgres_at_s:
            time.sleep(0.1)
        stop_postgres(settings.home)
        report.postgres_stopped_at_s = round(time.monotonic() - started, 1)
        time.sleep(postgres_down_s)
        ensure_postgres(settings.home, settings.postgres_binaries)

    def ingest_kill():
        if kill_ingest_at_s is None:
            return
        while time.monotonic() < started + kill_ingest_at_s:
            time.sleep(0.1)
        report.ingest_killed_at_s = round(time.monotonic() - started, 1)
        children, leftover = kill_an_ingest(home, settings)
        report.killed_ingest_children, report.leftover_processes = children, leftover

    killed: list[int] = []
    threads = [threading.Thread(target=client_loop, args=(i,), name=f"soak-client-{i}") for i in range(clients)]
    threads += [
        threading.Thread(target=churn_loop, name="soak-ingest"),
        threading.Thread(target=killer, name="soak-kill"),
        threading.Thread(target=postgres_outage, name="soak-postgres"),
        threading.Thread(target=ingest_kill, name="soak-kill-ingest"),
    ]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=duration_s + 600)
        report.seconds = time.monotonic() - started
        report.milvus_restarts = app.state.service.watchdog.restarts if app.state.service.watchdog else 0
        # whoever got there first: the service's watchdog, or an ingest that needed Milvus (both heal it)
        status = milvus_status(settings.home)
        report.milvus_back = bool(killed) and status["running"] and status["pid"] not in killed
    finally:
        server.should_exit = True
        thread.join(timeout=30)
    # once the service healed Milvus, the last ingest converges and the stores agree
    if not milvus_status(settings.home)["running"]:  # nothing healed it (the test fails on milvus_back)
        from kb_assets.services import ensure_milvus

        ensure_milvus(settings.home)
    open_milvus.cache_clear()
    stores = Stores(settings)
    final = ingest([churn], "soak-churn", settings)
    if final.failures:
        report.ingest_failures.append(f"final: {final.failures}")
    report.verify = verify(stores.catalog, stores.lake, stores.milvus, settings.alias)
    present = {f.name for f in churn.glob("note-*.md")}
    published = {d.source_path for d in stores.catalog.list_documents(["soak-churn"]) if d.status == "published"}
    stable = {d.source_path for d in stores.catalog.list_documents(["soak-stable"]) if d.status == "published"}
    report.lost_documents = sorted(present - published) + sorted(set(STABLE) - stable)
    return report


def kill_an_ingest(home: Path, settings, wait_s: float = 120.0) -> tuple[int, list[str]]:
    """Start ``kb-assets ingest`` of a many-page PDF with two parse workers, kill -9 it once its workers
    run; how many processes it had started, and those still alive after a bounded wait (its workers die
    with it)."""
    import subprocess
    import sys

    from reportlab.pdfgen import canvas

    folder = home / "soak" / "killed"
    folder.mkdir(parents=True, exist_ok=True)
    pdf = canvas.Canvas(str(folder / "long.pdf"))
    for page in range(60):
        pdf.drawString(72, 720, f"Page {page + 1}: the soak's long document, parsed when the ingest is killed.")
        pdf.showPage()
    pdf.save()
    env = {**os.environ, "KB_HOME": str(settings.home), "KB_PARSE_WORKERS": "2"}
    child = subprocess.Popen(
        [sys.executable, "-m", "kb_assets.cli", "ingest", str(folder), "--kb", "soak-killed"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline and child.poll() is None and not _descendants(child.pid):
        time.sleep(0.2)
    time.sleep(1.0)
    family = _descendants(child.pid)
    child.kill()
    child.wait()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and [pid for pid in family if _alive(pid)]:
        time.sleep(0.5)
    return len(family), [f"{pid}: {_cmdline(pid)[:120]}" for pid in family if _alive(pid)]


def _descendants(pid: int) -> list[int]:
    """Processes below ``pid`` (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " ")
    except OSError:
        return ""
