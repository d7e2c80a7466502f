"""Who copied: a planted copy (renamed variables, reordered functions) ranks first, a
class of honest students stays under the threshold, the stub's own code never counts,
and the page shows each flagged pair side by side with every byte escaped."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from batchkit import LAB02, SOLUTION, STUB, made_up, zipped
from click.testing import CliRunner
from kit import REPO
from similaritykit import STUB_ES, disguised, large_class, similarity_class

from labkit import __version__
from labkit.classroom import similarity
from labkit.classroom.gradebook import Gradebook
from labkit.cli import main

pytest.importorskip("copydetect")


def compared(root, **options):
    texts, skipped = similarity.documents(LAB02, root)
    return similarity.compare(LAB02, texts, skipped=skipped, **options)


def test_a_disguised_copy_ranks_first(tmp_path):
    similarity_class(tmp_path, planted=True)
    assert disguised(SOLUTION) != SOLUTION and "def to_column" in disguised(SOLUTION)
    report = compared(tmp_path)
    first = report.pairs[0]
    assert (first.a, first.b) == ("alice", "mallory")
    assert first.score >= report.threshold and min(first.shares) > 0.8
    assert report.flagged == [first]
    assert all(p.score < report.threshold for p in report.pairs[1:])
    # the two who left the stub as it was share all of it, and that counts for nothing
    assert not any({p.a, p.b} == {"dave", "erin"} for p in report.pairs)


def test_a_class_with_no_copy_stays_under_the_threshold(tmp_path):
    similarity_class(tmp_path, planted=False)
    report = compared(tmp_path)
    assert len(report.documents) == 5 and report.pairs  # honest code still shares idioms
    assert max(p.score for p in report.pairs) < report.threshold
    assert report.flagged == []
    assert "0 pairs at or above 50%" in similarity.text(report)


def test_the_spanish_stub_is_discounted_too():
    # its words differ, but copydetect compares code: comments dropped, strings alike
    assert STUB_ES != STUB
    report = similarity.compare(LAB02, {"ana": STUB_ES, "luis": STUB_ES, "eva": STUB})
    assert report.pairs == ()


def test_the_same_class_scores_the_same_in_every_process(tmp_path):
    similarity_class(tmp_path, planted=True)
    script = (
        "import sys; sys.path[:0] = [sys.argv[1]]\n"
        "from pathlib import Path\n"
        "from batchkit import LAB02\n"
        "from labkit.classroom import similarity\n"
        "texts, _ = similarity.documents(LAB02, Path(sys.argv[2]))\n"
        "for p in similarity.compare(LAB02, texts).pairs:\n"
        "    print(p.a, p.b, repr(p.score), p.slices)\n")
    runs = {subprocess.run([sys.executable, "-c", script, str(REPO / "tests"), str(tmp_path)],
                           env={**os.environ, "PYTHONHASHSEED": seed}, capture_output=True,
                           text=True, check=True).stdout
            for seed in ("1", "2", "3")}
    assert len(runs) == 1 and "alice mallory" in runs.pop()


def test_stable_kgrams_hash_equal_windows_alike():
    hashes = similarity.stable_kgrams("abcabcabx", 3)
    assert len(hashes) == 7 and hashes[0] == hashes[3] and hashes[1] == hashes[4]
    assert len(set(hashes[:3].tolist())) == 3 and hashes[6] != hashes[0]
    assert len(similarity.stable_kgrams("ab", 3)) == 0
    # the same window in another document: the same hash
    assert similarity.stable_kgrams("xyabc", 3)[2] == similarity.stable_kgrams("abc", 3)[0]
    expected = (ord("a") * 0x100000001B3**2 + ord("b") * 0x100000001B3 + ord("c")) % 2**64
    assert int(similarity.stable_kgrams("abc", 3)[0]) % 2**64 == expected


def test_unreadable_entries_are_listed_and_the_deadline_is_kept(tmp_path):
    similarity_class(tmp_path, planted=False)
    zipped(tmp_path, "zed", {"../broadcasting.py": SOLUTION})
    report = compared(tmp_path, deadline_s=0.0)
    assert report.partial and report.pairs == ()
    reasons = dict(report.skipped)
    assert "leaves its folder" in reasons["zed"] and "time limit" in reasons["alice"]
    assert similarity.text(report).startswith("warning: the comparison reached its time limit")
    with pytest.raises(similarity.SimilarityError, match="threshold"):
        similarity.compare(LAB02, {}, threshold=0)


def test_the_page_shows_pairs_side_by_side_escaped(tmp_path):
    similarity_class(tmp_path, planted=True)
    hostile = disguised(SOLUTION).replace(
        "import numpy as np", "import numpy as np\nNOTE = '</pre><script>alert(1)</script>'")
    (tmp_path / "mallory" / "broadcasting.py").write_text(hostile)
    (tmp_path / "<b>x").mkdir()
    (tmp_path / "<b>x" / "broadcasting.py").write_text(SOLUTION)
    page = similarity.html(compared(tmp_path))
    assert "<script" not in page and "&lt;/pre&gt;&lt;script&gt;" in page
    assert "<b>x" not in page and "&lt;b&gt;x" in page
    sections = page.count('<div class="pair">')
    assert sections == 3  # alice, mallory and <b>x: every pair of the three
    assert page.count("<pre>") == 2 * sections and "<mark>" in page
    marked = "".join(re.findall(r"<mark>(.*?)</mark>", page, re.DOTALL))
    assert "raise ValueError" in marked


def test_cli_similarity_reads_the_last_batch_download(tmp_path):
    similarity_class(tmp_path / "class", planted=True)
    with Gradebook(tmp_path / "out" / "gradebook.sqlite") as book:
        run = book.begin_run("lab02", str(tmp_path / "class"), 1, 5.0, __version__, "folders")
        for student in ("alice", "bob", "carol", "dave", "erin", "mallory"):
            book.record(run_id=run, student=f"id-{student}", source=student, kind="folder",
                        digest="d", grader_key="k", result=made_up({}))
        book.finish_run(run, 6, 0, 0)
    done = CliRunner().invoke(main, ["similarity", str(tmp_path / "out"), "--threshold", "0.9"])
    assert done.exit_code == 0, done.output
    lines = done.output.splitlines()
    assert lines[0].startswith("lab02: 6 submissions compared, 1 pair at or above 90%")
    assert lines[1].startswith("!") and "id-alice ~ id-mallory" in lines[1]  # gradebook ids
    assert (tmp_path / "out" / "similarity.html").is_file()
    assert (tmp_path / "out" / "similarity.txt").read_text().splitlines()[1] == lines[1]
    bad = CliRunner().invoke(main, ["similarity", str(tmp_path / "out"), "--threshold", "2"])
    assert bad.exit_code == 2


def test_batch_with_similarity_compares_at_the_end(tmp_path):
    for name, source in (("alice", SOLUTION), ("mallory", disguised(SOLUTION))):
        (tmp_path / "class" / name).mkdir(parents=True)
        (tmp_path / "class" / name / "broadcasting.py").write_text(source)
    done = CliRunner().invoke(main, ["batch", "lab02", str(tmp_path / "class"), "--out",
                                     str(tmp_path / "out"), "--jobs", "1", "--similarity"])
    assert done.exit_code == 0, done.output
    assert "2 submissions compared, 1 pair at or above 50%" in done.output
    assert "alice ~ mallory" in done.output and (tmp_path / "out" / "similarity.html").is_file()


PADDING = "".join(f"# note {i}: {'x' * 60}\n" for i in range(344 * 1024 // 72))  # 344 KB


def test_a_verbatim_copy_behind_comments_is_still_found(tmp_path):
    """Issue 29: documents were cut at 256 Ki characters before comparison, silently, so
    a copy placed after 344 KB of comments was never seen. Comments do not count now."""
    similarity_class(tmp_path, planted=False)
    (tmp_path / "mallory").mkdir()
    (tmp_path / "mallory" / "broadcasting.py").write_text(PADDING + SOLUTION)
    report = compared(tmp_path)
    assert len(PADDING) > 256 * 1024 and report.cut == ()
    first = report.pairs[0]
    assert (first.a, first.b) == ("alice", "mallory") and first.score >= report.threshold
    assert "# note" not in report.documents["mallory"]


def test_a_document_longer_than_the_limit_is_cut_and_said_so(tmp_path):
    similarity_class(tmp_path, planted=False)
    filler = "".join(f"value_{i} = {i} * {i + 1}\n" for i in range(8000))  # code, not comments
    (tmp_path / "<i>mallory").mkdir()
    (tmp_path / "<i>mallory" / "broadcasting.py").write_text(filler + SOLUTION)
    report = compared(tmp_path)
    assert report.cut == ("<i>mallory",)
    assert len(report.documents["<i>mallory"]) == similarity.MAX_DOCUMENT_CHARS
    assert "cut: <i>mallory: only the first 65,536 characters of code" in similarity.text(report)
    page = similarity.html(report)
    assert "cut: &lt;i&gt;mallory: only the first" in page and "<i>mallory" not in page


def test_code_of_leaves_out_comments_only_and_bounds_what_it_reads():
    source = ("import numpy as np  # why\n\n# a whole line\ndef f(x):\n"
              "    text = '''keep\n# inside a string\n'''\n    return x  # done\n")
    code, cut = similarity.code_of(source)
    assert not cut and code == ("import numpy as np\ndef f(x):\n    text = '''keep\n"
                                "# inside a string\n'''\n    return x")
    # code that does not tokenize: from where it stops, whole-line comments still go
    code, cut = similarity.code_of("def f(:\n    return 1\n# gone\nx = '''\n")
    assert "gone" not in code and code.startswith("def f(:")
    # one long line, and many short ones: at most the limit, and said so
    for text in ("a+" * 200_000, "y = 2\n" * 200_000, "s = '" + "z" * 10**6):
        code, cut = similarity.code_of(text, limit=1000)
        assert cut and len(code) == 1000
    assert similarity.code_of("# only\n# comments\n" * 10**4) == ("", False)


def test_in_a_class_that_shares_lecture_code_the_copy_stands_out(tmp_path, monkeypatch):
    """Issue 31: in a 300-class, 37,401 of 41,616 pairs were at 50 % or more and the copy
    was not among the 200 listed. Code most of the class holds is discounted now (as
    MOSS's -m), and pairs are ranked by how far they stand out above the class."""
    large_class(tmp_path, 40)
    report = compared(tmp_path)
    assert report.common == similarity.COMMON_MIN
    first = report.pairs[0]
    assert (first.a, first.b) == ("mallory", "student07") and report.flagged == [first]
    assert first.standout > 0.5 and all(p.standout < 0.3 for p in report.pairs[1:])
    # without discounting the class's code, the lecture's helpers pair everyone
    monkeypatch.setattr(similarity, "COMMON_MIN", 10**6)
    undiscounted = compared(tmp_path)
    assert len(undiscounted.pairs) == 41 * 40 // 2 and len(undiscounted.flagged) > 1


def test_a_list_cut_short_says_how_many_pairs_it_left_out(tmp_path, monkeypatch):
    large_class(tmp_path, 12)
    monkeypatch.setattr(similarity, "MAX_LISTED", 3)
    report = compared(tmp_path)
    left = len(report.pairs) - 3
    assert left > 0
    text = similarity.text(report)
    assert len([line for line in text.splitlines() if " ~ " in line]) == 3
    assert f"... and {left} more pairs that share something, not listed" in text
    assert f"... and {left} more pairs" in similarity.html(report)
