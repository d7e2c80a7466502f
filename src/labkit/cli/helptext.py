"""`labkit --help` and click's own words (usage errors, "Usage:") in the chosen language.

The English help is the code's (docstrings and `help=`); the Spanish lives in
`help.es.toml` beside this module, by command path. click itself words its usage errors
and help headings through `gettext` with no Spanish of its own, so for Spanish each of
its modules gets a `gettext` that looks the English up in that file's `[click]` table
(anything missing stays as click wrote it, so a newer click can only fall back to
English, never break). `use(root, lang)` sets both before a command line is parsed.
"""

from __future__ import annotations

import importlib
import tomllib
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import click

# click's modules that word what a user reads; each binds gettext's functions by name
_CLICK_MODULES = ("core", "exceptions", "formatting", "parser", "types", "decorators")
_state = {"lang": "en"}


@cache
def _spanish() -> dict[str, dict[str, str]]:
    with open(Path(__file__).with_name("help.es.toml"), "rb") as handle:
        return tomllib.load(handle)


def _gettext(message: str) -> str:
    if _state["lang"] == "es":
        return _spanish()["click"].get(message, message)
    return message


def _ngettext(singular: str, plural: str, count: int) -> str:
    return _gettext(singular if count == 1 else plural)


def _metavar(english: str | None, lang: str) -> str | None:
    """A usage line's placeholder in `lang` (the `[metavars]` table of help.es.toml)."""
    if lang != "es" or english is None:
        return english
    return _spanish()["metavars"].get(english, english)


def commands(root: click.Command) -> Iterator[tuple[str, click.Command]]:
    """Every command under `root` (itself first), by path without the program name."""
    stack: list[tuple[str, click.Command]] = [("", root)]
    while stack:
        path, command = stack.pop(0)
        yield path, command
        if isinstance(command, click.Group):
            stack += [((f"{path} {name}").strip(), sub) for name, sub in command.commands.items()]


def option_key(path: str, param: click.Parameter) -> tuple[str, str]:
    """The two keys an option's Spanish may have: for this command, or shared."""
    name = max(param.opts, key=len)
    return (f"{path} {name}".strip(), name)


def spanish_help(path: str, param: click.Parameter | None = None) -> str | None:
    """The Spanish help of a command (or of one of its options), if there is one."""
    table = _spanish()["commands"]
    if param is None:
        return table.get(path)
    return next((table[k] for k in option_key(path, param) if k in table), None)


def use(root: click.Command, lang: str) -> None:
    """Put every help text under `root`, and click's own words, in `lang`."""
    _state["lang"] = lang
    for name in _CLICK_MODULES:
        module = importlib.import_module(f"click.{name}")
        if getattr(module, "_", None) is not None:
            module._ = _gettext  # type: ignore[attr-defined]
        if getattr(module, "ngettext", None) is not None:
            module.ngettext = _ngettext  # type: ignore[attr-defined]
    for path, command in commands(root):
        english = command.__dict__.setdefault("_labkit_help", command.help)
        command.help = (spanish_help(path) if lang == "es" else None) or english
        command.short_help = None  # click derives it again from the help in use
        command.options_metavar = "[OPCIONES]" if lang == "es" else "[OPTIONS]"
        if isinstance(command, click.Group):
            group = command.__dict__.setdefault("_labkit_metavar", command.subcommand_metavar)
            command.subcommand_metavar = _metavar(group, lang) or group
        if getattr(command, "_help_option", None) is not None:  # click words it once, keeps it
            command._help_option = None
        for param in command.params:
            # the placeholders of usage lines: FILE, FUNCTION, and a path's (click names
            # those after the type: FILE, DIRECTORY, PATH) when none was given
            own = param.__dict__.setdefault("_labkit_metavar", param.metavar)
            if own is None and isinstance(param.type, click.Path) and param.nargs == 1:
                param.metavar = _metavar(param.type.name.upper(), lang) if lang == "es" else None
            elif own is not None:
                param.metavar = _metavar(own, lang)
            if not isinstance(param, click.Option) or not param.help:
                continue
            english = param.__dict__.setdefault("_labkit_help", param.help)
            param.help = (spanish_help(path, param) if lang == "es" else None) or english

