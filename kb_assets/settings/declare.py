"""How a setting is declared: once, on its field.

A setting is a field of :class:`~kb_assets.settings.Settings` (or of one of its parts: ``ParseOptions``,
``SearchConfig``, ...) whose default is ``setting(default, "KB_VARIABLE", "what it means", ...)``: its
type is the field's annotation, and the declaration says the environment variable, the description,
whether it is a secret and whether runs read it. Everything else follows from the fields:

- the environment reader (``read_values``, behind ``Settings.from_env``): unset or empty means the default;
  a value is parsed by its type (``int``, ``float``, ``bool``, ``Path``, ``str``) or by ``read``, and
  refused with the variable named;
- the Dagster resource ``stores`` (``defs/resources.py``): one field per setting runs read (``runs``),
  secrets as ``dg.EnvVar`` (the UI shows their names only), so a launchpad shows and may change them;
- ``docs/configuration.md`` (``kb_assets.settings.reference``, held to the fields by a test).

A part (a frozen dataclass of settings) is a field declared with ``part(default, prefix=..., runs=...)``:
its settings' variables may start with ``{prefix}`` (the endpoints' ``KB_SUMMARIZER_URL``, ...), and
``runs`` given there holds for all of them. A field declared with neither is no setting (``versions``).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Iterator, Mapping
from dataclasses import MISSING, dataclass, field
from pathlib import Path
from typing import Any

SETTING, PART = "kb_assets.setting", "kb_assets.part"
TRUE, FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


@dataclass(frozen=True)
class Declared:
    """One setting, as its field declares it."""

    variable: str | None  # the environment variable ("{prefix}_URL" in a part); None: set only in the UI
    description: str
    secret: bool = False  # never shown: the UI gets the variable's name (dg.EnvVar), repr leaves it out
    runs: bool | None = None  # runs read it (a field of the stores resource); None: its part says, else no
    choices: tuple[str, ...] = ()  # an enumeration: the value lower-cased, one of these
    minimum: int | None = None  # the least whole number allowed
    fallback: tuple[str, ...] = ()  # variables read, in order, when ``variable`` is unset (AWS_DEFAULT_REGION)
    read: Callable[[Mapping[str, str], str], Any] | None = None  # (env, variable) -> value: a reader of its own
    convert: Callable[[Any], Any] | None = None  # normalizes a value read (or given in the UI)
    shown_default: str | None = None  # the default as the documentation says it, when not the field's


@dataclass(frozen=True)
class Part:
    prefix: str = ""
    runs: bool | None = None
    about: str = ""  # what the part is, before each of its settings' descriptions in the documentation


def setting(
    default: Any = MISSING,
    variable: str | None = None,
    description: str = "",
    *,
    secret: bool = False,
    runs: bool | None = None,
    choices: tuple[str, ...] = (),
    minimum: int | None = None,
    fallback: tuple[str, ...] = (),
    read: Callable[[Mapping[str, str], str], Any] | None = None,
    convert: Callable[[Any], Any] | None = None,
    shown_default: str | None = None,
) -> Any:
    """The field of one setting (see the module's docstring)."""
    if choices and default is not MISSING and default not in choices:
        raise ValueError(f"{variable}: the default {default!r} is not one of {choices}")
    declared = Declared(variable, description, secret, runs, choices, minimum, fallback, read, convert, shown_default)
    return field(default=default, repr=not secret, metadata={SETTING: declared})


def part(default: Any, *, prefix: str = "", runs: bool | None = None, about: str = "") -> Any:
    """The field of a part: a frozen dataclass whose own fields are settings."""
    return field(default=default, metadata={PART: Part(prefix, runs, about)})


@dataclass(frozen=True)
class Leaf:
    """A setting where it sits: its path of field names from the settings class, its declaration with
    the part's prefix applied, its type and its default."""

    path: tuple[str, ...]
    declared: Declared
    variable: str | None
    type: Any  # the annotation, resolved
    default: Any
    runs: bool
    about: str = ""  # its part's ``about``

    @property
    def name(self) -> str:
        """Its name as a field of the stores resource: the variable without ``KB_``, lower-cased (else its path)."""
        return (self.variable.removeprefix("KB_") if self.variable else "_".join(self.path)).lower()

    @property
    def base(self) -> type:
        """The type without ``| None``."""
        args = [a for a in typing.get_args(self.type) if a is not type(None)]
        return args[0] if isinstance(self.type, types.UnionType) and len(args) == 1 else self.type

    @property
    def optional(self) -> bool:
        return isinstance(self.type, types.UnionType) and type(None) in typing.get_args(self.type)

    def read(self, env: Mapping[str, str]) -> Any:
        """Its value in ``env``; its default when unset or empty."""
        d, name = self.declared, self.variable or ""
        if d.read is not None:
            return d.read(env, name)
        raw = next((env[n] for n in (name, *d.fallback) if n and env.get(n)), "")
        if not raw:
            return self.default
        value = self.parse(name, raw)
        return d.convert(value) if d.convert is not None else value

    def parse(self, name: str, raw: str) -> Any:
        kind, d = self.base, self.declared
        if d.choices:
            value = raw.strip().lower()
            if value not in d.choices:
                raise ValueError(f"{name}={raw!r}: expected one of {', '.join(d.choices)}")
            return value
        if kind is bool:
            value = raw.strip().lower()
            if value not in (*TRUE, *FALSE):
                raise ValueError(f"{name}={raw!r}: expected 1 or 0")
            return value in TRUE
        if kind is int:
            try:
                number = int(raw)
            except ValueError:
                raise ValueError(f"{name}={raw!r}: expected a whole number") from None
            if d.minimum is not None and number < d.minimum:
                raise ValueError(f"{name}={raw!r}: expected a whole number of at least {d.minimum}")
            return number
        if kind is float:
            try:
                return float(raw)
            except ValueError:
                raise ValueError(f"{name}={raw!r}: expected a number") from None
        if kind is Path:
            return Path(raw).expanduser().resolve()
        return raw

    def of(self, settings: Any) -> Any:
        """Its value in ``settings``."""
        for name in self.path:
            settings = getattr(settings, name)
        return settings


def leaves(
    cls: type,
    prefix: str = "",
    runs: bool | None = None,
    path: tuple[str, ...] = (),
    held: Any = None,
    about: str = "",
) -> Iterator[Leaf]:
    """The settings of a settings class and of its parts, in the order they are declared; a part's
    settings default to its field's default's values (``held``)."""
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        default = getattr(held, f.name) if held is not None else f.default
        if PART in f.metadata:
            within: Part = f.metadata[PART]
            inner = within.runs if within.runs is not None else runs
            yield from leaves(
                type(default), within.prefix or prefix, inner, (*path, f.name), default, within.about or about
            )
        elif SETTING in f.metadata:
            d: Declared = f.metadata[SETTING]
            variable = d.variable.replace("{prefix}", prefix) if d.variable else None
            reads = d.runs if d.runs is not None else bool(runs)
            yield Leaf((*path, f.name), d, variable, hints[f.name], default, reads, about)


def read_values(cls: type, env: Mapping[str, str]) -> dict[tuple[str, ...], Any]:
    """Every setting's value in ``env``, by path."""
    return {leaf.path: leaf.read(env) for leaf in leaves(cls)}


def build(cls: type, values: Mapping[tuple[str, ...], Any], base: Any = None) -> Any:
    """An instance of ``cls`` with ``values`` (by path) over ``base``'s (else the defaults)."""
    top = {path[0]: value for path, value in values.items() if len(path) == 1}
    for name in {path[0] for path in values if len(path) > 1}:
        inner = {path[1:]: value for path, value in values.items() if len(path) > 1 and path[0] == name}
        within = (
            getattr(base, name)
            if base is not None
            else next(f.default for f in dataclasses.fields(cls) if f.name == name)
        )
        top[name] = build(type(within), inner, within)
    return dataclasses.replace(base, **top) if base is not None else cls(**top)


def run_values(settings: Any) -> tuple[tuple[tuple[str, ...], Any], ...]:
    """What runs read of ``settings``: every setting declared ``runs``, with its value."""
    return tuple((leaf.path, leaf.of(settings)) for leaf in leaves(type(settings)) if leaf.runs)


def values_of(settings: Any) -> tuple[tuple[tuple[str, ...], Any], ...]:
    """Every setting of ``settings`` with its value, secrets included (which ``repr`` leaves out)."""
    return tuple((leaf.path, leaf.of(settings)) for leaf in leaves(type(settings)))


# readers of their own -----------------------------------------------------------------------------
def home_of(env: Mapping[str, str]) -> Path:
    """KB_HOME, absolute (default ``./.kb``)."""
    return Path(env.get("KB_HOME") or "./.kb").expanduser().resolve()


def under_home(folder: str) -> Callable[[Mapping[str, str], str], str]:
    """A store URL whose default is a folder under KB_HOME."""
    return lambda env, name: env.get(name) or str(home_of(env) / folder)


def shared_cores(env: Mapping[str, str], name: str) -> int:
    """A count of processes or threads a run may use (``name``); unset or 0: the cores, shared among
    KB_CONCURRENT_RUNS runs (so that concurrent runs do not oversubscribe the machine)."""
    from kb_assets.lib.machine import cores

    count = _whole(env, name, 0)
    if count < 0:
        raise ValueError(f"{name}={env[name]!r}: expected 0 (the cores, shared among runs) or more")
    return count or max(1, cores() // max(1, _whole(env, "KB_CONCURRENT_RUNS", 1)))  # below 1: refused by its reader


def _whole(env: Mapping[str, str], name: str, default: int) -> int:
    try:
        return int(env.get(name) or default)
    except ValueError:
        raise ValueError(f"{name}={env[name]!r}: expected a whole number") from None
