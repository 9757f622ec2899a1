"""Every command the README shows works as it says: each ``kb-assets`` line of its code blocks runs (its
placeholders filled with safe values: one small file, the knowledge base ``readme``, a fresh KB_HOME) and
exits 0, ``serve`` and ``dagster dev`` start and answer, and ``COMMAND --help`` documents every option
the README gives it; each ``make`` target it names exists."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()
BIN = Path(sys.executable).parent
NOTE = "# Backups\n\nBackups of the wiki are kept for 35 days, then deleted.\n"


def fenced_commands() -> list[str]:
    """The command lines of the README's code blocks, comments cut."""
    lines = [line for block in re.findall(r"```[a-z]*\n(.*?)```", README, re.S) for line in block.splitlines()]
    return [re.sub(r"\s+#\s.*$", "", line).strip() for line in lines if line.startswith(("kb-assets ", "make "))]


def inline_commands() -> list[str]:
    """The commands the README names in running text (`` `kb-assets docs` ``, `` `make dev` ``)."""
    spans = re.findall(r"`((?:kb-assets|make|\.venv/bin/dagster) [^`]+)`", README)
    return list(dict.fromkeys(span.strip() for span in spans))


KB_COMMANDS = [c for c in fenced_commands() if c.startswith("kb-assets ")]


def subcommand(line: str) -> str | None:
    """The sub-command of a ``kb-assets`` line (None for the group's own options such as ``-h``)."""
    word = line.split()[1]
    return None if word.startswith("-") or word.isupper() else word


def concrete(line: str, values: dict[str, str]) -> list[str]:
    """A README synopsis as a command to run: optional options kept, optional bare words dropped, the first
    of alternatives, placeholders filled from ``values``."""
    line = re.sub(r"\[(--[\w-]+(?: [^\]]+)?)\](\.\.\.)?", r"\1", line)
    line = re.sub(r"\[[a-z]+\]", "", line)
    line = re.sub(r"\b([\w.]+)(\|[\w.]+)+", r"\1", line).replace("...", "")
    words = shlex.split(line)
    if "--port" in words:
        words[words.index("--port") + 1] = values["PORT"]
    return [str(BIN / "kb-assets"), *(values.get(word, word) for word in words[1:])]


def test_readme_shows_commands_and_make_targets_that_exist():
    assert len(KB_COMMANDS) >= 10, KB_COMMANDS
    targets = set(re.findall(r"^([a-z-]+):", (REPO / "Makefile").read_text(), re.M))
    named = {c.split()[1] for c in [*fenced_commands(), *inline_commands()] if c.startswith("make ")}
    assert named and named <= targets, named - targets


@pytest.mark.parametrize("line", sorted({c for c in [*KB_COMMANDS, *inline_commands()] if c.startswith("kb-assets")}))
def test_help_of_each_command_documents_the_options_the_readme_uses(line):
    command = subcommand(line)
    args = [str(BIN / "kb-assets"), *([command] if command else []), "--help"]
    shown = subprocess.run(args, capture_output=True, text=True, cwd=REPO, timeout=300)
    assert shown.returncode == 0, shown.stderr
    for option in re.findall(r"(?<![\w-])(--?[a-z][\w-]*)", line):
        assert re.search(rf"(?<![\w-]){re.escape(option)}\b", shown.stdout), (line, option, shown.stdout)
    for word in re.findall(r"\b(rollback|up|down|status|pageindex|hybrid)\b", line):
        assert word in shown.stdout, (line, word)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def started(args: list[str], env: dict, url: str, timeout_s: float = 600) -> Iterator[None]:
    """A server process until its ``url`` answers 200; stopped (its process group) afterwards."""
    process = subprocess.Popen(
        args, env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
    )
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            assert process.poll() is None, process.stderr.read().decode()[-3000:] if process.stderr else ""
            try:
                if httpx.get(url, timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, f"{args} did not answer {url}"
            time.sleep(1)
        yield
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@pytest.mark.slow
def test_every_kb_assets_command_of_the_readme_runs_and_dagster_dev_starts():
    home = Path(tempfile.mkdtemp(prefix="kb-readme-"))
    home.chmod(0o755)
    env = dict(os.environ, KB_HOME=str(home), DAGSTER_HOME=str(home / "dagster"), DAGSTER_DISABLE_TELEMETRY="1")
    for name in ("KB_POSTGRES_URL", "KB_MILVUS_URI", "KB_OBJECT_STORE_URL", "KB_LAKE_URL", "KB_API_KEYS", "KB_WATCH"):
        env.pop(name, None)
    folder, moved = home / "notes", home / "moved-notes"
    folder.mkdir()
    (folder / "backups.md").write_text(NOTE)
    questions = home / "questions.jsonl"
    questions.write_text(
        json.dumps({"kb": "readme", "query": "How long are backups kept?", "file": "backups.md", "pages": [0, 0]})
        + "\n"
    )
    values = {
        "PATH": str(folder),
        "KB": "readme",
        "QUERY": "How long are backups kept?",
        "N": "3",
        "X": "0.1",
        "S": "pageindex",
        "QUESTIONS.jsonl": str(questions),
        "DOC": "backups.md",
        "OLD_ROOT": str(folder),
        "NEW_ROOT": str(moved),
        "PORT": str(free_port()),
    }

    def run(args: list[str]) -> str:
        done = subprocess.run(args, env=env, cwd=REPO, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, (args, done.stdout[-2000:], done.stderr[-3000:])
        return done.stdout

    ran = []
    try:
        for line in KB_COMMANDS:
            command = subcommand(line)
            args = concrete(line, values)
            if command == "serve":
                with started(args, env, f"http://127.0.0.1:{values['PORT']}/healthz"):
                    pass
            elif command == "relocate":
                shutil.copytree(folder, moved)
                run(args)
            else:
                run(args)
                if command == "chunks":  # the chunk that `lineage CHUNK_ID` traces
                    values["CHUNK_ID"] = json.loads(run([*args, "--json"]))["chunks"][0]["chunkId"]
            ran.append(command)
        assert {"ingest", "search", "serve", "docs", "lineage", "verify"} <= set(ran), ran
        assert "35 days" in run([str(BIN / "kb-assets"), "search", values["QUERY"], "--kb", "readme"])
        dagster_port = str(free_port())
        with started(
            [str(BIN / "dagster"), "dev", "-w", "workspace.yaml", "-p", dagster_port],
            env,
            f"http://127.0.0.1:{dagster_port}/server_info",
        ):
            pass
    finally:
        subprocess.run([str(BIN / "kb-assets"), "services", "down"], env=env, cwd=REPO, capture_output=True)
        shutil.rmtree(home, ignore_errors=True)
