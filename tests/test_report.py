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
from labkit.classroom.gradebook import SCHEMA_VERSION, Gradebook, GradebookError
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
    # graded: F (ana), F - 4 (ben), F - 2 (cruz), 0 (dora), F = lab02's full marks;
    # eli could not be graded: no score
    scores = [r.score for r in summary.rows if r.status in ("pass", "fail")]
    full = LAB02_FULL
    assert sorted(scores) == [0, full - 4, full - 2, full] and summary.graded == 4
    assert summary.mean == pytest.approx(sum(scores) / 4)
    assert summary.median == full - 3 and (summary.low, summary.high) == (0, full)
    assert sum(b.count for b in summary.bins) == 4 and summary.bins[-1].low == full
    assert summary.bins[0].count == 1 and summary.bins[-1].count == 1


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
    assert text.splitlines()[0] == "lab02: 5 students — 1 pass, 3 fail, 1 error, 0 missing"
    assert "score over the 4 graded" in text and f"median {LAB02_FULL - 3:g}" in text
    assert "most failed first" in text
    assert text.index(CHECKS[1]) < text.index(CHECKS[0])


def test_empty_gradebook_reports_nothing_to_show(tmp_path):
    with Gradebook(tmp_path / "gradebook.sqlite") as book:
        empty = report.build(book, "lab02")
    assert empty.students == 0 and empty.bins == ()
    assert report.text(empty) == "lab02: 0 students — 0 pass, 0 fail, 0 error, 0 missing"
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
    for reference in ("http:", "https:", "src=", "href=", "@import", "url(", "<script"):
        assert reference not in page
    assert page.count('id="score-histogram"') == 1 and page.count('id="check-pass-rates"') == 1


def test_gradebook_schema_is_versioned(tmp_path):
    path = tmp_path / "gradebook.sqlite"
    with Gradebook(path) as book:
        assert book.version() == SCHEMA_VERSION
    with Gradebook(path) as book:  # reopening applies nothing twice
        assert book.version() == SCHEMA_VERSION
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


# --- who needs help (issue 18) ------------------------------------------------------------


@pytest.fixture()
def helped(tmp_path):
    """The made-up class, plus a late submission, a roster student who sent nothing and
    an unfinished batch run."""
    from labkit.classroom.batch import error_result

    made_up_gradebook(tmp_path / "gradebook.sqlite")
    with Gradebook(tmp_path / "gradebook.sqlite") as book:
        book.set_person("fay", "Fay <b>Ng</b>", "fay@uni.edu", "B")
        book.record(run_id=None, student="fay", source="", kind="none", digest="",
                    grader_key="k", missing=True,
                    result=error_result(LAB02, "no submission", "en"))
        book.record(run_id=None, student="gus", source="gus", kind="folder", digest="",
                    grader_key="k", late=True, result=made_up({CHECKS[2]: "fail"}))
    return tmp_path


def test_the_text_report_lists_who_needs_help(helped):
    summary = report.from_gradebook(helped)
    assert (summary.students, summary.graded, summary.errors, summary.missing) == (7, 5, 1, 1)
    assert summary.mean == pytest.approx(sum(r.score for r in summary.rows
                                             if r.score is not None) / 5)
    lines = report.text(summary).splitlines()
    assert lines[0] == "lab02: 7 students — 1 pass, 4 fail, 1 error, 1 missing"
    at = lines.index("could not be graded (1):")
    assert lines[at + 1] == "  eli: eli.zip is not a readable zip file"
    at = lines.index("missing (no submission) (1):")
    assert lines[at + 1] == "  fay (Fay <b>Ng</b>)"
    assert lines[lines.index("late (1):") + 1] == "  gus"


def test_an_unfinished_batch_is_said_on_the_first_line(helped):
    with Gradebook(helped / "gradebook.sqlite") as book:
        book.begin_run("lab02", "/class", 2, 5.0, __version__)
    summary = report.from_gradebook(helped)
    assert report.text(summary).splitlines()[0].startswith(
        "warning: the last labkit batch of lab02")
    page = report.html(summary)
    assert page.index('id="unfinished"') < page.index("<h1>")
    done = subprocess.run([sys.executable, "-m", "labkit", "report", str(helped)],
                          capture_output=True, text=True, timeout=60)
    assert done.stdout.startswith("warning: the last labkit batch"), done.stderr


def test_html_lists_students_failures_and_sorts_without_script(helped):
    summary = report.from_gradebook(helped)
    page = report.html(summary)
    assert "<script" not in page and "Fay &lt;b&gt;Ng&lt;/b&gt;" in page and "<b>Ng" not in page
    tables = {key: page[page.index(f'id="by-{key}"'):].split("</table>")[0]
              for key in ("student", "score", "status")}
    for table in tables.values():  # every student in every order, once
        assert all(table.count(f"<tr><td>{s}") == 1
                   for s in ("ana", "ben", "cruz", "dora", "eli", "fay", "gus"))
    order = [s for s in ("ana", "ben", "cruz", "dora", "eli", "fay", "gus")]

    def ranked(key):
        return sorted(order, key=lambda s: tables[key].index(f"<tr><td>{s}"))

    assert ranked("student") == order
    assert ranked("score")[:2] == ["eli", "fay"] and ranked("score")[-1] == "ana"
    assert ranked("status")[:3] == ["eli", "fay", "dora"]
    assert page.count('type="radio"') == 3 and page.count(" checked>") == 1
    failed = dict(summary.failures)
    assert [f.student for f in failed[CHECKS[1]]] == ["ben", "cruz", "dora"]
    assert f"{CHECKS[1]} — 3 students" in page


def _fit_report(tmp_path) -> Path:
    """A class whose labels are as long as they get: three-digit counts, long names,
    a message with no space to break at."""
    with Gradebook(tmp_path / "gradebook.sqlite") as book:
        for i in range(120):
            failed = {CHECKS[j]: "fail" for j in range(len(CHECKS)) if (i + j) % 7 == 0}
            book.set_person(f"s{i:03d}", "Maximiliana Bartholomew-Featherstonehaugh " * 2, "", "")
            book.record(run_id=None, student=f"s{i:03d}", source="x", kind="folder", digest="",
                        grader_key="k", result=made_up(failed, message="x" * 300))
    page = tmp_path / "fit.html"
    report.write_html(report.from_gradebook(tmp_path), page)
    return page


_MEASURE = """<script>
window.addEventListener('load', () => {
  const bad = [], root = document.documentElement, width = root.clientWidth;
  if (root.scrollWidth > width + 1) bad.push('page wider than the window: ' + root.scrollWidth);
  let texts = 0;
  for (const svg of document.querySelectorAll('svg')) {
    const box = svg.getBoundingClientRect();
    for (const t of svg.querySelectorAll('text')) {
      const b = t.getBoundingClientRect();
      texts += 1;
      if (b.left < box.left - 0.5 || b.right > box.right + 0.5 || b.top < box.top - 0.5
          || b.bottom > box.bottom + 0.5) bad.push('clipped: ' + t.textContent);
    }
    const ticks = [...svg.querySelectorAll('text.tick')].map(t => t.getBoundingClientRect());
    for (let i = 1; i < ticks.length; i++)
      if (ticks[i - 1].right > ticks[i].left) bad.push('labels overlap at ' + i);
  }
  for (const el of document.querySelectorAll('.chart > div, td, th, .card, h1, h2, p')) {
    texts += 1;
    if (el.scrollWidth > el.clientWidth + 1 || el.getBoundingClientRect().right > width + 1)
      bad.push('overflows: ' + el.textContent.slice(0, 40));
  }
  const out = document.createElement('pre');
  out.id = 'fit';
  out.textContent = JSON.stringify({bad: bad, texts: texts, width: width});
  document.body.appendChild(out);
});
</script>"""


@pytest.mark.skipif(CHROMIUM is None and os.environ.get("CI") != "true",
                    reason="headless Chromium is not installed (scripts/test.sh installs it)")
@pytest.mark.parametrize("width", [1280, 800])
def test_html_labels_fit_at_desktop_and_narrow_widths(tmp_path, width):
    import html as htmllib
    import json
    import re

    assert CHROMIUM, "CI must have chromium (scripts/test.sh installs it)"
    page = _fit_report(tmp_path)
    probe = tmp_path / "probe.html"  # the page itself has no script: the test adds one
    probe.write_text(page.read_text().replace("</body>", _MEASURE + "</body>"))
    flags = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--disable-dev-shm-usage", f"--user-data-dir={tmp_path / 'profile'}",
             f"--window-size={width},1200", "--virtual-time-budget=3000"]
    dom = subprocess.run([*flags, "--dump-dom", probe.as_uri()], capture_output=True,
                         text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    found = re.search(r'<pre id="fit">(.*?)</pre>', dom.stdout, re.DOTALL)
    assert found, dom.stdout[-2000:]
    measured = json.loads(htmllib.unescape(found.group(1)))
    assert measured["width"] <= width and measured["texts"] > 100
    assert measured["bad"] == []
