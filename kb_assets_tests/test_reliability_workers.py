"""Parse workers end with their parent: a ``kb-assets ingest`` killed with SIGKILL leaves no parsing
process (nor a multiprocessing resource tracker) behind, and a worker that outlived a killed process is
killed by the next command's scratch cleanup, only when it is still the process that was recorded."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kb_assets.lib.scratch import WORKERS, clean_scratch

pytestmark = pytest.mark.slow


def stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state first), or None."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def running(pid: int, started: str) -> bool:
    """The process with this pid and start time runs (a zombie does not)."""
    fields = stat_fields(pid)
    return fields is not None and fields[0] != "Z" and fields[19] == started


def token(pid: int) -> str:
    return f"{pid}.{stat_fields(pid)[19]}@{socket.gethostname()}"


def descendants(root: int) -> dict[int, tuple[str, str]]:
    """Every live descendant of ``root``: pid -> (start time, command line)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        fields = stat_fields(int(entry.name)) if entry.name.isdigit() else None
        if fields and fields[0] != "Z":
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    found, todo = {}, list(children.get(root, []))
    while todo:
        pid = todo.pop()
        fields = stat_fields(pid)
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if fields:
            found[pid] = (fields[19], cmdline)
            todo += children.get(pid, [])
    return found


def recorded(scratch: Path, pid: int) -> set[int]:
    """The pids of the workers recorded in the scratch folder of the process ``pid``."""
    return {int(record.name.split(".")[0]) for record in scratch.glob(f"{pid}.*/{WORKERS}/*")}


def long_pdf(path: Path, pages: int) -> None:
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(str(path))
    for page in range(pages):
        c.drawString(72, 760, f"Chapter {page + 1}: maintenance of the cooling plant")
        for line in range(30):
            c.drawString(
                72,
                730 - 20 * line,
                f"Step {line + 1} of chapter {page + 1}: check valve {page * 30 + line} "
                "and record the pressure in the plant log.",
            )
        c.showPage()
    c.save()


def test_killed_ingest_leaves_no_parse_worker_alive(tmp_path, catalog):
    folder = tmp_path / "docs"
    folder.mkdir()
    long_pdf(folder / "plant-manual.pdf", 40)  # over POOL_MIN_PAGES: parsed by the pool
    scratch = tmp_path / "scratch"
    env = {**os.environ, "KB_PARSE_WORKERS": "2", "KB_SCRATCH_DIR": str(scratch)}
    process = subprocess.Popen(
        [sys.executable, "-m", "kb_assets.cli", "ingest", str(folder), "--kb", "orphans"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    helpers: dict[int, tuple[str, str]] = {}
    deadline = time.monotonic() + 300
    try:
        while time.monotonic() < deadline and process.poll() is None:
            helpers = {pid: found for pid, found in descendants(process.pid).items() if "multiprocessing" in found[1]}
            spawned = {pid for pid, (_, cmdline) in helpers.items() if "spawn_main" in cmdline}
            if len(spawned) >= 2 and spawned <= recorded(scratch, process.pid):  # up and recorded: parsing
                break
            time.sleep(0.2)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    workers = {pid for pid, (_, cmdline) in helpers.items() if "spawn_main" in cmdline}
    assert len(workers) >= 2, "the ingest finished (or never started its parse workers) before it could be killed"

    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and any(running(pid, started) for pid, (started, _) in helpers.items()):
        time.sleep(0.2)
    left = {pid: cmdline for pid, (started, cmdline) in helpers.items() if running(pid, started)}
    assert not left, f"still running 20 s after the ingest was killed: {left}"

    # the workers had recorded themselves in the killed ingest's scratch folder; the next cleanup removes it
    (own,) = scratch.glob(f"{process.pid}.*")
    assert recorded(scratch, process.pid) >= workers
    assert own.name in clean_scratch(scratch) and not own.exists()


def test_cleanup_kills_a_surviving_worker_of_a_killed_process_and_only_that_process(tmp_path):
    parent = subprocess.Popen(["sleep", "60"])
    parent_token = token(parent.pid)
    parent.kill()
    parent.wait()
    survivor = subprocess.Popen(["sleep", "60"])  # a worker whose parent is gone, still running
    bystander = subprocess.Popen(["sleep", "60"])  # a later process that got a recorded worker's pid
    try:
        records = tmp_path / "scratch" / parent_token / WORKERS
        records.mkdir(parents=True)
        (records / token(survivor.pid)).touch()
        started = int(stat_fields(bystander.pid)[19])
        (records / f"{bystander.pid}.{started - 1}@{socket.gethostname()}").touch()

        assert clean_scratch(tmp_path / "scratch") == [parent_token]

        assert survivor.wait(timeout=10) == -signal.SIGKILL
        assert bystander.poll() is None
        assert not (tmp_path / "scratch" / parent_token).exists()
    finally:
        for process in (survivor, bystander):
            process.kill()
            process.wait()
