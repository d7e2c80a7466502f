"""What several audiences' commands share: the common options, `die`, the checkout."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import NoReturn

import click

from labkit import i18n
from labkit.course import catalogue as registry

LANG = "labkit.lang"  # the chosen language, in the click context's meta


def chosen_lang(ctx: click.Context, _param: click.Parameter, value: str | None) -> str:
    """`--lang`, else the locale's, else English; kept where the group's error line finds it."""
    ctx.meta[LANG] = lang = i18n.detect_lang(value)
    return lang


LANG_OPTION = click.option(
    "--lang", type=click.Choice(i18n.LANGUAGES), default=None, callback=chosen_lang,
    help="Language of messages (default: from the locale, else English).",
)
DIR_OPTION = click.option(
    "--dir", "directory", type=click.Path(file_okay=False, path_type=Path), default=None,
    metavar="DIR", help="The lab's workspace folder (default: ./LAB, or the one you are in).",
)
REPO_OPTION = click.option(
    "--repo", type=click.Path(file_okay=False, exists=True, path_type=Path), default=None,
    help="The labkit checkout (default: the one this labkit runs from).",
)


def die(message: str) -> NoReturn:
    """Print one line on stderr and exit 2 (bad usage or input)."""
    click.echo(f"labkit: {message}", err=True)
    sys.exit(2)


def checkout(repo: Path | None) -> Path:
    """The source checkout the author tools work on (solutions never ship in the wheel)."""
    repo = (repo or registry.data_root()).resolve()
    if not (repo / "solutions").is_dir():
        die(f"no solutions/ under {repo}: this needs a labkit source checkout (see --repo)")
    return repo
