"""What the class got wrong: statistics, the text report, and the self-contained HTML
page rendered in headless Chromium."""

from __future__ import annotations

import dataclasses
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from batchkit import LAB02, LAB02_FULL, made_up, made_up_gradebook

from labkit import __version__
from labkit.classroom import report
from labkit.classroom.gradebook import Gradebook, GradebookError
from labkit.course.catalogue import lab_checks

CHECKS = [c.id for c in lab_checks(LAB02).checks]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture()
def out(tmp_path):
    made_up_gradebook(tmp_path / "gradebook.sqlite")
    return tmp_path


def test_statistics_of_the_current_gradings(out):
    summary = report.from_gradebook(out)
    assert (summary.students, summary.passed, summary.failed, summary.errors) == (5, 1, 3, 1)
    # scores F (ana), F - 4 (ben), F - 2 (cruz), 0 (dora), 0 (eli), F = lab02's full marks
    assert summary.mean == pytest.approx((3 * LAB02_FULL - 6) / 5)
    assert summary.median == LAB02_FULL - 4 and (summary.low, summary.high) == (0, LAB02_FULL)
    assert sum(b.count for b in summary.bins) == 5 and summary.bins[-1].low == LAB02_FULL
    assert summary.bins[0].count == 2 and summary.bins[-1].count == 1


def test_checks_most_failed_first_with_the_common_message(out):
    checks = report.from_gradebook(out).checks
    assert [c.check_id for c in checks][:2] == [CHECKS[1], CHECKS[4]]
    first = checks[0]  # failed by ben, cruz and dora; error submissions have no checks
    assert (first.graded, first.passed, first.failed) == (4, 1, 3)
    assert first.pass_rate == pytest.approx(0.25)
    assert first.top_count == 2  # the English text (ben, dora) beats the Spanish one (cruz)
    assert checks[1].timeouts == 1
    rates = [c.pass_rate for c in checks]
    assert rates == sorted(rates)


def test_text_report(out):
    text = report.text(report.from_gradebook(out))
    assert text.splitlines()[0] == "lab02: 5 students — 1 pass, 3 fail, 1 error"
    assert f"median {LAB02_FULL - 4:g}" in text and "most failed first" in text
    assert text.index(CHECKS[1]) < text.index(CHECKS[0])


def test_empty_gradebook_reports_nothing_to_show(tmp_path):
    with Gradebook(tmp_path / "gradebook.sqlite") as book:
        empty = report.build(book, "lab02")
    assert empty.students == 0 and empty.bins == ()
    assert report.text(empty) == "lab02: 0 students — 0 pass, 0 fail, 0 error"
    assert "<svg" not in report.html(empty)


def test_html_is_self_contained_and_escapes_student_text(tmp_path):
    hostile = made_up({CHECKS[0]: "fail"})
    checks = list(hostile.checks)
    checks[0] = dataclasses.replace(checks[0], message="<script>alert(1)</script> & <u>x</u>")
    with Gradebook(tmp_path / "gradebook.sqlite") as book:
        book.record(run_id=None, student="mallory", source="mallory", kind="folder",
                    digest="", grader_key="k",
                    result=dataclasses.replace(hostile, checks=tuple(checks)))
    page = report.html(report.from_gradebook(tmp_path))
    assert "<script" not in page and "&lt;script&gt;" in page and "<u>" not in page
    for reference in ("http:", "https:", "src=", "href=", "@import", "url("):
        assert reference not in page
    assert page.count('id="score-histogram"') == 1 and page.count('id="check-pass-rates"') == 1


def test_gradebook_schema_is_versioned(tmp_path):
    path = tmp_path / "gradebook.sqlite"
    with Gradebook(path) as book:
        assert book.version() == 1
    with Gradebook(path) as book:  # reopening applies nothing twice
        assert book.version() == 1
    db = sqlite3.connect(path)
    db.execute("INSERT INTO schema_version VALUES (99, 'future')")
    db.commit()
    db.close()
    with pytest.raises(GradebookError, match="schema 99"):
        Gradebook(path)
    (tmp_path / "junk.sqlite").write_text("not a database at all, certainly not sqlite" * 50)
    with pytest.raises(GradebookError, match="not a usable gradebook"):
        Gradebook(tmp_path / "junk.sqlite")
    assert __version__


def test_cli_report_and_html(out):
    page = out / "class.html"
    done = subprocess.run([sys.executable, "-c", "from labkit.cli import main; main()",
                           "report", str(out), "--html", str(page)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("lab02: 5 students")
    assert page.is_file() and f"wrote {page}" in done.stdout
    empty = subprocess.run([sys.executable, "-c", "from labkit.cli import main; main()",
                            "report", str(out / "nothing-here")], capture_output=True, text=True)
    assert empty.returncode == 2


@pytest.mark.skipif(CHROMIUM is None and os.environ.get("CI") != "true",
                    reason="headless Chromium is not installed (scripts/test.sh installs it)")
def test_html_report_renders_in_headless_chromium(out, tmp_path):
    assert CHROMIUM, "CI must have chromium (scripts/test.sh installs it)"
    page = tmp_path / "report.html"
    report.write_html(report.from_gradebook(out), page)
    flags = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
             "--no-first-run", "--disable-background-networking", "--disable-component-update",
             "--disable-sync", "--disable-dev-shm-usage", f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run([*flags, "--dump-dom", page.as_uri()], capture_output=True, text=True,
                         timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    html = dom.stdout
    assert 'id="score-histogram"' in html and 'id="check-pass-rates"' in html
    bars = html.count('class="bar')
    assert bars == len(report.from_gradebook(out).bins) + len(CHECKS)
    shot = tmp_path / "report.png"
    done = subprocess.run([*flags, f"--screenshot={shot}", "--window-size=1000,1400",
                           page.as_uri()], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and shot.is_file(), done.stderr[-2000:]
    from PIL import Image

    with Image.open(shot) as image:
        pixels = image.convert("RGB").resize((200, 280))
        colours = pixels.getcolors(maxcolors=200 * 280)
    inked = sum(n for n, rgb in colours if rgb != (255, 255, 255))
    assert inked > 0.03 * 200 * 280, "the screenshot is (nearly) blank"
    bar_blue = sum(n for n, (r, g, b) in colours if b > 150 and r < 120)
    assert bar_blue > 50, "no chart bars visible"


def test_report_dir_argument_may_be_the_gradebook_file(out):
    assert report.from_gradebook(out / "gradebook.sqlite").students == 5
    assert Path(out / "gradebook.sqlite").is_file()
