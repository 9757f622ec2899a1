#!/usr/bin/env python3
"""Reproduce the filings data folder from FinanceBench's public repository.

    python benchmarks/filings/fetch_filings.py DATA_DIR            # clone from GitHub
    python benchmarks/filings/fetch_filings.py DATA_DIR --git-dir /path/to/bare/repo

Writes DATA_DIR/pdfs/doc-NNN.pdf (neutral names) and DATA_DIR/filings.csv
(neutral -> original name, issuer, fiscal period, kind). DATA_DIR must be outside the
repository: the PDFs and filings.csv give the answers' sources away and are never
committed.

How the files are chosen (see heldout.select_filings): every pdfs/*.pdf of the public
repository at REPO_COMMIT, minus the held-out filings of shared/eval/heldout-filings.txt,
minus any file byte-identical to a held-out one (same git blob) or named like one, minus
extra byte-identical copies. The kept names, sorted, are numbered doc-001, doc-002, ...
The numbering is computed from the repository listing (`git ls-tree`, file names and blob
ids only), so it does not depend on which blobs a particular copy happens to hold.

Held-out files are never downloaded: the network path makes a blobless partial clone
(--filter=blob:none, --no-checkout) and then fetches only the chosen blobs with
`git cat-file`; a held-out path is never checked out or read.

NOTE: the network path (git clone from GitHub) could not be exercised where this was
written (no network); it was written carefully but is untested. The --git-dir path
(a local bare copy of the same repository) is the one that built the reference folder.
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
from heldout import guard, is_heldout, select_filings  # noqa: E402

REPO_URL = "https://github.com/patronus-ai/financebench.git"
# Commit the set was built from (HEAD of the public repository when the set was frozen).
REPO_COMMIT = "cc39aeb"


def git(git_dir: str, *args: str, binary: bool = False, check: bool = True):
    r = subprocess.run(["git", "--git-dir", git_dir, *args], capture_output=True, text=not binary, check=False)
    if check and r.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed: {r.stderr!r}")
    return r


def clone(dest: Path) -> str:
    """Blobless, checkout-free clone: trees and names only; blobs come on demand."""
    git_dir = dest / "financebench.git"
    if not git_dir.exists():
        subprocess.run(["git", "clone", "--bare", "--filter=blob:none", REPO_URL, str(git_dir)], check=True)
    return str(git_dir)


def listing(git_dir: str, rev: str) -> list[tuple[str, str]]:
    out = git(git_dir, "ls-tree", "-r", rev, "pdfs/").stdout.splitlines()
    tree = []
    for line in out:
        meta, path = line.split("\t", 1)
        if path.endswith(".pdf"):
            tree.append((path[len("pdfs/") : -len(".pdf")], meta.split()[2]))
    return tree


def described_names(git_dir: str, rev: str) -> set[str]:
    txt = git(git_dir, "show", f"{rev}:data/financebench_document_information.jsonl").stdout
    names = set()
    for line in txt.splitlines():
        if line.strip():
            name = json.loads(line)["doc_name"]  # metadata only, no question text
            if not is_heldout(name):
                names.add(name)
    return names


def neutral_map(git_dir: str, rev: str) -> list[tuple[str, str, str]]:
    """[(neutral name, original name, blob sha)] in doc-001.. order."""
    tree = listing(git_dir, rev)
    blobs = dict(tree)
    kept = select_filings(tree, described_names(git_dir, rev))
    return [(f"doc-{i:03d}", name, blobs[name]) for i, name in enumerate(kept, 1)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("data_dir")
    ap.add_argument(
        "--git-dir",
        help="local (bare) copy of the FinanceBench repository; default: blobless clone from GitHub into DATA_DIR",
    )
    ap.add_argument("--rev", default=REPO_COMMIT)
    ap.add_argument("--only", help="comma-separated neutral names to copy (default: all)")
    args = ap.parse_args()

    data = Path(args.data_dir).resolve()
    repo_root = HERE.parents[1]
    if data == repo_root or repo_root in data.parents:
        sys.exit(f"DATA_DIR {data} is inside the repository; choose a folder outside it")
    (data / "pdfs").mkdir(parents=True, exist_ok=True)
    git_dir = args.git_dir or clone(data)
    rev = args.rev
    if git(git_dir, "rev-parse", "--verify", f"{rev}^{{commit}}", check=False).returncode:
        print(f"warning: {rev} not in {git_dir}; using HEAD", file=sys.stderr)
        rev = "HEAD"

    mapping = neutral_map(git_dir, rev)
    only = set(args.only.split(",")) if args.only else None
    truth = {}
    tpath = HERE / "truth.jsonl"
    if tpath.exists():
        for line in tpath.read_text().splitlines():
            if line.strip():
                rec = json.loads(line)
                truth[rec["doc"]] = rec

    copied = missing = 0
    rows = []
    for neutral, name, sha in mapping:
        guard(name)
        target = data / "pdfs" / f"{neutral}.pdf"
        present = target.exists() and target.stat().st_size > 0
        if not present and (only is None or neutral in only):
            # In a blobless clone, cat-file fetches this one blob from the remote.
            r = git(git_dir, "cat-file", "blob", sha, binary=True, check=False)
            if r.returncode == 0 and r.stdout[:5] == b"%PDF-":
                target.write_bytes(r.stdout)
                present = True
                copied += 1
            else:
                missing += 1
        t = truth.get(neutral, {})
        rows.append(
            {
                "neutral": f"{neutral}.pdf",
                "original": f"{name}.pdf",
                "issuer": t.get("issuer", ""),
                "fiscal_period": t.get("fiscal_period", ""),
                "period_end": t.get("period_end", ""),
                "kind": t.get("kind", ""),
                "present": int(present),
                "blob": sha,
            }
        )
    with open(data / "filings.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    have = sum(r["present"] for r in rows)
    print(
        f"{len(rows)} usable filings; {have} PDFs present in {data / 'pdfs'} "
        f"({copied} copied now, {missing} unavailable from {git_dir}); "
        f"wrote {data / 'filings.csv'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
