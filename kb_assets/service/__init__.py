"""The HTTP service of ``kb-assets serve``: the FastAPI app (``api.py``), who may call it (``auth.py``,
the Host check), what each route does for a caller (``handlers.py``), the web page (``routes.py``,
``static/``), the MCP tool (``mcp.py``), signed image URLs (``signing.py``) and error answers."""
