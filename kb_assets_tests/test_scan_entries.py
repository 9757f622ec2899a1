"""One unreadable entry never aborts a scan (issue 9, item 2): names that are not UTF-8, read errors,
symlinks that leave the folder or loop, FIFOs and sockets are each a failed entry with the reason, and
the other entries are scanned. Real files, real symlinks, a real FIFO and socket; no services."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from kb_assets.pipeline.identity import document_id_for
from kb_assets.pipeline.planning import scan

BAD_NAME = os.fsdecode(b"bad\xff\xfe.md")  # what Python makes of the bytes b"bad\xff\xfe.md"


@pytest.fixture
def docs(tmp_path) -> Path:
    folder = tmp_path / "docs"
    (folder / "sub").mkdir(parents=True)
    (folder / "good.md").write_text("# Good\n\nReadable.\n")
    (folder / "sub" / "inner.md").write_text("# Inner\n\nAlso readable.\n")
    return folder


def reasons(found) -> dict[str, str]:
    return {Path(f.source_uri).name: f.reason for f in found.failures}


def test_a_file_name_that_is_not_utf8_is_a_failed_entry_shown_escaped_and_the_rest_are_scanned(docs):
    (docs / BAD_NAME).write_text("# Bad name\n")
    (docs / os.fsdecode(b"dir\xff")).mkdir()
    (docs / os.fsdecode(b"dir\xff") / "x.md").write_text("# X\n")

    found = scan([docs], "kb")

    assert sorted(f.source_path for f in found.files) == ["good.md", "sub/inner.md"]
    shown = reasons(found)
    assert "bad\\xff\\xfe.md" in shown and "not valid UTF-8" in shown["bad\\xff\\xfe.md"]
    assert "dir\\xff" in shown and shown["dir\\xff"].startswith("folder name is not valid UTF-8")
    for failure in found.failures:
        failure.source_uri.encode("utf-8")  # printable, storable, JSON-able
        assert failure.document_id is None  # it has no name to make an id from


def test_a_read_error_is_a_failed_entry_with_the_reason(docs):
    """/proc/self/mem stats as a regular file and answers EIO to a read; named on its own (a symlink to it
    given as a path), it is read, fails with the reason, and the folder beside it is scanned."""
    link = docs.parent / "memory"
    link.symlink_to("/proc/self/mem")

    found = scan([docs, link], "kb")

    assert sorted(f.source_path for f in found.files) == ["good.md", "sub/inner.md"]
    (failure,) = found.failures
    assert failure.source_uri.endswith("/memory") and failure.reason.startswith("cannot read")
    assert "Input/output error" in failure.reason
    assert failure.document_id == document_id_for("kb", str(docs.parent.resolve()), "memory")  # named: not purged


def test_symlinks_inside_the_folder_are_followed_and_those_that_leave_it_are_refused(docs, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("# Secret\n")
    (docs / "alias.md").symlink_to(docs / "good.md")  # a file inside
    (docs / "linked").symlink_to(docs / "sub")  # a folder inside
    (docs / "escape.md").symlink_to(outside / "secret.md")  # a file outside
    (docs / "escape-dir").symlink_to(outside)  # a folder outside
    (docs / "mem").symlink_to("/proc/self/mem")  # outside: refused before any read

    found = scan([docs], "kb")

    assert sorted(f.source_path for f in found.files) == ["alias.md", "good.md", "linked/inner.md", "sub/inner.md"]
    alias = next(f for f in found.files if f.source_path == "alias.md")
    assert alias.uri == str(docs.resolve() / "alias.md")  # the link's own path is the source
    refused = reasons(found)
    assert set(refused) == {"escape.md", "escape-dir", "mem"}
    assert all("symlink leaves the ingested folder" in reason for reason in refused.values())
    assert "secret" not in " ".join(f.uri for f in found.files)


def test_symlink_loops_and_broken_symlinks_are_reported(docs):
    (docs / "self.md").symlink_to("self.md")  # ELOOP
    (docs / "sub" / "up").symlink_to(docs)  # a folder pointing to its own ancestor
    (docs / "gone.md").symlink_to(docs / "nothing-here.md")  # dangling

    found = scan([docs], "kb")

    assert sorted(f.source_path for f in found.files) == ["good.md", "sub/inner.md"]
    shown = reasons(found)
    assert shown["self.md"].startswith("symlink loop")
    assert shown["up"].startswith("symlink loop") and "a folder above it" in shown["up"]
    assert shown["gone.md"].startswith("broken symlink")


def test_fifos_and_sockets_are_reported_not_skipped_and_never_block(docs):
    os.mkfifo(docs / "pipe.md")  # opening it for reading would block
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        server.bind(str(docs / "sock"))
        found = scan([docs], "kb")
    finally:
        server.close()

    assert sorted(f.source_path for f in found.files) == ["good.md", "sub/inner.md"]
    shown = reasons(found)
    assert shown["pipe.md"] == "not a regular file (a FIFO (named pipe)): skipped"
    assert shown["sock"] == "not a regular file (a socket): skipped"


def test_a_missing_root_is_still_an_error(tmp_path):
    """A mistyped folder must not read as an emptied one (which would purge all its documents)."""
    with pytest.raises(FileNotFoundError, match="no such file or folder"):
        scan([tmp_path / "no-such-folder"], "kb")


@pytest.mark.slow
def test_ingest_and_the_sensor_report_unreadable_entries_publish_the_rest_and_still_purge(settings, catalog, tmp_path):
    import json
    from dataclasses import replace

    from kb_assets.defs.sensors import plan_watched_folders
    from kb_assets.launch.ingest import ingest
    from kb_assets.launch.instance import dagster_instance
    from kb_assets.stores import Stores

    folder = tmp_path / "mixed"
    folder.mkdir()
    (folder / "keep.md").write_text("# Keep\n\nThe cold tier keeps tapes for ten years.\n")
    (folder / "old.md").write_text("# Old\n\nThis note is deleted before the second ingest.\n")
    assert ingest([folder], "unreadable", settings).failures == []

    (folder / "old.md").unlink()
    (folder / BAD_NAME).write_text("# Bad name\n")
    os.mkfifo(folder / "pipe.md")
    (folder / "loop.md").symlink_to("loop.md")
    (tmp_path / "outside.md").write_text("# Outside\n")
    (folder / "escape.md").symlink_to(tmp_path / "outside.md")
    (folder / "new.md").write_text("# New\n\nArrived together with the unreadable entries.\n")

    report = json.loads(json.dumps(ingest([folder], "unreadable", settings).as_json()))

    assert report["documents"] == {"new": 1, "changed": 0, "unchanged": 1, "deleted": 1, "failed": 4}
    failures = {Path(f["sourceUri"]).name: f for f in report["failures"]}
    assert set(failures) == {"bad\\xff\\xfe.md", "pipe.md", "loop.md", "escape.md"}
    assert failures["bad\\xff\\xfe.md"]["documentId"] is None
    ids = {d.source_path: d.document_id for d in catalog.list_documents(["unreadable"])}
    assert failures["escape.md"]["documentId"] == document_id_for("unreadable", str(folder.resolve()), "escape.md")
    statuses = {d.source_path: d.status for d in catalog.list_documents(["unreadable"])}
    assert statuses == {"keep.md": "published", "new.md": "published", "old.md": "deleted"}

    # the sensor plans the same folder: the same entries are reported, and a deletion is still purged
    (folder / "keep.md").unlink()
    watching = replace(settings, watch=f"unreadable={folder}")
    plan = plan_watched_folders(watching, Stores(watching), dagster_instance(settings))
    assert {Path(f.source_uri).name for f in plan.failures} == set(failures)
    assert plan.deleted == [ids["keep.md"]] and plan.runs == []
    purge = plan.purge_request()  # the purge is a purge_documents run
    assert purge.run_config["ops"]["purge"]["config"]["document_ids"] == plan.deleted
