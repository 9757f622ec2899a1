"""``kb-assets ingest`` shows progress inside its runs on a terminal (documents done / total, pages/s, the
time left) and none with ``--json``: the command runs in a pseudo-terminal, as a person would run it."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import shutil
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.slow

NOTE = "# Backups\n\nBackups of the wiki are kept for 35 days. " * 20


def run_in_terminal(args: list[str], timeout_s: float = 900) -> tuple[int, str]:
    """Run a command with its stdin, stdout and stderr on a pseudo-terminal; its exit code and output."""
    leader, follower = pty.openpty()
    process = subprocess.Popen(
        args, stdin=follower, stdout=follower, stderr=follower, env={**os.environ, "COLUMNS": "120"}
    )
    os.close(follower)
    output, deadline = bytearray(), time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 1.0)
            if ready:
                try:
                    data = os.read(leader, 65536)
                except OSError:  # the command closed the terminal
                    break
                if not data:
                    break
                output += data
            elif process.poll() is not None:
                break
    finally:
        os.close(leader)
        if process.poll() is None:
            process.kill()
    return process.wait(), output.decode(errors="replace")


def test_ingest_on_a_terminal_shows_documents_done_pages_per_second_and_time_left(tmp_path, settings):
    folder = tmp_path / "notes"
    folder.mkdir()
    for n in range(3):
        (folder / f"note-{n}.md").write_text(NOTE + f"\n\nNote {n}.\n")

    code, output = run_in_terminal([sys.executable, "-m", "kb_assets.cli", "ingest", str(folder), "--kb", "progress"])

    assert code == 0, output[-3000:]
    plain = re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]", "", output)  # the bar's cursor moves and colours
    assert "3 files: 3 to run (3 new" in plain
    assert re.search(r"documents .*3/3 +0 failed +[0-9.]+ pages/s +ETA 0:00", plain), plain[-3000:]
    assert "ingested into progress: 3 new" in plain


def test_ingest_with_json_on_a_terminal_prints_only_json(tmp_path, settings):
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "note.md").write_text(NOTE)

    code, output = run_in_terminal(
        [sys.executable, "-m", "kb_assets.cli", "ingest", str(folder), "--kb", "progress-json", "--json"]
    )

    assert code == 0, output[-3000:]
    assert "pages/s" not in output and "files:" not in output and "\x1b[" not in output
    assert json.loads(output)["documents"]["new"] == 1


PROGRESS = re.compile(r"^(\d+ files: |documents )")  # the plan line and the progress lines


def broken_batch(folder, corpus_dir, sample: bool):
    """A folder of the sample corpus (or one note) and a PDF cut to 4,000 bytes."""
    if sample:
        shutil.copytree(corpus_dir, folder)
    else:
        folder.mkdir()
        (folder / "note.md").write_text(NOTE)
    (folder / "cut.pdf").write_bytes((corpus_dir / "platform-handbook.pdf").read_bytes()[:4000])


def test_a_broken_file_is_one_line_on_stderr_naming_the_run_log(tmp_path, settings, corpus_dir):
    """The sample corpus and a broken PDF, stderr not a terminal: the plan, the progress and exactly one
    line for the failed document, naming the file under KB_HOME where the runs' events and tracebacks are."""
    folder = tmp_path / "batch"
    broken_batch(folder, corpus_dir, sample=True)

    done = subprocess.run(
        [sys.executable, "-m", "kb_assets.cli", "ingest", str(folder), "--kb", "broken-batch"],
        capture_output=True,
        text=True,
        timeout=900,
    )

    assert done.returncode == 1, done.stderr[-3000:]
    lines = done.stderr.strip().splitlines()
    failed = [line for line in lines if "cut.pdf" in line]
    log = settings.runs_log
    assert len(failed) == 1 and failed[0].startswith(f"FAILED {folder / 'cut.pdf'}: ") and str(log) in failed[0]
    assert [line for line in lines if line not in failed and not PROGRESS.match(line)] == [], done.stderr
    assert "Traceback" not in done.stderr and " - dagster - " not in done.stderr and "STEP_FAILURE" not in done.stderr
    # the plan counts the broken file new (before its run); the report counts it failed, not new
    assert "9 files: 9 to run (9 new" in done.stderr and "ingested into broken-batch: 8 new" in done.stdout
    assert "1 failed" in done.stdout
    assert "refused" in log.read_text() and "cut.pdf" in log.read_text()  # the details are there


def test_a_broken_file_is_one_line_on_a_terminal_and_debug_shows_the_events(tmp_path, settings, corpus_dir):
    folder = tmp_path / "batch"
    broken_batch(folder, corpus_dir, sample=False)

    code, output = run_in_terminal([sys.executable, "-m", "kb_assets.cli", "ingest", str(folder), "--kb", "broken-tty"])

    assert code == 1, output[-3000:]
    plain = re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]", "", output).replace("\r", "\n")
    assert len([line for line in plain.splitlines() if "cut.pdf" in line]) == 1, plain
    assert "Traceback" not in plain and "STEP_FAILURE" not in plain
    code, output = run_in_terminal(
        [
            sys.executable,
            "-m",
            "kb_assets.cli",
            "--debug",
            "ingest",
            str(folder),
            "--kb",
            "broken-tty",
            "--retry-failed",
        ]
    )
    assert code == 1 and "refused: " in output  # --debug: Dagster's events on the terminal too (the step's line)


def test_search_prints_each_results_context_the_question_words_marked_on_a_terminal(handbook):
    """The answer a reader needs is in the result's context (the page around the chunk), which the command
    line prints whole, as the web page shows it: plain when piped, the question's words in bold on a terminal."""
    query = ["search", "How long are backups kept?", "--kb", "handbook", "--limit", "3"]
    piped = subprocess.run([sys.executable, "-m", "kb_assets.cli", *query], capture_output=True, text=True, timeout=300)
    assert piped.returncode == 0 and "Backups are kept for 35 days." in piped.stdout, piped.stdout
    assert "\x1b[" not in piped.stdout

    code, output = run_in_terminal([sys.executable, "-m", "kb_assets.cli", *query])
    assert code == 0
    assert "\x1b[1m\x1b[4mBackups\x1b[0m" in output or "\x1b[1m\x1b[4mbackups\x1b[0m" in output.lower(), output
