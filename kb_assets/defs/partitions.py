"""One dynamic partition per source document (key: the stable document id)."""

import dagster as dg

documents_partitions = dg.DynamicPartitionsDefinition(name="documents")
