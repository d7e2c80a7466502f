"""`labkit submit` (issue 30): the hand-in zip the batch reads, with a receipt of the grade
the student saw; the batch grades the files, never the receipt, and names every student
whose official grade differs from their receipt, with the likely reason."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
from batchkit import LAB02, LAB02_FULL, SOLUTION, STUB
from click.testing import CliRunner

from labkit import __version__, fileset
from labkit.classroom import batch
from labkit.cli import main
from labkit.student import handin


@pytest.fixture
def workspace(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    done = CliRunner().invoke(main, ["fetch", "lab02", "--lang", "en"])
    assert done.exit_code == 0, done.output
    (tmp_path / "lab02" / "broadcasting.py").write_text(SOLUTION)
    return tmp_path / "lab02"


def test_submit_writes_the_files_as_graded_and_a_receipt_of_the_grade(workspace, tmp_path):
    done = CliRunner().invoke(main, ["submit", "lab02", "--lang", "es"])
    assert done.exit_code == 0, done.output
    zip_path = tmp_path / "lab02-handin.zip"
    assert f"lab02: {LAB02_FULL:g}/{LAB02_FULL:g} — se escribió {zip_path}" in done.output
    with zipfile.ZipFile(zip_path) as archive:
        names = archive.namelist()
        receipt = handin.parse_receipt(archive.read(handin.RECEIPT_NAME))
        graded = {rel: archive.read(rel) for rel in names if rel != handin.RECEIPT_NAME}
    assert graded == {"broadcasting.py": SOLUTION.encode()}
    assert receipt == handin.Receipt("lab02", fileset.digest(graded), LAB02_FULL, LAB02_FULL,
                                     __version__)
    again = CliRunner().invoke(main, ["submit", "--dir", str(workspace), "--out",
                                      str(tmp_path / "again.zip")])
    assert again.exit_code == 0, again.output
    assert (tmp_path / "again.zip").read_bytes() == zip_path.read_bytes()  # stable bytes
    nowhere = CliRunner().invoke(main, ["submit", "lab02", "--out",
                                        str(zip_path / "x.zip")])  # under a file
    assert nowhere.exit_code == 2 and "cannot write the hand-in zip" in nowhere.output


def _handin(root: Path, name: str, files: dict[str, bytes], receipt: dict | bytes) -> None:
    data = receipt if isinstance(receipt, bytes) else json.dumps(receipt).encode()
    with zipfile.ZipFile(root / f"{name}.zip", "w") as archive:
        for rel, content in files.items():
            archive.writestr(rel, content)
        archive.writestr(handin.RECEIPT_NAME, data)


def test_the_batch_grades_the_files_and_names_each_receipt_that_claims_another_grade(tmp_path):
    solution, stub = {"broadcasting.py": SOLUTION.encode()}, {"broadcasting.py": STUB.encode()}

    def receipt(files: dict[str, bytes], score: float, version: str = __version__) -> dict:
        return {"format": 1, "lab": "lab02", "digest": fileset.digest(files), "score": score,
                "max_score": LAB02_FULL, "labkit_version": version}

    subs = tmp_path / "class"
    subs.mkdir()
    _handin(subs, "alice", solution, receipt(solution, LAB02_FULL))  # honest
    _handin(subs, "bob", stub, receipt(stub, LAB02_FULL))  # a receipt edited by hand
    _handin(subs, "carol", stub, receipt(solution, LAB02_FULL))  # files changed after submit
    _handin(subs, "dave", stub, receipt(stub, LAB02_FULL, "0.0.1\x1b[2J"))  # an older kit
    _handin(subs, "erin", solution, b"[" * 3000 + b"]" * 1000)  # not a receipt: ignored
    summary = batch.grade_many(LAB02, subs, tmp_path / "out", jobs=2)
    assert (summary.graded, summary.errors) == (5, 0)
    why = dict(summary.receipts)
    assert sorted(why) == ["bob", "carol", "dave"]
    assert "same files and same labkit" in why["bob"]
    assert "not the ones the receipt was made for" in why["carol"]
    assert "the receipt with labkit 0.0.1" in why["dave"]
    from labkit.cli.instructor import _batch_notes

    shown = "\n".join(_batch_notes(summary))  # the receipt's bytes, escaped on a terminal
    assert "\x1b" not in shown and "0.0.1\\x1b[2J" in shown
    full = f"{LAB02_FULL:g}/{LAB02_FULL:g}"
    assert all(f"the receipt says {full}, the official grade is 0/" in text
               for text in why.values())


@pytest.mark.parametrize("data", [
    b"x" * (handin.MAX_RECEIPT_BYTES + 1), b"\xff\xfe", b"not json", b"[1, 2]",
    b"[" * 100_000, json.dumps({"format": 2}).encode(),
    json.dumps({"format": 1, "lab": "lab02", "digest": "d", "score": "18", "max_score": 18,
                "labkit_version": "1"}).encode(),
    json.dumps({"format": 1, "lab": ["lab02"], "digest": "d", "score": 1, "max_score": 18,
                "labkit_version": "1"}).encode(),
], ids=["too_big", "not_utf8", "not_json", "a_list", "deep", "other_format", "score_text",
        "lab_list"])
def test_anything_that_is_not_a_receipt_is_no_receipt(data):
    assert handin.parse_receipt(data) is None
