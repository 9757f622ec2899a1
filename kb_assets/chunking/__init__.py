"""Content-aware chunks of a document's pages (chunker.py; one chunker a block kind under kinds/)."""

# The chunker's version: bump it when a change of this package changes the chunks it makes. Chunks
# made by another version are stale: the next ingest re-chunks them (kb_assets.pipeline.versions).
CHUNKER_VERSION = "1"
