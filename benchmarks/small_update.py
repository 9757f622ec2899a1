"""What one edited file costs through the command line: `kb-assets ingest` of the 8-file sample corpus after
one Markdown file changed, beside the no-op re-run, and where the time above the no-op goes.

    .venv/bin/python benchmarks/small_update.py [--repeat 3] [--keep]

Copies examples/corpus into a fresh KB_HOME's folder (a temporary one, removed with its services at the
end), ingests it once (cold), then each ``--repeat`` times: the no-op re-run and a re-run after one line was
appended to architecture.md, as a user runs them (a new `kb-assets` process each; the best and the median
are printed), first with no warm ingest runner (``KB_RUNNER_IDLE_SECONDS=0``: each command loads what its
run needs), then with the default one (``launch/runner.py``; the first edit after it warmed up is printed
apart). Then, in fresh processes, what the edit's run loads that the no-op does not: the definitions,
docling (the Markdown reader), great-expectations (the checks), the encoder; and the same edit as the UI or
a sensor launches it (`dagster asset materialize` of the partition, a fresh process). The goal of issue 46:
the edit within 5 s on an idle 2-core machine, still one Dagster run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
KB_ASSETS = [sys.executable, "-m", "kb_assets.cli"]
# what a one-file run imports beyond the no-op, each timed in a fresh process after what the no-op loads
LOADS = {
    "the no-op's own imports (click, settings, stores, dagster)": "import kb_assets.cli, kb_assets.stores, dagster",
    "+ the definitions (assets, checks, jobs)": "from kb_assets.definitions import make_definitions",
    "+ docling (the Markdown reader; imports torch)": "import kb_assets.parsing.converter as c; c.get_converter()",
    "+ great-expectations (the checks)": "import kb_assets.defs.quality as q; q._batch_definition()",
    "+ the encoder (onnxruntime, loaded)": "from kb_assets.stores import load_model; load_model('all-MiniLM-L6-v2')",
}


def timed(args: list[str], env: dict) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(args, env=env, cwd=REPO, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return seconds, done.stdout


def loads(env: dict) -> None:
    """Each load of LOADS timed in a fresh process, after the ones above it."""
    code = ["import time"]
    for name, statement in LOADS.items():
        label = repr(f"  {name:<56}")
        code += ["t = time.perf_counter()", statement, f"print({label}, f'{{time.perf_counter() - t:5.2f}} s')"]
    subprocess.run([sys.executable, "-c", "\n".join(code)], env=env, cwd=REPO, check=True)


def wait_for_runner(kb_home: Path, timeout_s: float = 300) -> None:
    """Until the runner of ``kb_home`` listens (it warms up first)."""
    deadline = time.monotonic() + timeout_s
    while not (kb_home / "dagster" / "run" / "ingest-runner.sock").exists():
        if time.monotonic() > deadline:
            raise SystemExit("the warm ingest runner did not start")
        time.sleep(0.5)


def partition_key(env: dict, note: Path) -> str:
    listed = subprocess.run([*KB_ASSETS, "docs", "--kb", "handbook", "--json"], env=env, capture_output=True, text=True)
    docs = __import__("json").loads(listed.stdout)["documents"]
    return next(d["partitionKey"] for d in docs if d["sourceUri"] == str(note))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", action="store_true", help="leave the KB_HOME and its services")
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="kb-small-update-"))
    home.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KB_", "DAGSTER_HOME"))}
    env.update(KB_HOME=str(home / "kb"), DAGSTER_DISABLE_TELEMETRY="1")
    corpus = home / "corpus"
    shutil.copytree(REPO / "examples" / "corpus", corpus)
    note = corpus / "architecture.md"
    ingest = [*KB_ASSETS, "ingest", str(corpus), "--kb", "handbook"]
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    cold_env = {**env, "KB_RUNNER_IDLE_SECONDS": "0"}
    edits = iter(range(1000))

    def edited() -> None:
        with note.open("a") as file:
            file.write(f"\nEdit {next(edits)}: one more line.\n")

    def rounds(run_env: dict) -> tuple[list[float], list[float]]:
        noop, edit = [], []
        for _ in range(args.repeat):
            noop.append(timed(ingest, run_env)[0])
            edited()
            seconds, out = timed(ingest, run_env)
            assert "1 changed" in out, out
            edit.append(seconds)
        return noop, edit

    def show(name: str, values: list[float]) -> None:
        best, median = min(values), statistics.median(values)
        print(f"  {name:<32} best {best:5.2f} s, median {median:5.2f} s ({len(values)} runs)")

    try:
        cold, _ = timed(ingest, cold_env)
        print(f"first ingest of the 8 files: {cold:.1f} s")
        print("no warm runner (KB_RUNNER_IDLE_SECONDS=0): each command loads what its run needs")
        noop, edit = rounds(cold_env)
        show("no-op re-run", noop)
        show("one edited Markdown file", edit)
        print(f"  the edit above the no-op: {min(edit) - min(noop):.2f} s; what it loads that the no-op does not:")
        loads(env)
        print("the warm ingest runner (the default): started by an ingest, warmed up in the background")
        timed(ingest, env)  # starts it
        wait_for_runner(home / "kb")
        edited()
        print(f"  {'the first edit it takes':<32} {timed(ingest, env)[0]:5.2f} s")
        noop, edit = rounds(env)
        show("no-op re-run", noop)
        show("one edited Markdown file", edit)
        print("the same edit as the UI or a sensor launches it (a fresh run process, no runner):")
        edited()
        register = (
            "import sys; from kb_assets.launch.ingest import register; from kb_assets.launch.instance import "
            "dagster_instance; from kb_assets.settings import Settings; from kb_assets.stores import Stores; "
            "s = Settings.from_env(); register([sys.argv[1]], 'handbook', Stores(s), dagster_instance(s), s)"
        )
        timed([sys.executable, "-c", register, str(corpus)], cold_env)  # as the sensor's tick: the new version
        materialize = [str(BIN / "dagster"), "asset", "materialize", "-m", "kb_assets.definitions"]
        materialize += ["--select", "group:knowledge_base", "--partition", partition_key(env, note)]
        seconds, _ = timed(materialize, {**cold_env, "DAGSTER_HOME": str(home / "kb" / "dagster")})
        print(f"  {'dagster asset materialize':<32} {seconds:5.2f} s")
        print(f"load average after: {os.getloadavg()[0]:.2f}")
    finally:
        if not args.keep:
            subprocess.run([*KB_ASSETS, "services", "down"], env=env, cwd=REPO, capture_output=True)
            shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
