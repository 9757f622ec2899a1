"""The bounded soak of issue 9 in its test-suite form (about 60 s): 4 clients, ingests adding, changing
and deleting documents, the Milvus Lite server killed once; zero 500s, every answer right or a marked
fallback, Milvus serving again by the end, and ``verify`` consistent at the end. Who restarts Milvus is a
race: the service's watchdog checks every 2 s, and an ingest that needs Milvus starts it too (under load
the ingest can win); ``test_service_health`` shows the service heals it alone."""

from __future__ import annotations

import pytest

from kb_assets_tests.soak import run_soak


@pytest.mark.slow
def test_soak_with_ingests_and_a_killed_milvus_has_no_errors_and_ends_consistent(kb_home, settings):
    report = run_soak(settings, kb_home, duration_s=60, max_requests=2000, kill_milvus_at_s=20, min_ingests=2)
    print(report.summary())
    assert report.requests >= 100, report.summary()
    assert not report.errors, report.errors[:5]
    assert report.milvus_killed_at_s is not None and report.milvus_back, report.summary()
    assert report.ingests >= 2, report.summary()
    assert report.verify is not None and report.verify.consistent, report.verify and report.verify.problems[:5]
