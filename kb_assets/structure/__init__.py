"""PageIndex trees, page summaries and keywords, tables of contents."""

# The version of the tree builder and the rule-based summarizer: bump it when a change of this package
# changes the trees, summaries or keywords it makes (kb_assets.pipeline.versions).
STRUCTURE_VERSION = "10"  # 3: metadata (structure/metadata.py), statement nodes; 4: quarter years; 5: legal forms;
# 6: filings' metadata rules (release headlines, January year ends, registrant tables)
# 7: a form quoted in a sentence, names in lower case first ("eBay"), "Our Company", a quarter dated otherwise
# 8: a filing's section nodes (structure/topics.py: notes, items, the cover's registered securities)
# 9: section nodes: no table of contents's items, no bare "equity" (diversity, equity and inclusion)
# 10: the issuer's other names in the metadata: tickers, short and former names, file number (structure/names.py)
