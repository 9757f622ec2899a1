"""What one edited file costs: `kb-assets ingest` of the 8-file sample corpus after one Markdown file changed,
beside the no-op re-run, and the same edit launched as the folder sensor and the UI launch it.

    .venv/bin/python benchmarks/small_update.py [--repeat 3] [--keep] [--skip-launched]

Copies examples/corpus into a fresh KB_HOME's folder (a temporary one, removed with its services at the
end), ingests it once (cold), then each ``--repeat`` times: the no-op re-run and a re-run after one line was
appended to architecture.md, as a user runs them (a new `kb-assets` process each; the best and the median
are printed), first with no warm ingest runner (``KB_RUNNER_IDLE_SECONDS=0``: each command loads what its
run needs), then with the default one (``launch/runner.py``; the first edit after it warmed up is printed
apart), and, in fresh processes, what the edit's run loads that the no-op does not.

Launched: a real ``dagster-daemon`` on the instance (the embedded profile's run queue and run launcher,
``launch/run_launcher.py``) with KB_WATCH on the folder: each edit is timed from the run the folder sensor
requests (the run's creation: the sensor's interval is not counted) to the file's ``milvus_collection``
partition materialized, and to the run's end; with the warm runner up, then once with none
(``KB_RUNNER_IDLE_SECONDS=0``: the default launch, a run process of its own). Then the UI's click: a
``dagster-webserver`` beside the daemon (no KB_WATCH), the edit registered as a scan does, and the
Materialize of that partition sent as the UI sends it (GraphQL ``launchPipelineExecution`` of the asset
job), timed from the request. Issue 54's goal on a 2-core machine: launched <= 8 s (from 30.1 s), the
command line's edit <= 4 s.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
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


def background(args: list[str], env: dict, log: Path) -> subprocess.Popen:
    """A Dagster process (daemon, webserver) in a session of its own, its output in ``log``."""
    with open(log, "ab") as out:
        return subprocess.Popen(args, env=env, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def stop(process: subprocess.Popen) -> None:
    """SIGINT to its process group (Dagster's processes ignore SIGTERM in the background), then SIGKILL."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGINT)
        try:
            process.wait(30)
            return
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()


def published(instance, key: str, since: float, run_filter, timeout_s: float = 300) -> tuple[float, float, float]:
    """When the first run matching ``run_filter`` created after ``since`` was created, when it materialized
    the partition's ``milvus_collection`` and when it ended (epoch seconds)."""
    import dagster as dg

    deadline = time.time() + timeout_s
    while time.time() < deadline:
        records = [instance.get_run_record_by_id(r.run_id) for r in instance.get_runs(run_filter, limit=5)]
        records = [r for r in records if r.create_timestamp.timestamp() > since]
        if records and records[-1].dagster_run.is_finished:
            record = records[-1]
            created = record.create_timestamp.timestamp()
            assert record.dagster_run.is_success, f"run {record.dagster_run.run_id}: {record.dagster_run.status}"
            (done,) = instance.fetch_materializations(
                dg.AssetRecordsFilter(
                    asset_key=dg.AssetKey("milvus_collection"), asset_partitions=[key], after_timestamp=created
                ),
                limit=1,
            ).records
            return created, done.timestamp, record.end_time or time.time()
        time.sleep(0.2)
    raise SystemExit(f"no run published {key} within {timeout_s} s")


def show_launched(name: str, times: list[tuple[float, float]]) -> None:
    for what, values in (("published", [p for p, _ in times]), ("run finished", [e for _, e in times])):
        best, median = min(values), statistics.median(values)
        print(f"  {name:<34} {what:<13} best {best:5.2f} s, median {median:5.2f} s ({len(values)} runs)")


def launched(home: Path, env: dict, corpus: Path, note: Path, edited, ingest: list[str], repeat: int) -> None:
    """The edit as the folder sensor and the UI launch it (see the module's docstring)."""
    sys.path.insert(0, str(REPO))  # this checkout's kb_assets, as the commands above run it
    import dagster as dg

    from kb_assets.launch.instance import dagster_instance
    from kb_assets.settings import Settings

    dagster_env = {**env, "DAGSTER_HOME": str(home / "kb" / "dagster"), "PYTHONPATH": str(REPO)}
    instance = dagster_instance(Settings.from_env(dagster_env))
    key = partition_key(env, note)
    by_sensor = dg.RunsFilter(job_name="ingest_documents", tags={"dagster/sensor_name": "watched_folders_sensor"})
    watching = {**dagster_env, "KB_WATCH": f"handbook={corpus}", "KB_WATCH_INTERVAL_SECONDS": "5"}
    daemon_args = [str(BIN / "dagster-daemon"), "run", "-w", str(REPO / "workspace.yaml")]
    logs = home / "kb" / "dagster" / "logs"

    def sensor_rounds(daemon_env: dict, count: int) -> list[tuple[float, float]]:
        """From the run the sensor requests to the partition published, and to the run's end."""
        daemon = background(daemon_args, daemon_env, logs / "daemon.log")
        try:
            time.sleep(20)  # the daemon loads the code location and ticks once with nothing changed
            times = []
            for _ in range(count):
                since = time.time()
                edited()
                created, done, ended = published(instance, key, since, by_sensor)
                times.append((done - created, ended - created))
            return times
        finally:
            stop(daemon)

    print(f"launched by the folder sensor under dagster-daemon (load {os.getloadavg()[0]:.2f}):")
    show_launched("the warm runner", sensor_rounds(watching, repeat))
    subprocess.run([*KB_ASSETS, "services", "down"], env=env, cwd=REPO, capture_output=True)  # the runner too
    show_launched("no runner (a run process of its own)", sensor_rounds({**watching, "KB_RUNNER_IDLE_SECONDS": "0"}, 1))

    print(f"launched as the UI's Materialize of the partition, from the request (load {os.getloadavg()[0]:.2f}):")
    timed(ingest, env)  # starts a runner again
    wait_for_runner(home / "kb")
    port = 3000 + os.getpid() % 1000
    web = background(
        [str(BIN / "dagster-webserver"), "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(port)],
        dagster_env,
        logs / "webserver.log",
    )
    daemon = background(daemon_args, dagster_env, logs / "daemon.log")  # no KB_WATCH: it dequeues the UI's runs
    try:
        wait_for_url(f"http://127.0.0.1:{port}/server_info")
        time.sleep(10)
        clicks = []
        for _ in range(repeat):
            edited()
            timed([sys.executable, "-c", REGISTER, str(corpus)], env)  # as a scan registers the edit
            since = time.time()
            launch_from_ui(port, key)
            _, done, ended = published(instance, key, since, dg.RunsFilter(job_name="__ASSET_JOB"))
            clicks.append((done - since, ended - since))
        show_launched("the warm runner", clicks)
    finally:
        stop(daemon)
        stop(web)


REGISTER = (
    "import sys; from kb_assets.launch.ingest import register; from kb_assets.launch.instance import "
    "dagster_instance; from kb_assets.settings import Settings; from kb_assets.stores import Stores; "
    "s = Settings.from_env(); register([sys.argv[1]], 'handbook', Stores(s), dagster_instance(s), s)"
)
DOCUMENT_ASSETS = ("raw_files", "parsed_pages", "pageindex_trees", "chunks", "embeddings", "milvus_collection")


def wait_for_url(url: str, timeout_s: float = 300) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            urllib.request.urlopen(url, timeout=5)
            return
        except OSError:
            if time.monotonic() > deadline:
                raise SystemExit(f"{url} did not answer") from None
            time.sleep(1)


def launch_from_ui(port: int, key: str) -> str:
    """What the UI sends for Materialize of one partition of the document assets; the run id."""
    query = (
        "mutation($p: ExecutionParams!) { launchPipelineExecution(executionParams: $p) { __typename "
        "... on LaunchRunSuccess { run { runId } } ... on PythonError { message } } }"
    )
    params = {
        "selector": {
            "repositoryLocationName": "kb_assets",
            "repositoryName": "__repository__",
            "pipelineName": "__ASSET_JOB",
            "assetSelection": [{"path": [name]} for name in DOCUMENT_ASSETS],
        },
        "mode": "default",
        "runConfigData": {},
        "executionMetadata": {"tags": [{"key": "dagster/partition", "value": key}]},
    }
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/graphql",
        json.dumps({"query": query, "variables": {"p": params}}).encode(),
        {"Content-Type": "application/json"},
    )
    answer = json.loads(urllib.request.urlopen(request, timeout=60).read())["data"]["launchPipelineExecution"]
    if answer["__typename"] != "LaunchRunSuccess":
        raise SystemExit(f"the UI's launch failed: {answer}")
    return answer["run"]["runId"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", action="store_true", help="leave the KB_HOME and its services")
    parser.add_argument("--skip-launched", action="store_true", help="the command line's figures only")
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
        if not args.skip_launched:
            launched(home, env, corpus, note, edited, ingest, args.repeat)
        print(f"load average after: {os.getloadavg()[0]:.2f}")
    finally:
        if not args.keep:
            subprocess.run([*KB_ASSETS, "services", "down"], env=env, cwd=REPO, capture_output=True)
            shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
