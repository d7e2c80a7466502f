"""Progress on a terminal: a batch's on the instructor's (rich), a grade's on the student's.

On a terminal: a live bar with counts (graded, skipped, errors), the rate and an ETA.
Elsewhere (a log, CI): one plain line per submission, so nothing is lost in a file.
Student ids and messages are the students' text: their control characters are shown
escaped (`labkit.textsafe`), so an ESC cannot rewrite the instructor's terminal.
"""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, TextIO

from labkit import i18n, textsafe

if TYPE_CHECKING:  # the batch's module is the instructor's: `labkit grade` never loads it
    from rich.progress import TaskID

    from labkit.classroom.batch import BatchEvent


class PlainProgress:
    """One line per finished submission: `[ 12/300] alice  pass  14/14  0.52 s`."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.width = 1
        self.started = time.monotonic()

    def __call__(self, event: BatchEvent) -> None:
        if event.kind == "start":
            self.width = len(str(event.total))
            self.started = time.monotonic()
            print(f"grading {event.total} submissions", file=self.stream, flush=True)
            return
        counter = f"[{event.done:>{self.width}}/{event.total}]"
        if event.kind == "skipped":
            line = f"{counter} {event.student}  unchanged, skipped"
        else:
            r = event.result
            if r is None:  # the batch sends every "graded" and "error" event with its result
                raise TypeError(f"a {event.kind!r} event without its result")
            line = f"{counter} {event.student}  {r.status.value}  {r.score:g}/{r.max_score:g}"
            line += f"  {r.duration_s:.2f} s"
            if r.message:
                line += f"  {' '.join(r.message.split())[:160]}"
        print(textsafe.shown(line), file=self.stream, flush=True)

    def close(self) -> None:
        pass


class RichProgress:
    """A live progress bar (rich) with counts and an ETA; `close()` when done."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.progress = Progress(
            TextColumn("[bold]grading"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[counts]}"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=Console(stderr=True),
            transient=False,
        )
        self.task: TaskID | None = None
        self.counts = {"graded": 0, "skipped": 0, "error": 0}

    def _fields(self) -> str:
        c = self.counts
        return f"graded {c['graded']} · skipped {c['skipped']} · errors {c['error']}"

    def __call__(self, event: BatchEvent) -> None:
        if event.kind == "start":
            self.progress.start()
            self.task = self.progress.add_task("grading", total=event.total, counts=self._fields())
            return
        self.counts[event.kind] = self.counts.get(event.kind, 0) + 1
        if self.task is None:  # the batch's first event is always "start"
            raise TypeError(f"a {event.kind!r} event before the batch's start")
        self.progress.update(self.task, completed=event.done, counts=self._fields())

    def close(self) -> None:
        self.progress.stop()


def for_terminal(stream: TextIO | None = None) -> PlainProgress | RichProgress:
    """A rich bar when stderr is a terminal, plain lines otherwise."""
    stream = stream or sys.stderr
    return RichProgress() if stream.isatty() else PlainProgress(stream)


class CheckLine:
    """'grading lab02: check 3 of 11', redrawn in place on a terminal's stderr while a
    grade runs, and wiped when it ends (`close`); nothing at all elsewhere."""

    def __init__(self, lab: str, lang: str, stream: TextIO | None = None) -> None:
        self.lab, self.lang = lab, lang
        self.stream = stream or sys.stderr
        self.live = self.stream.isatty()
        self.shown = False

    def __call__(self, done: int, total: int) -> None:
        if self.live:
            line = i18n.t("progress_line", self.lang, lab=self.lab, done=done, total=total)
            self.stream.write(f"\r\x1b[2K{line}")
            self.stream.flush()
            self.shown = True

    def close(self) -> None:
        if self.shown:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()
            self.shown = False
