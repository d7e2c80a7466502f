"""`labkit watch`: grade once, then again on every save, on one redrawn screen.

Each grade runs as a `labkit grade --json` of its own, so a save in the middle of a
grade cancels it as a Ctrl-C would (the daemon drops that grading at once and stays
warm, see `labkit.engine.warm.Cancel`) and the next starts at once. The screen shows
the table, the total, and the first failing check's message and hint; `q` or Ctrl-C
leaves.
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import IO

import click

from labkit import i18n, platform, textsafe
from labkit.cli import render
from labkit.cli.common import DIR_OPTION, LANG_OPTION
from labkit.course import catalogue as registry
from labkit.course.catalogue import LabSpec
from labkit.results import LabResult
from labkit.student import locate, watching, workspace


@click.command()
@click.argument("lab_id", metavar="[LAB]", required=False)
@DIR_OPTION
@LANG_OPTION
@click.option("--poll", is_flag=True, help="Poll the files instead of being told of saves.")
def watch(lab_id: str | None, directory: Path | None, lang: str, poll: bool) -> None:
    """Grade LAB now and again on every save of its files; q or Ctrl-C to leave."""
    found = locate.locate(lab_id, directory or Path.cwd(), explicit=directory is not None)
    workspace.collect_submission(found.lab, found.path, lang)  # unusable files: say so now
    Watch(found.lab, found.path, lang).run(poll)


class Watch:
    """One watched workspace: the grade under way (a child process) and the screen."""

    def __init__(self, lab: LabSpec, path: Path, lang: str) -> None:
        self.lab, self.path, self.lang = lab, path, lang
        self.child: subprocess.Popen[bytes] | None = None
        self.out: IO[bytes] | None = None
        self.err: IO[bytes] | None = None

    def run(self, poll: bool) -> None:
        saves: queue.SimpleQueue[bool] = queue.SimpleQueue()
        stop = threading.Event()
        watching.start(self.lab, self.path, lambda: saves.put(True), stop, poll)
        try:
            with platform.keys(sys.stdin) as key:
                self._start()
                while True:
                    if key(0.1) in ("q", "Q"):
                        return
                    saved = False
                    while not saves.empty():
                        saved = saves.get()
                    if saved:
                        self._cancel()
                        self._start()
                    elif self.child is not None and self.child.poll() is not None:
                        self._show()
        except KeyboardInterrupt:
            return
        finally:
            stop.set()
            self._cancel()

    def _start(self) -> None:
        """A new grade in a child process, its reply in temporary files (never a pipe a
        large result could fill while nobody reads it)."""
        self.out, self.err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
        command = [sys.executable, "-m", "labkit", "grade", self.lab.id, "--dir", str(self.path),
                   "--json", "--lang", self.lang]
        self.child = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=self.out,
                                      stderr=self.err)
        _screen(i18n.t("watch_grading", self.lang, lab=self.lab.id), self._footer())

    def _cancel(self) -> None:
        """Stop the grade under way as Ctrl-C would, and wait for it to leave."""
        child, self.child = self.child, None
        if child is None or child.poll() is not None:
            return
        platform.interrupt(child)
        try:
            child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()

    def _show(self) -> None:
        assert self.out is not None and self.err is not None
        self.child = None
        self.out.seek(0)
        self.err.seek(0)
        try:
            result = LabResult.from_dict(json.loads(self.out.read()))
        except (ValueError, KeyError, TypeError):
            said = self.err.read().decode(errors="replace").strip() or "?"
            _screen(textsafe.shown(said, multiline=True), self._footer())
            return
        _screen(result, self._footer(), render.first_failure(result,
                                                             registry.lab_checks(self.lab)))

    def _footer(self) -> str:
        return i18n.t("watch_footer", self.lang, path=textsafe.shown(str(self.path)))


def _screen(body: str | LabResult, footer: str, failure: str = "") -> None:
    """Redraw the whole screen (a terminal), or print one more block (anything else)."""
    from rich.console import Console
    from rich.text import Text

    console = Console()
    if console.is_terminal:
        console.clear()
    if isinstance(body, LabResult):
        console.print(render.terminal_table(body, console.width))
    else:
        console.print(Text(body))
    if failure:
        console.print(Text(failure, style="yellow"))
    console.print(Text(footer, style="dim"))
