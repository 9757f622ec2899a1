"""Expected failures on the command line are one line naming the cause and what to do, with a non-zero
exit: an unknown knowledge base or document (a typo is not an empty answer)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

pytestmark = pytest.mark.services


@pytest.mark.parametrize(
    "args, said",
    [
        (["search", "How long are backups kept?", "--kb", "handbok"], "no knowledge base 'handbok'"),
        (["docs", "--kb", "nosuch"], "no knowledge base 'nosuch'"),
        (["pages", "no-such-document.md"], "no document 'no-such-document.md'"),
    ],
)
def test_an_unknown_knowledge_base_or_document_is_one_line_and_exit_1(handbook, args, said):
    from kb_assets.cli import main

    result = CliRunner().invoke(main, args)

    assert result.exit_code == 1
    (line,) = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert said in line
    if "knowledge base" in said:
        assert "handbook" in line  # it names the knowledge bases that exist
    assert "Traceback" not in result.output
