"""Data-quality expectations (great-expectations) over the rows an asset wrote for a batch of documents.

A failing expectation names the documents whose rows broke it, so the asset can quarantine just those
documents (mark them failed, take their rows out) and let the others go on.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import polars as pl


@dataclass(frozen=True)
class Violation:
    expectation: str
    column: str | None
    document_ids: tuple[str, ...]

    def reason(self) -> str:
        where = f" on column {self.column}" if self.column else ""
        return f"data-quality check failed: {self.expectation}{where}"


@lru_cache(maxsize=1)
def _batch_definition():
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    source = context.data_sources.add_pandas("kb_assets")
    return source.add_dataframe_asset("rows").add_batch_definition_whole_dataframe("all_rows")


def warm_up() -> None:
    """Import great-expectations and make its context now (a warm ingest runner does, once)."""
    _batch_definition()


def validate(frame: pl.DataFrame, expectations: list) -> list[Violation]:
    """Run expectations on a frame that has a ``document_id`` column; return what failed, by document."""
    import great_expectations as gx

    if frame.is_empty():
        return []
    pandas_frame = frame.to_pandas()
    batch = _batch_definition().get_batch(batch_parameters={"dataframe": pandas_frame})
    suite = gx.ExpectationSuite(name="kb_assets_rows", expectations=expectations)
    result = batch.validate(suite, result_format={"result_format": "COMPLETE"})
    violations = []
    for item in result.results:
        if item.success:
            continue
        config = item.expectation_config
        indexes = item.result.get("unexpected_index_list") or []
        if indexes and isinstance(indexes[0], dict):  # pandas results may carry index dicts
            indexes = [next(iter(i.values())) for i in indexes]
        document_ids = (
            sorted(set(pandas_frame.loc[indexes, "document_id"]))
            if indexes
            else sorted(set(pandas_frame["document_id"]))
        )
        violations.append(Violation(config.type, config.kwargs.get("column"), tuple(document_ids)))
    return violations


def failed_documents(violations: list[Violation]) -> dict[str, str]:
    """document id -> the first reason it failed."""
    reasons: dict[str, str] = {}
    for violation in violations:
        for document_id in violation.document_ids:
            reasons.setdefault(document_id, violation.reason())
    return reasons
