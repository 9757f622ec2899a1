"""Libraries the retrieval service's process never loads, although other parts of kb-assets need them.

pymilvus imports pandas for its ORM, and pandas imports pyarrow whenever it is installed (the pipeline
has it, for great-expectations): 59 MB of libraries resident in a service that never calls them (it
reads the lake with polars, which needs no pyarrow). ``refuse`` makes such a library look uninstalled
to this process, which pandas and polars both handle as they do a missing optional dependency.
Importing one of them by name still fails loudly, naming the reason.
"""

from __future__ import annotations

import importlib.abc
import sys

NOT_IN_THE_SERVICE = ("pyarrow",)


class Refused(importlib.abc.MetaPathFinder):
    """An import finder that reports ``modules`` (and their submodules) as not installed."""

    def __init__(self, modules: tuple[str, ...]):
        self.modules = modules

    def find_spec(self, name, path=None, target=None):
        if name.split(".", 1)[0] in self.modules:
            raise ModuleNotFoundError(
                f"{name} is not loaded in the kb-assets retrieval service (kb_assets/service/lean.py)", name=name
            )
        return None


def refuse(modules: tuple[str, ...] = NOT_IN_THE_SERVICE) -> None:
    """Keep ``modules`` out of this process from now on. One already loaded (the command runs inside
    another program, a test's for instance) stays usable: there is nothing left to save."""
    modules = tuple(m for m in modules if m not in sys.modules)
    if modules and not any(isinstance(finder, Refused) for finder in sys.meta_path):
        sys.meta_path.insert(0, Refused(modules))
