"""`dagster asset materialize` of one unchanged partition beside `kb-assets ingest` of that one document.

    .venv/bin/python benchmarks/materialize_one.py [--file examples/corpus/platform-handbook.pdf] [--repeat 2]

Ingests one file into a fresh KB_HOME (a temporary folder, removed at the end with its services), then
times, each ``--repeat`` times (the best is printed): `kb-assets ingest FILE` (unchanged: no run starts),
`dagster asset materialize --select group:knowledge_base --partition KEY` (a run of every document asset
of that one partition, as the UI launches it), and where the time of that run goes in one warm process:
loading the code, the definitions, the instance, the stores (Postgres, Milvus, the model) and the run.
The goal of issue 34: the materialization within 2x the ingest.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def materialize_argv(partition_key: str) -> list[str]:
    """``dagster asset materialize`` of the knowledge-base assets of one partition (as a user runs it)."""
    return [
        str(BIN / "dagster"),
        "asset",
        "materialize",
        "-m",
        "kb_assets.definitions",
        "--select",
        "group:knowledge_base",
        "--partition",
        partition_key,
    ]


def timed(args: list[str], env: dict) -> float:
    started = time.perf_counter()
    done = subprocess.run(args, env=env, cwd=REPO, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return seconds


def breakdown(key: str) -> None:
    """Where one materialization's time goes, in a fresh process (run by ``main`` with ``--breakdown``)."""
    started = time.perf_counter()

    def mark(name: str) -> None:
        nonlocal started
        now = time.perf_counter()
        print(f"  {name:<44} {now - started:6.2f} s")
        started = now

    import dagster as dg

    mark("import dagster")
    import kb_assets.definitions as definitions
    from kb_assets.launch.runs import QUIET_RUN_CONFIG
    from kb_assets.pipeline.versions import STEPS

    mark("import kb_assets.definitions")
    from kb_assets.settings import Settings

    settings = Settings.from_env()
    job = definitions.make_definitions(settings).resolve_implicit_global_asset_job_def()
    mark("definitions")
    instance = dg.DagsterInstance.get()
    mark("instance")
    selection = [dg.AssetKey(k) for k in (*STEPS, "page_images")]
    for name in ("the run", "the same run again in this process"):
        result = job.execute_in_process(
            instance=instance, partition_key=key, asset_selection=selection, run_config=QUIET_RUN_CONFIG
        )
        mark(name)
        for step in instance.get_run_step_stats(result.run_id):
            print(f"    {step.step_key:<42} {(step.end_time or 0) - (step.start_time or 0):6.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--file", type=Path, default=REPO / "examples" / "corpus" / "platform-handbook.pdf")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--breakdown", metavar="PARTITION", help=argparse.SUPPRESS)  # the child process
    args = parser.parse_args()
    if args.breakdown:
        breakdown(args.breakdown)
        return
    home = Path(tempfile.mkdtemp(prefix="kb-materialize-one-"))
    env = dict(os.environ, KB_HOME=str(home), DAGSTER_HOME=str(home / "dagster"), DAGSTER_DISABLE_TELEMETRY="1")
    folder = home / "docs"
    folder.mkdir()
    shutil.copy(args.file, folder / args.file.name)
    target = str(folder / args.file.name)
    try:
        first = timed([str(BIN / "kb-assets"), "ingest", target, "--kb", "bench"], env)
        print(f"first ingest of {args.file.name}: {first:.1f} s")
        listed = subprocess.run(
            [str(BIN / "kb-assets"), "docs", "--kb", "bench", "--json"], env=env, capture_output=True, text=True
        )
        key = json.loads(listed.stdout)["documents"][0]["partitionKey"]
        ingests, materializations = [], []
        for _ in range(args.repeat):
            ingests.append(timed([str(BIN / "kb-assets"), "ingest", target, "--kb", "bench"], env))
            materializations.append(timed(materialize_argv(key), env))
        ingest_s, materialize_s = min(ingests), min(materializations)
        print(f"kb-assets ingest of the unchanged document: {ingest_s:.1f} s (best of {args.repeat})")
        print(
            f"dagster asset materialize of its partition:  {materialize_s:.1f} s (best of {args.repeat}); "
            f"{materialize_s / ingest_s:.1f}x the ingest (goal: <= 2x)"
        )
        print("where a materialization's time goes, in a fresh process:")
        subprocess.run([sys.executable, __file__, "--breakdown", key], env=env, cwd=REPO, check=True)
    finally:
        subprocess.run([str(BIN / "kb-assets"), "services", "down"], env=env, cwd=REPO, capture_output=True)
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
