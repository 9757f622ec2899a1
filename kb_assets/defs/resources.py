"""Dagster's view of the stores: one resource, ``stores``, a configurable resource whose fields are the
settings runs read (those declared ``runs=True``, ``kb_assets/settings/declare.py``), derived from their
declarations: a setting added there is a field here, shown in the UI and the launchpad, with no edit here.

The resource is built from the same :class:`~kb_assets.settings.Settings` the command line, the service and
the sensors use, and gives a run the same :class:`kb_assets.stores.Stores`: ``Stores.shared`` of the
settings its fields hold, so an in-process run of ``kb-assets ingest`` gets the stores ingest built (one
path from settings to every client, ``kb_assets/stores/__init__.py``). Secrets set in the environment are
``dg.EnvVar`` fields, shown by variable name only. Assets and ops take it as
``stores: dg.ResourceParam[Stores]``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg
from pydantic import Field, create_model

from kb_assets.settings import Settings
from kb_assets.settings.declare import Leaf, build, leaves
from kb_assets.stores import Stores


def run_leaves(cls: type = Settings) -> list[Leaf]:
    """The settings runs read: the resource's fields."""
    return [leaf for leaf in leaves(cls) if leaf.runs]


def field_type(leaf: Leaf) -> Any:
    """The type of a setting's field on the resource: paths travel as strings."""
    base = str if leaf.base is Path else leaf.base
    return base | None if leaf.optional else base


class StoresResourceBase(dg.ConfigurableResource):
    """Postgres (source of record), objects, lake, Milvus and the encoder of kb-assets: the settings the
    runs use, from the environment (KB_*, AWS_*), shown here; secrets by variable name only."""

    @classmethod
    def settings_class(cls) -> type[Settings]:
        return Settings

    @classmethod
    def from_settings(cls, settings: Settings) -> StoresResourceBase:
        """The resource of ``settings``: a secret the environment set is its variable (``dg.EnvVar``)."""
        values: dict[str, Any] = {}
        for leaf in run_leaves(cls.settings_class()):
            value = leaf.of(settings)
            if leaf.declared.secret and leaf.variable in settings.secrets_from_env:
                value = dg.EnvVar(leaf.variable)
            values[leaf.name] = str(value) if isinstance(value, Path) else value
        return cls(**values)

    def as_settings(self) -> Settings:
        """The settings of these fields (what a run's ``Stores`` is built from); the others keep their
        defaults, since no run reads them. A value from the UI (or a secret's variable) is normalized as the
        environment reader normalizes it."""
        values: dict[tuple[str, ...], Any] = {}
        for leaf in run_leaves(self.settings_class()):
            value = getattr(self, leaf.name)
            if leaf.base is Path and value is not None:
                value = Path(value)
            if leaf.declared.convert is not None and value:
                value = leaf.declared.convert(value)
            values[leaf.path] = value
        settings: Settings = build(self.settings_class(), values)
        return settings

    def create_resource(self, context: dg.InitResourceContext) -> Stores:
        return Stores.shared(self.as_settings())


def stores_resource_class(cls: type[Settings] = Settings) -> type[StoresResourceBase]:
    """The resource class of a settings class: a field per setting runs read, named after its variable
    (``KB_MILVUS_ALIAS``: ``milvus_alias``), described by its declaration."""
    fields: dict[str, Any] = {
        leaf.name: (
            field_type(leaf),
            Field(
                description=f"{leaf.variable}: {leaf.declared.description}"
                if leaf.variable
                else leaf.declared.description
            ),
        )
        for leaf in run_leaves(cls)
    }
    resource: type[StoresResourceBase] = create_model(
        "StoresResource",
        __base__=StoresResourceBase,
        __module__=__name__,
        __doc__=StoresResourceBase.__doc__,
        **fields,
    )
    resource.settings_class = classmethod(lambda _: cls)  # type: ignore[method-assign,assignment]
    return resource


StoresResource = stores_resource_class()


def build_resources(settings: Settings) -> dict[str, StoresResourceBase]:
    return {"stores": StoresResource.from_settings(settings)}
