"""Expected failures of a command, said in one line: which store or input failed, and what to do.

The command line's group catches these (``KbAssetsGroup``): a person reads one line on stderr (with
``--json`` also ``{"error": {...}}`` on stdout) and the exit status says what kind of failure it was;
``--debug`` shows the traceback. Bad input and usage errors (click's) get the same JSON object with
``--json``. Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import json
import traceback
from dataclasses import dataclass
from typing import Any

import click

from kb_assets.lib.json_types import JsonObject

EXIT_OK = 0
EXIT_FAILED = 1  # a command's own failure (a document failed in this run, bad input)
EXIT_USAGE = 2  # click's usage errors (an unknown option, a missing argument)
EXIT_UNAVAILABLE = 3  # a store (Postgres, Milvus, S3) cannot be reached or refuses the credentials


@dataclass
class Explained:
    kind: str
    message: str
    exit_code: int = EXIT_UNAVAILABLE

    def as_json(self) -> JsonObject:
        return {"error": {"kind": self.kind, "message": self.message}}


def explain(error: BaseException) -> Explained | None:
    """One line for an expected failure (None: not one we know)."""
    # a failure the warm ingest runner met is explained as if it were raised here (``launch/runner.py``)
    name = getattr(error, "name", None) if type(error).__name__ == "RunnerError" else type(error).__name__
    module = getattr(error, "module", None) if type(error).__name__ == "RunnerError" else type(error).__module__
    name, module = name or type(error).__name__, module or ""
    first = (str(error).strip().splitlines() or [name])[0][:300]
    if module.startswith("psycopg2") and name in ("OperationalError", "InterfaceError"):
        state = "is shutting down" if "shutting down" in first else "is unreachable"
        return Explained(
            "postgres_unavailable",
            f"Postgres {state} ({first}): start the embedded one with `kb-assets services up`, "
            "or check KB_POSTGRES_URL",
        )
    if module.startswith("pymilvus") or name in ("MilvusException", "MilvusUnavailableException"):
        return Explained(
            "milvus_unavailable",
            f"Milvus is unreachable or failed ({first}): start the embedded one "
            "with `kb-assets services up`, or check KB_MILVUS_URI",
        )
    if name in ("NoCredentialsError", "PartialCredentialsError"):
        return Explained(
            "s3_credentials",
            "S3 credentials are missing: set AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY (and AWS_ENDPOINT_URL for a server other than AWS)",
        )
    if name == "ClientError" and any(
        code in str(error) for code in ("AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch")
    ):
        return Explained(
            "s3_credentials", f"S3 refused the credentials ({first}): check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
        )
    if isinstance(error, (ConnectionError, TimeoutError)) or name in ("ConnectionRefusedError", "TimeoutError"):
        return Explained(
            "service_unavailable",
            f"a store is unreachable ({first}): check that Postgres, Milvus and "
            "the object store answer (`kb-assets services status`)",
        )
    return None


class KbAssetsGroup(click.Group):
    """The ``kb-assets`` group: expected failures as one line (``--debug``: with the traceback)."""

    def invoke(self, ctx: click.Context) -> Any:
        as_json = "--json" in [*ctx._protected_args, *ctx.args]  # the command's own arguments
        try:
            return super().invoke(ctx)
        except click.ClickException as error:  # bad input or usage: click prints the line; --json gets it too
            if as_json:
                kind = "usage" if isinstance(error, click.UsageError) else getattr(error, "kind", "invalid_input")
                click.echo(json.dumps({"error": {"kind": kind, "message": error.format_message()}}))
            raise
        except (click.exceptions.Exit, click.exceptions.Abort, SystemExit, KeyboardInterrupt):
            raise
        except Exception as error:
            explained = explain(error)
            if explained is None:
                raise
            if ctx.meta.get("kb_debug"):
                traceback.print_exc()
            if as_json:
                click.echo(json.dumps(explained.as_json()))
            click.echo(f"Error: {explained.message}", err=True)
            ctx.exit(explained.exit_code)
