"""Similarity and LMS layouts: how long a class takes to compare, and to discover.

Builds a synthetic lab02 class of N students as a Canvas download (flat files named as
Canvas names them, some resubmitted as `broadcasting-1.py`): each pasted the lecture's
helpers and wrote code of their own, and one copied another's, disguised. Prints the
time to discover the download, to read every submission, to fingerprint them and to
compare every pair, with the pairs per second. Then the cost of the documents an attacker
would send: a megabyte of the densest code (cut at `MAX_DOCUMENT_CHARS`), a copy behind a
megabyte of comments (left out), set beside one honest submission's.

    python benchmarks/similarity.py [--n 300]

Target on a 2-core machine: a class of 300 compared within a couple of minutes, well
inside the comparison's 600 s deadline.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from similaritykit import LECTURE, disguised, own_code  # noqa: E402

from labkit.classroom import layouts, similarity  # noqa: E402
from labkit.course.catalogue import get_lab  # noqa: E402

SOLUTION = (REPO / "solutions" / "lab02" / "broadcasting.py").read_text()


def build(root: Path, n: int, rng: random.Random) -> None:
    """A class as a Canvas download: each student pasted the lecture's helpers and wrote
    their own code; student 7's is copied, disguised, by the last student."""
    texts = [f"import numpy as np\n{LECTURE}\n\n{own_code(rng, 2)}\n" for _ in range(n - 1)]
    texts.append(disguised(texts[7].replace("total", "acc")))
    for i, text in enumerate(texts):
        user = 1000 + i
        (root / f"student{i}_{user}_{5000 + i}_broadcasting.py").write_text(text)
        if i % 10 == 0:  # resubmitted: the newer copy is the one compared
            (root / f"student{i}_{user}_{9000 + i}_broadcasting-1.py").write_text(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=300)
    args = parser.parse_args()
    lab = get_lab("lab02")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        build(root, args.n, random.Random(18))
        started = time.perf_counter()
        found = layouts.discover(root, lab)
        discovered = time.perf_counter()
        texts, skipped = similarity.documents(lab, root)
        read = time.perf_counter()
        report = similarity.compare(lab, texts)
        compared = time.perf_counter()
    pairs = len(texts) * (len(texts) - 1) // 2
    print(f"{found.layout} download of {len(found.entries)} students "
          f"({len(found.ignored)} ignored): discovered in {discovered - started:.2f} s")
    print(f"read {len(texts)} submissions ({len(skipped)} unreadable) in {read - discovered:.2f} s")
    print(f"fingerprinted and compared {pairs} pairs in {compared - read:.2f} s "
          f"({pairs / max(compared - read, 1e-9):.0f} pairs/s); "
          f"{len(report.flagged)} flagged at {report.threshold:.0%}; the planted copy ranks "
          f"{_rank(report, {'1007', str(1000 + args.n - 1)})} (code in more than "
          f"{report.common} submissions discounted)")
    hostile = {"an honest submission": SOLUTION,
               "1 MB of dense code": "a+" * 2**19,
               "1 MB of short lines": "x = 1\n" * (2**20 // 6),
               "a copy behind 1 MB of comments": "# padding\n" * (2**20 // 10) + SOLUTION}
    for name, text in hostile.items():
        started = time.perf_counter()
        one = similarity.compare(lab, {"a": text, "b": SOLUTION})
        print(f"{name}: {time.perf_counter() - started:.2f} s to compare with one other "
              f"({'cut' if one.cut else 'whole'}, {len(one.documents['a']):,} characters "
              f"of code compared)")


def _rank(report: similarity.SimilarityReport, users: set[str]) -> str:
    for rank, pair in enumerate(report.pairs, start=1):
        if {pair.a, pair.b} == users:
            return f"#{rank} ({pair.score:.0%}, standing out by {pair.standout:+.0%})"
    return "nowhere"


if __name__ == "__main__":
    main()
