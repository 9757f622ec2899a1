"""Rows by column: a ``pages`` row and a ``pageindex_nodes`` row as Postgres stores them (``sql/schema.sql``)
and the stages read and extend them (a page's summary and ``is_toc``, a node's summary). Mappings by column
name, declared once here for the catalog (``stores/catalog``) and the stages (``structure/``, ``chunking/``);
typed records once the retrieval code that reads them too (the search-speed issue's) has landed."""

from typing import Any

PageRow = dict[str, Any]  # document_id, version, page_index, page_label, text, blocks, summary, keywords, parser, ...
NodeRow = dict[str, Any]  # node_id, parent_id, ordinal, title, depth, start_page, end_page, summary, keywords, ...
