"""Run ranges: the stale partitions cut into ranges of the partitions' order, each one Dagster run
(``dagster/asset_partition_range_start`` / ``_end``)."""

from __future__ import annotations

from collections.abc import Sequence


def contiguous_ranges(ordered_keys: Sequence[str], selected: set[str], max_size: int) -> list[tuple[str, str, int]]:
    """Runs of selected keys that are adjacent in partition order, cut at max_size: (start, end, count)."""
    ranges: list[tuple[str, str, int]] = []
    current: list[str] = []
    for key in ordered_keys:
        if key in selected and len(current) < max_size:
            current.append(key)
            continue
        if current:
            ranges.append((current[0], current[-1], len(current)))
        current = [key] if key in selected else []
    if current:
        ranges.append((current[0], current[-1], len(current)))
    return ranges


def spanning_ranges(
    ordered_keys: Sequence[str],
    selected: set[str],
    max_size: int,
    weights: dict[str, int] | None = None,
    max_weight: int | None = None,
) -> list[tuple[str, str, int]]:
    """Ranges from one selected key to another in partition order, at most ``max_size`` selected keys each
    and, with ``weights``, at most ``max_weight`` of their weight (a key heavier than that: a range of its
    own), passing over the keys between them: (start, end, selected keys in it)."""
    parts: list[list[str]] = []
    weight = 0
    for key in (key for key in ordered_keys if key in selected):
        own = (weights or {}).get(key, 0)
        if not parts or len(parts[-1]) == max_size or (max_weight is not None and weight + own > max_weight):
            parts.append([])
            weight = 0
        parts[-1].append(key)
        weight += own
    return [(part[0], part[-1], len(part)) for part in parts]
