"""The Dagster UI (a real ``dagster-webserver`` on the workspace, headless Chromium) after a run in which one
document of several was refused as bad input: the run is a success, the step that refused it says so in its
log; the refusal is a failed run of its own that names the step, the document and the reason without a stack
trace; the asset list shows that partition failed at the refusing asset only. Writes the README's
``docs/dagster-*.png``. An instance of its own, so that the pages show this corpus alone."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import replace
from pathlib import Path

import dagster as dg
import pytest

from kb_assets_tests.browser import chromium, save_screenshot, wait

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[1]
FILES = ("architecture.md", "runbook.html", "service-catalog.csv")  # three formats of the sample that parse fast


@pytest.fixture(scope="module")
def refused(tmp_path_factory, settings, corpus_dir):
    """Three files of the sample corpus and a broken PDF, ingested into an instance of their own: its
    settings, the batch run's id and the refusal run's."""
    from kb_assets.launch.ingest import ingest
    from kb_assets.launch.instance import dagster_instance

    root = tmp_path_factory.mktemp("dagster-ui")
    ui = replace(settings, dagster_home_dir=root / "dagster")
    folder = root / "corpus"
    folder.mkdir()
    for name in FILES:
        shutil.copy(corpus_dir / name, folder / name)
    (folder / "broken.pdf").write_bytes(b"%PDF-1.4 this is not really a pdf")
    (run_id,) = ingest([folder], "ui", ui).run_ids
    (refusal,) = dagster_instance(ui).get_runs(dg.RunsFilter(tags={"kb/refused_in": run_id}))
    return ui, run_id, refusal.run_id


@pytest.fixture(scope="module")
def webserver(refused, tmp_path_factory):
    """``dagster-webserver -w workspace.yaml`` (what ``make dev`` serves) on that instance."""
    from kb_assets.settings import dagster_child_environment

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**dagster_child_environment(refused[0]), "KB_RUNNER_IDLE_SECONDS": "0", "DAGSTER_DISABLE_TELEMETRY": "1"}
    log = open(tmp_path_factory.mktemp("webserver") / "webserver.log", "wb")  # noqa: SIM115 (closed below)
    server = subprocess.Popen(
        [str(Path(sys.executable).with_name("dagster-webserver")), "-w", "workspace.yaml", "-h", "127.0.0.1"]
        + ["-p", str(port)],
        cwd=REPO,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while True:
        try:
            urllib.request.urlopen(url + "/server_info", timeout=5)
            break
        except OSError:
            assert server.poll() is None and time.monotonic() < deadline, "dagster-webserver did not start"
            time.sleep(1)
    try:
        yield url
    finally:
        os.killpg(server.pid, signal.SIGINT)  # it ignores SIGTERM when started in the background
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        log.close()


def show(browser, url: str, text: str) -> str:
    """Open a page of the UI, past the first visit's newsletter dialog, once ``text`` shows; its source."""
    from selenium.webdriver.common.by import By

    browser.get(url)
    wait(browser, lambda d: text in d.page_source)
    deadline = time.monotonic() + 5  # the dialog comes a moment after the page, on a first visit
    while time.monotonic() < deadline:
        for skip in browser.find_elements(By.XPATH, "//button[normalize-space()='Skip']"):
            skip.click()
            deadline = 0
        time.sleep(0.2)
    time.sleep(2)  # the graph and the counts settle
    return browser.page_source


def test_a_refused_document_shows_at_the_refusing_step_without_a_stack_trace(refused, webserver, tmp_path):
    _, run_id, refusal_id = refused
    with chromium(tmp_path, window="1280,1000") as browser:
        page = show(browser, f"{webserver}/runs/{refusal_id}", "refused broken.pdf")
        assert "Failure" in page and "parsed_pages refused broken.pdf" in page and "not a valid PDF" in page
        assert "Stack Trace" not in page and "Traceback" not in page
        save_screenshot(browser, "dagster-refusal-run.png")

        page = show(browser, f"{webserver}/runs/{run_id}?logs=refused", "recorded failed in run")  # its log, filtered
        assert "Success" in page and "parsed_pages" in page and "Stack Trace" not in page
        save_screenshot(browser, "dagster-batch-run.png")

        show(browser, f"{webserver}/locations/kb_assets/asset-groups/knowledge_base/list", "parsed_pages")
        save_screenshot(browser, "dagster-assets.png")
    # what that list shows, from the UI's own GraphQL: failed at the refusing asset, nowhere after it
    stats = partition_stats(webserver)
    assert stats["raw_files"] == (4, 0) and stats["parsed_pages"] == (3, 1)
    for later in ("pageindex_trees", "chunks", "embeddings", "milvus_collection", "page_images"):
        assert stats[later] == (3, 0), later


def partition_stats(url: str) -> dict[str, tuple[int, int]]:
    """Materialized and failed partitions of each document asset, as the asset list reads them."""
    query = "{ assetNodes { assetKey { path } partitionStats { numMaterialized numFailed } } }"
    request = urllib.request.Request(
        url + "/graphql", json.dumps({"query": query}).encode(), {"Content-Type": "application/json"}
    )
    nodes = json.loads(urllib.request.urlopen(request, timeout=60).read())["data"]["assetNodes"]
    return {
        "/".join(n["assetKey"]["path"]): (n["partitionStats"]["numMaterialized"], n["partitionStats"]["numFailed"])
        for n in nodes
        if n["partitionStats"]
    }
