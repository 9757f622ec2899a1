"""What ``kb-assets serve`` offers people and agents besides the JSON API: the web page (``routes.py``,
``static/``), signed image URLs (``signing.py``) and the MCP tool ``kb_search`` (``mcp.py``)."""
