"""The hand-in: the zip `labkit submit` writes and the instructor's batch reads, with a receipt.

The zip holds the lab's files as they were graded, at its root, and `labkit-receipt.json`:
the files' digest, the kit's version and the grade the student saw. The batch grades the
files and never the receipt: a receipt is the student's claim, shown to the instructor
only where the official grade differs from it, with the likely reason (other files, or
another kit). It is untrusted bytes like the rest of the zip: read with a size bound,
parsed only as a small flat JSON object, every field checked before it is used.
"""

from __future__ import annotations

import io
import json
import zipfile
from dataclasses import dataclass
from pathlib import Path

from labkit import __version__, i18n
from labkit.fileset import Files
from labkit.fsutil import write_atomic
from labkit.results import LabResult, points

RECEIPT_NAME = "labkit-receipt.json"
MAX_RECEIPT_BYTES = 4096  # a receipt is a few hundred bytes; more is not one
FORMAT = 1


@dataclass(frozen=True)
class Receipt:
    lab: str
    digest: str  # of the files graded (`labkit.fileset.digest`)
    score: float
    max_score: float
    labkit_version: str


def receipt_of(result: LabResult) -> Receipt:
    return Receipt(result.lab, result.digest, result.score, result.max_score,
                   result.labkit_version)


def handin_bytes(files: Files, result: LabResult) -> bytes:
    """The hand-in zip: `files` at its root (in a stable order, with a fixed date, so the
    same files give the same zip) and the receipt of `result`, their grading."""
    receipt = receipt_of(result)
    document = {"format": FORMAT, "lab": receipt.lab, "digest": receipt.digest,
                "score": receipt.score, "max_score": receipt.max_score,
                "labkit_version": receipt.labkit_version}
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for rel in sorted(files):
            archive.writestr(zipfile.ZipInfo(rel, date_time=(2020, 1, 1, 0, 0, 0)), files[rel])
        archive.writestr(zipfile.ZipInfo(RECEIPT_NAME, date_time=(2020, 1, 1, 0, 0, 0)),
                         json.dumps(document, indent=2) + "\n")
    return buffer.getvalue()


def write_handin(dest: Path, files: Files, result: LabResult) -> Path:
    """Write the hand-in zip to `dest` (replaced whole, never half-written)."""
    write_atomic(dest, handin_bytes(files, result))
    return dest


def parse_receipt(data: bytes) -> Receipt | None:
    """A receipt from a zip's member, or None for anything that is not one (too big, not
    JSON, nested, a field missing or of another type): a bad receipt is no receipt."""
    if len(data) > MAX_RECEIPT_BYTES:
        return None
    try:
        document = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        return None
    texts = ("lab", "digest", "labkit_version")
    numbers = ("score", "max_score")
    if not all(isinstance(document.get(k), str) and len(document[k]) <= 200 for k in texts):
        return None
    if not all(type(document.get(k)) in (int, float) for k in numbers):
        return None
    return Receipt(document["lab"], document["digest"], float(document["score"]),
                   float(document["max_score"]), document["labkit_version"])


def difference(receipt: Receipt, result: LabResult, lang: str) -> str | None:
    """What the instructor reads when the official grade is not the receipt's: the two
    grades and the likely reason; None when they agree."""
    if (receipt.lab, receipt.digest, receipt.score) == (result.lab, result.digest, result.score):
        return None
    if receipt.lab != result.lab or receipt.digest != result.digest:
        key = "receipt_other_files"
    elif receipt.labkit_version != result.labkit_version:
        key = "receipt_other_kit"
    else:
        key = "receipt_same_files"
    return i18n.t(key, lang, claimed=f"{points(receipt.score)}/{points(receipt.max_score)}",
                  official=f"{points(result.score)}/{points(result.max_score)}",
                  theirs=receipt.labkit_version, ours=result.labkit_version or __version__)
