"""``kb-assets ingest`` shows progress inside its runs on a terminal (documents done / total, pages/s, the
time left) and none with ``--json``: the command runs in a pseudo-terminal, as a person would run it."""

from __future__ import annotations

import json
import os
import pty
import re
import select
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
    assert "3 files: 3 new" in plain
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
