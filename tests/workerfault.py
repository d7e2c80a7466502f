"""Loaded into the test cluster's workers (`dask worker --preload`): a submission whose
files hold MARK takes down the worker that grades it, as a node lost under it (the OOM
killer, a kernel fault) would be. Nothing a submission does inside the sandbox can do
that, which is why the tests need this stand-in."""

from __future__ import annotations

import os
import signal

from labkit.classroom import clusterworker

MARK = b"# stands for a submission that takes its node down"


def dask_setup(worker: object) -> None:
    grade = clusterworker.GradingPlugin.grade

    def grade_or_die(self, serial, lang, key, files):
        if any(MARK in data for data in files.values()):
            os.kill(os.getpid(), signal.SIGKILL)
        return grade(self, serial, lang, key, files)

    clusterworker.GradingPlugin.grade = grade_or_die
