"""What a pipeline version bump costs on the dev corpus, against a full ingest.

    .venv/bin/python benchmarks/version_bumps.py --cache ~/.cache/kb-assets/dev-corpus --home DIR [--kb r-manuals]

Ingests the dev corpus (``dev_corpus.py``'s knowledge bases) into a fresh ``--home``, then bumps the
chunker version (the chunker's output is unchanged: goal < 10% of the full ingest, no parse, no encode)
and then the summarizer/tree-builder version (no parse; no chunk or vector rewritten when the chunks come
out the same). Prints each phase's time, the steps its runs started at and the chunks it re-encoded.
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import replace
from pathlib import Path

from dev_corpus import KNOWLEDGE_BASES, fetch


def phase(name: str, settings, cache: Path, kbs: list[str], baseline: float | None = None) -> float:

    from kb_assets.launch.ingest import ingest
    from kb_assets.launch.instance import dagster_instance

    started, run_ids = time.perf_counter(), []
    for kb in kbs:
        report = ingest([cache / f for f in KNOWLEDGE_BASES[kb]], kb, settings)
        run_ids += report.run_ids
        if report.failures:
            print(f"  {kb} failures: {report.failures}")
    seconds = time.perf_counter() - started
    instance = dagster_instance(settings)
    starts, encoded, written = set(), 0, 0
    for run_id in run_ids:
        run = instance.get_run_by_id(run_id)
        starts.add(run.tags.get("kb/from_step", "?"))
        for record in instance.get_records_for_run(run_id).records:
            event = record.event_log_entry.dagster_event
            if event and event.is_step_materialization:
                metadata = event.event_specific_data.materialization.metadata
                if event.asset_key.to_user_string() == "embeddings" and "embedded" in metadata:
                    encoded += metadata["embedded"].value
                if event.asset_key.to_user_string() == "milvus_collection" and "entities_written" in metadata:
                    written += metadata["entities_written"].value
    share = f" ({100 * seconds / baseline:.1f}% of the full ingest)" if baseline else ""
    print(
        f"{name}: {seconds:.1f} s{share}; {len(run_ids)} runs from {sorted(starts) or 'none'}; "
        f"{encoded} chunks encoded, {written} entities written"
    )
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--home", required=True)
    parser.add_argument("--cache", default=str(Path.home() / ".cache" / "kb-assets" / "dev-corpus"))
    parser.add_argument("--kb", action="append", choices=sorted(KNOWLEDGE_BASES), help="default: all")
    args = parser.parse_args()
    cache = Path(args.cache).expanduser()
    fetch(cache)
    os.environ["KB_HOME"] = str(Path(args.home).resolve())
    os.environ.pop("DAGSTER_HOME", None)

    from kb_assets.pipeline.versions import step_versions
    from kb_assets.settings import Settings

    settings = Settings.from_env()
    kbs = args.kb or list(KNOWLEDGE_BASES)
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    full = phase("full ingest", settings, cache, kbs)
    current = step_versions(settings)
    chunker = replace(settings, versions=replace(settings.versions, chunks=current["chunks"] + "-bench"))
    phase("chunker version bump", chunker, cache, kbs, full)
    summarizer = replace(chunker, versions=replace(chunker.versions, structure=current["pageindex_trees"] + "-bench"))
    phase("summarizer version bump", summarizer, cache, kbs, full)
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
