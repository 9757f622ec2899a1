"""What a script reads after the sample corpus and one broken file are ingested: the exit status (a known
quarantined file is one line, not a failure, unless ``--strict``).

One knowledge base for the module: the tests run in order, each leaving it as the next expects."""

from __future__ import annotations

import shutil

import pytest
from click.testing import CliRunner

pytestmark = pytest.mark.services

KB = "operator"


@pytest.fixture(scope="module")
def folder(tmp_path_factory, corpus_dir):
    target = tmp_path_factory.mktemp("operator") / "corpus"
    shutil.copytree(corpus_dir, target)
    (target / "broken.pdf").write_bytes(b"%PDF-1.4 this is not really a pdf")
    return target


def ingest(folder, *options):
    from kb_assets.cli import main

    return CliRunner().invoke(main, ["ingest", str(folder), "--kb", KB, *options])


def lines_naming(result, name: str) -> list[str]:
    return [line for line in result.stderr.splitlines() if name in line]


def test_the_first_ingest_exits_1_naming_the_broken_file(folder, settings):
    result = ingest(folder)

    assert result.exit_code == 1, result.output
    (line,) = lines_naming(result, "broken.pdf")
    assert line.startswith(f"FAILED {folder / 'broken.pdf'}: ")
    assert "ingested into operator: 8 new, 0 changed, 0 unchanged, 0 deleted, 1 failed" in result.stdout


def test_a_quarantined_file_that_has_not_changed_is_one_line_and_exit_0(folder):
    result = ingest(folder)

    assert result.exit_code == 0, result.output
    (line,) = lines_naming(result, "broken.pdf")
    assert line.startswith(f"QUARANTINED {folder / 'broken.pdf'}: ") and "--retry-failed" in line
    assert "Traceback" not in result.output


def test_strict_fails_on_a_quarantined_file(folder):
    result = ingest(folder, "--strict")

    assert result.exit_code == 1
    assert lines_naming(result, "broken.pdf")[0].startswith("QUARANTINED ")


def test_the_exit_statuses_are_in_the_help():
    from kb_assets.cli import main

    shown = CliRunner().invoke(main, ["ingest", "-h"]).output

    for line in ("0  nothing failed in this run", "1  a document failed in this run", "2  a usage error", "3  a store"):
        assert line in shown


def test_a_changed_file_that_fails_exits_1(folder):
    (folder / "broken.pdf").write_bytes(b"%PDF-1.4 still not a pdf, but another one")

    result = ingest(folder)

    assert result.exit_code == 1
    (line,) = lines_naming(result, "broken.pdf")
    assert line.startswith("FAILED ")
