"""``python -m kb_assets.cli``: the kb-assets command."""

from kb_assets.cli import main

main()
