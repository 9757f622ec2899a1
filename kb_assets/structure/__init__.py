"""PageIndex trees, page summaries and keywords, tables of contents."""

# The version of the tree builder and the rule-based summarizer: bump it when a change of this package
# changes the trees, summaries or keywords it makes (kb_assets.pipeline.versions).
STRUCTURE_VERSION = "4"  # 3: document metadata (structure/metadata.py), statement nodes; 4: quarterly fiscal years
