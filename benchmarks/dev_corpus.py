"""Fetch the development corpus (real Debian manuals) and ingest it as the eval set expects.

    .venv/bin/python benchmarks/dev_corpus.py [--home .kb-bench] [--cache ~/.cache/kb-assets/dev-corpus]

Knowledge bases: r-manuals (R-data, R-admin, R-lang), debian-en (debian-reference.en.pdf), edu-zh
(the Chinese Debian Edu manual). The files are downloaded with apt (never committed). Prints the
ingest figures; then score with `kb-assets eval ../shared/eval/dev_questions.jsonl --baseline`.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FETCH = REPO.parent / "shared" / "eval" / "fetch-corpus.sh"
KNOWLEDGE_BASES = {
    "r-manuals": [
        "usr/share/R/doc/manual/R-data.pdf",
        "usr/share/R/doc/manual/R-admin.pdf",
        "usr/share/R/doc/manual/R-lang.pdf",
    ],
    "debian-en": ["usr/share/debian-reference/debian-reference.en.pdf"],
    "edu-zh": ["usr/share/doc/debian-edu-doc-zh-cn/debian-edu-bookworm-manual.pdf"],
}


def fetch(cache: Path) -> None:
    wanted = [cache / f for files in KNOWLEDGE_BASES.values() for f in files]
    if all(p.exists() for p in wanted):
        return
    cache.mkdir(parents=True, exist_ok=True)
    subprocess.run(["bash", str(FETCH), str(cache)], check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--home", default=str(REPO / ".kb-bench"))
    parser.add_argument("--cache", default=str(Path.home() / ".cache" / "kb-assets" / "dev-corpus"))
    args = parser.parse_args()
    cache = Path(args.cache).expanduser()
    fetch(cache)
    os.environ["KB_HOME"] = str(Path(args.home).resolve())
    os.environ.pop("DAGSTER_HOME", None)

    from kb_assets.launch.ingest import ingest
    from kb_assets.settings import Settings

    settings = Settings.from_env()
    for kb, files in KNOWLEDGE_BASES.items():
        started = time.perf_counter()
        report = ingest([cache / f for f in files], kb, settings, progress=print)
        counts = report.as_json()["documents"]
        print(f"{kb}: {counts} in {time.perf_counter() - started:.1f} s; failures: {report.failures}")


if __name__ == "__main__":
    main()
