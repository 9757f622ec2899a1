"""JSON that passes through as it is: an API answer's body, a command's ``--json`` output, a report kept as
a Dagster run's metadata. Named, so that a free-form mapping is a choice one can find (typed values turn
into it at the edge, with ``as_json``), not a value passed between steps."""

from typing import Any

JsonObject = dict[str, Any]
