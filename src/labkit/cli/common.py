"""What several audiences' commands share: the common options, `die`, finding a lab."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import NoReturn

import click

from labkit import i18n
from labkit.course import catalogue as registry
from labkit.course.catalogue import LabSpec, UnknownLab

LANG_OPTION = click.option(
    "--lang", type=click.Choice(i18n.LANGUAGES), default=None,
    help="Language of messages (default: from the locale, else English).",
)
DIR_OPTION = click.option(
    "--dir", "directory", type=click.Path(file_okay=False, path_type=Path), default=None,
    help="The lab's workspace folder (default: ./LAB).",
)
REPO_OPTION = click.option(
    "--repo", type=click.Path(file_okay=False, exists=True, path_type=Path), default=None,
    help="The labkit checkout (default: the one this labkit runs from).",
)


def die(message: str) -> NoReturn:
    """Print one line on stderr and exit 2 (bad usage or input)."""
    click.echo(f"labkit: {message}", err=True)
    sys.exit(2)


def find_lab(lab_id: str, lang: str) -> LabSpec:
    """The lab called `lab_id`, or exit 2 with a suggestion or the list of labs."""
    try:
        return registry.get_lab(lab_id)
    except UnknownLab as exc:
        message = i18n.t("unknown_lab", lang, lab=lab_id)
        if exc.suggestion:
            message += i18n.t("did_you_mean", lang, suggestion=exc.suggestion)
        else:
            labs = ", ".join(lab.id for lab in registry.catalogue())
            message += i18n.t("available_labs", lang, labs=labs)
        die(message)


def checkout(repo: Path | None) -> Path:
    """The source checkout the author tools work on (solutions never ship in the wheel)."""
    repo = (repo or registry.data_root()).resolve()
    if not (repo / "solutions").is_dir():
        die(f"no solutions/ under {repo}: this needs a labkit source checkout (see --repo)")
    return repo
