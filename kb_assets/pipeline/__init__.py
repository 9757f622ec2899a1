"""What runs behind the assets and the command line: document identity, scanning sources, planning runs,
pipeline versions, the steps the assets call, ingest and its runs, migration, verify, lineage."""
