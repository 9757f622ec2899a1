"""Where the events of a run launched by ``kb-assets`` go besides the instance (which the UI reads): a log
file, ``run_file``, so that a failed document is one line on the terminal, not Dagster's event stream and
its tracebacks. Runs launched from the UI or by the daemon keep Dagster's console logger."""

from __future__ import annotations

import logging
from logging.handlers import RotatingFileHandler
from pathlib import Path

import dagster as dg

MAX_BYTES = 10 * 1024 * 1024  # a log file rotates at this size, keeping BACKUPS older ones
BACKUPS = 3
_HANDLERS: dict[str, RotatingFileHandler] = {}  # one handler a file and process: runs append to it
PARENT = "kb_assets.runs"  # the parent of every run's logger: no handler and no propagation unless --debug
logging.getLogger(PARENT).propagate = False


@dg.logger(
    config_schema={
        "path": dg.Field(str, description="the log file (its folder is made)"),
        "log_level": dg.Field(str, is_required=False, default_value="INFO"),
    },
    description="Appends the run's events (with their tracebacks) to a file, rotated at 10 MB.",
)
def run_file_logger(init_context: dg.InitLoggerContext) -> logging.Logger:
    path = Path(init_context.logger_config["path"])
    if str(path) not in _HANDLERS:
        path.parent.mkdir(parents=True, exist_ok=True)
        handler = RotatingFileHandler(path, maxBytes=MAX_BYTES, backupCount=BACKUPS, encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        _HANDLERS[str(path)] = handler
    log = logging.getLogger(f"{PARENT}.{len(_HANDLERS)}")
    log.setLevel(init_context.logger_config["log_level"])
    log.handlers = [_HANDLERS[str(path)]]
    log.propagate = True  # to PARENT, which echoes to the terminal only under `kb-assets --debug`
    return log
