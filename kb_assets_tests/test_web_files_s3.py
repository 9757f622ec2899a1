"""A document's original file kept in an S3 object store (issue 34): its signed URL answers with the file,
streamed from S3 under its type and inline name, and a URL with a bad signature is 403."""

from __future__ import annotations

import os
from dataclasses import replace

from fastapi.testclient import TestClient

LOCAL = ("127.0.0.1", 50000)
BASE_URL = "http://localhost"  # a Host the service answers
ALL = {"Authorization": "Bearer all-key"}


def test_an_original_on_s3_is_streamed_with_its_type_and_name(kb_home, s3):
    from kb_assets.launch.ingest import ingest
    from kb_assets.service.api import create_app
    from kb_assets.settings import Settings

    settings = Settings.from_env({**os.environ, "KB_OBJECT_STORE_URL": f"s3://{s3.bucket}/web-files", **s3.env()})
    folder = kb_home / "web-s3"
    folder.mkdir(exist_ok=True)
    note = folder / "notes.md"
    note.write_text("# Notes\n\nOriginals kept on S3 open in the browser.\n", encoding="utf-8")
    assert not ingest([folder], "s3files", settings).failures
    app = create_app(replace(settings, api_keys="all-key=*", url_signing_secret="s3-secret"), heal=False)
    with TestClient(app, client=LOCAL, base_url=BASE_URL) as client:
        docs = client.get("/v1/knowledge-bases/s3files/documents", headers=ALL).json()["documents"]
        url = client.get(f"/v1/documents/{docs[0]['documentId']}/chunks", headers=ALL).json()["fileUrl"]
        original = client.get(url, follow_redirects=False)
        assert original.status_code == 200 and original.content == note.read_bytes()
        assert original.headers["content-type"] == "text/markdown; charset=utf-8"
        assert original.headers["content-disposition"].startswith('inline; filename="notes.md"')
        assert original.headers["content-security-policy"] == "sandbox"
        assert client.get(url.replace("&s=", "&s=0"), follow_redirects=False).status_code == 403
