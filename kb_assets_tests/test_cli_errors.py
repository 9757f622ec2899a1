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


@pytest.mark.parametrize(
    "args, kind, said",
    [
        (["search", "backups", "--kb", "handbok", "--json"], "unknown_knowledge_base", "no knowledge base 'handbok'"),
        (["docs", "--kb", "handbok", "--json"], "unknown_knowledge_base", "known ones are "),
        (["pages", "no-such-document.md", "--json"], "invalid_input", "no document 'no-such-document.md'"),
        (["search", "backups", "--kb", "bad name!", "--json"], "usage", "is not valid"),
    ],
)
def test_every_failure_with_json_prints_an_error_object_on_stdout(handbook, args, kind, said):
    import json

    from kb_assets.cli import main

    result = CliRunner().invoke(main, args)

    assert result.exit_code in (1, 2)
    error = json.loads(result.stdout.strip().splitlines()[0])["error"]
    assert error["kind"] == kind and said in error["message"]
    assert said in result.stderr  # the line a person reads, too


def test_an_overlapping_root_is_refused_with_an_error_object(handbook, corpus_dir):
    """A folder that holds a root of the knowledge base (the handbook's corpus) is refused, naming it."""
    import json

    from kb_assets.cli import main

    result = CliRunner().invoke(main, ["ingest", str(corpus_dir.parent), "--kb", "handbook", "--json"])

    assert result.exit_code == 1
    error = json.loads(result.stdout.strip().splitlines()[0])["error"]
    assert str(corpus_dir) in error["message"] and "Traceback" not in result.output


def test_a_key_given_twice_in_api_keys_is_refused_without_showing_it():
    from kb_assets.service.auth import parse_api_keys

    with pytest.raises(ValueError, match="entry 2 is given twice") as refused:
        parse_api_keys("secret-key-1=alpha;secret-key-1=beta")
    assert "secret-key-1" not in str(refused.value)
    assert parse_api_keys("k1=alpha;k2=beta") == {"k1": {"alpha"}, "k2": {"beta"}}
