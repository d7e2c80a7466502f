"""A class's submissions: find them in a folder and read each one's files safely.

A submissions folder holds one entry per student: a workspace folder or a `.zip` of one
(as LMS downloads come); the student id is the entry's name without `.zip`. Reading an
entry never trusts it: zips are checked before anything is unpacked (no path may leave
the folder, the unpacked size is bounded, members are read with a cap), only the lab's
own files are taken out, into memory (nothing of an entry is ever written), and
anything unusable becomes a `SubmissionError` whose message names the problem, so that
student gets an `error` and the batch goes on.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import stat
import zipfile
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from labkit import fileset, textsafe
from labkit.course.catalogue import LabSpec
from labkit.errors import LabkitError
from labkit.student import locate, workspace

MAX_UNPACKED_BYTES = 64 * 1024 * 1024  # a zip declaring more than this is refused
MAX_ZIP_MEMBERS = 10_000
SEARCH_DEPTH = locate.SEARCH_DEPTH  # how deep inside an entry the lab's files may sit
_IGNORED = locate.IGNORED
_walk = locate.walk
_markers = locate.markers


class SubmissionError(LabkitError):
    """An entry that cannot be graded; `key` and `params` name a kit message."""


@dataclass(frozen=True, slots=True)
class Entry:
    """One student's entry in the submissions folder (small: a class may have thousands).

    `name` is the name as the file system gave it (what opens the entry); `student` and
    `source` are text safe to store and print (`textsafe.shown`), however the name was
    made: bytes that are not UTF-8 and control characters are escaped.
    """

    student: str
    root: Path  # the submissions folder (one object shared by all entries)
    name: str  # the entry's file or folder name (for "files": the first of its files)
    kind: str  # "folder", "zip" or "files" (loose files of one student, as Canvas gives)
    duplicate_of: str = ""  # set when the same student has another entry too
    files: tuple[tuple[str, str], ...] = ()  # "files": (name uploaded, file name in root)
    late: bool = False  # the LMS marked it late
    person: str = ""  # the student's name, as the LMS or the roster gives it
    email: str = ""
    section: str = ""

    @property
    def path(self) -> Path:
        return self.root / self.name

    @property
    def source(self) -> str:
        return textsafe.shown(self.name)


@dataclass(frozen=True)
class Collected:
    """An entry's lab files, ready to grade, and a note on how they were read."""

    files: dict[str, bytes]
    note: str
    digest: str


def discover(root: Path) -> tuple[list[Entry], list[str]]:
    """The entries of `root` sorted by student, and the names that were ignored.

    Hidden names are skipped silently; files that are not `.zip` and symlinks are
    ignored (and listed, as `textsafe.shown` prints them). A student with both
    `alice/` and `alice.zip` gets both entries marked as duplicates, and so do two
    names that escape to the same id (`a\\xe9`, spelled out, and `a` + the byte 0xE9):
    different entries never become one student silently.
    """
    root = Path(root)
    entries: list[Entry] = []
    ignored: list[str] = []
    with os.scandir(root) as found:
        for item in found:
            if item.name.startswith(".") or item.name in _IGNORED:
                continue
            if item.is_dir(follow_symlinks=False):
                entry = Entry(textsafe.shown(item.name), root, item.name, "folder")
            elif item.is_file(follow_symlinks=False) and item.name.lower().endswith(".zip"):
                entry = Entry(textsafe.shown(item.name[:-4]), root, item.name, "zip")
            else:
                ignored.append(textsafe.shown(item.name))
                continue
            entries.append(entry)
    return one_per_student(entries), sorted(ignored)


def one_per_student(entries: list[Entry]) -> list[Entry]:
    """One entry per student id, sorted; two entries for one id are marked duplicates
    (so that student gets an error naming both, never one of them silently)."""
    groups: dict[str, list[Entry]] = {}
    for entry in entries:
        groups.setdefault(entry.student, []).append(entry)
    result = []
    for student in sorted(groups):
        group = groups[student]
        if len(group) > 1:
            names = ", ".join(sorted(e.source for e in group))
            group = [dataclasses.replace(group[0], duplicate_of=names)]
        result.append(group[0])
    return result


def read(lab: LabSpec, entry: Entry, lang: str,
         max_unpacked: int = MAX_UNPACKED_BYTES) -> Collected:
    """The lab's files of one entry, or `SubmissionError` saying why there are none.

    A zip's lab files are read out of the archive into memory: nothing is written.
    """
    if entry.duplicate_of:
        raise SubmissionError("batch_duplicate", names=entry.duplicate_of)
    if entry.kind == "zip":
        members = _unzip(lab, entry.path, max_unpacked)
        return _collect(entry, lambda: workspace.read_submission(lab, _reader(members), lang))
    if entry.kind == "files":
        return _read_uploads(lab, entry, lang, max_unpacked)
    inner = _single_zip(lab, entry.path)
    if inner is not None:  # an LMS folder holding the zip the student uploaded
        members = _unzip(lab, inner, max_unpacked)
        return _collect(entry, lambda: workspace.read_submission(lab, _reader(members), lang))
    root = _find_root(lab, entry.path, entry)
    return _collect(entry, lambda: workspace.collect_submission(lab, root, lang))


def error_digest(entry: Entry) -> str:
    """A fingerprint of an entry that could not be read, so a rerun can tell if it changed."""
    h = hashlib.sha256()
    try:
        if entry.kind == "zip":
            with open(entry.path, "rb") as handle:
                h.update(hashlib.file_digest(handle, "sha256").digest())
        elif entry.kind == "files":
            for rel, name in entry.files:
                info = os.lstat(entry.root / name)
                h.update(f"{rel}\0{name}\0{info.st_size}\0{info.st_mtime_ns}\0"
                         .encode("utf-8", "surrogateescape"))
        else:
            for path in sorted(_walk(entry.path, SEARCH_DEPTH + 1)):
                info = os.lstat(path)
                h.update(f"{path.relative_to(entry.path)}\0{info.st_size}\0{info.st_mtime_ns}\0"
                         .encode("utf-8", "surrogateescape"))
    except OSError as exc:
        h.update(str(exc).encode())
    return "sha256:" + h.hexdigest()


def lab_file(lab: LabSpec, name: str) -> str | None:
    """The lab's file (or its notebook) that an uploaded file named `name` is, if any."""
    return next((rel for rel in _wanted(lab) if _stands_for(name, rel)), None)


def _wanted(lab: LabSpec) -> tuple[str, ...]:
    return (*lab.files, f"{lab.id}.ipynb")


def _stands_for(name: str, wanted: str) -> bool:
    """Whether a file named `name` is the lab's file named `wanted` (in the same folder)."""
    return name == wanted


def _one_of(rel: str, base: str, found: Iterable[tuple[str, str]]) -> str | None:
    """Where the one item of `found` ((name, where it is)) that is the lab's file `rel`
    (named `base` in its folder) is; None if none is. Two are refused: which one the
    student meant cannot be told, and keeping either would be a guess."""
    matches = sorted(where for name, where in found if _stands_for(name, base))
    if len(matches) > 1:
        raise SubmissionError("batch_two_files", file=rel,
                              names=", ".join(textsafe.shown(m) for m in matches))
    return matches[0] if matches else None


# --- loose uploads ------------------------------------------------------------------------


def _read_uploads(lab: LabSpec, entry: Entry, lang: str, max_unpacked: int) -> Collected:
    """A "files" entry: what one student uploaded, loose in the download (`entry.files`).
    Each lab file is one upload; with none of them, the one `.zip` uploaded is read."""
    chosen = {}
    for rel in _wanted(lab):
        where = _one_of(rel, rel, entry.files)
        if where is not None:
            chosen[rel] = where
    if chosen:
        return _collect(entry, lambda: workspace.read_submission(
            lab, lambda rel, limit: _read_loose(entry.root, chosen, rel, limit), lang))
    zips = sorted(where for name, where in entry.files if name.lower().endswith(".zip"))
    if len(zips) > 1:
        raise SubmissionError("batch_two_zips", names=", ".join(map(textsafe.shown, zips)))
    if zips:
        members = _unzip(lab, entry.root / zips[0], max_unpacked)
        return _collect(entry, lambda: workspace.read_submission(lab, _reader(members), lang))
    raise SubmissionError("batch_no_lab_files", name=entry.name, files=", ".join(lab.files))


def _read_loose(root: Path, names: dict[str, str], rel: str, limit: int) -> bytes:
    """A lab file of a "files" entry: `names` maps it to its file in `root`."""
    if rel not in names:
        raise FileNotFoundError(rel)
    return workspace.read_plain_file(root, names[rel], limit)


# --- folders ------------------------------------------------------------------------------


def _single_zip(lab: LabSpec, folder: Path) -> Path | None:
    """The one `.zip` a folder holds at its top, when it holds none of the lab's files.

    LMSs keep what a student uploaded as it was: a zip stays a zip, read like any other.
    """
    if any(os.path.lexists(folder / m) for m in (*lab.files, *_markers(lab))):
        return None
    try:
        with os.scandir(folder) as found:
            items = [i for i in found if not i.name.startswith(".") and i.name not in _IGNORED]
    except OSError:
        return None
    zips = [i for i in items if i.name.lower().endswith(".zip")
            and i.is_file(follow_symlinks=False)]
    if len(zips) != 1 or any(i.is_dir(follow_symlinks=False) for i in items):
        return None
    return Path(zips[0].path)


def _find_root(lab: LabSpec, folder: Path, entry: Entry) -> Path:
    """The folder inside an entry that holds the lab's files (the entry itself, usually),
    found as `labkit grade` finds a student's (`locate.lab_roots`)."""
    best = locate.lab_roots(lab, folder, SEARCH_DEPTH)
    if not best:
        if not any(True for _ in _walk(folder, 1)):
            raise SubmissionError("batch_empty", name=entry.name)
        raise SubmissionError("batch_no_lab_files", name=entry.name,
                              files=", ".join(lab.files))
    return folder / _pick_prefix(set(best), entry)


def _pick_prefix(candidates: set[str], entry: Entry) -> str:
    shallowest = min(p.count("/") for p in candidates)
    best = sorted(p for p in candidates if p.count("/") == shallowest)
    if len(best) > 1:
        raise SubmissionError("batch_ambiguous", name=entry.name,
                              folders=", ".join(p.rstrip("/") or "." for p in best[:4]))
    return best[0]


def _collect(entry: Entry, collect: Callable[[], workspace.Submission]) -> Collected:
    try:
        found = collect()
    except workspace.WorkspaceError as exc:
        raise SubmissionError(exc.key, **exc.params) from None
    except (OSError, UnicodeError, ValueError) as exc:
        raise SubmissionError("batch_unreadable", name=entry.name,
                              reason=type(exc).__name__) from None
    return Collected(found.files, found.note, fileset.digest(found.files))


# --- zips ---------------------------------------------------------------------------------

_DRIVE = re.compile(r"^[A-Za-z]:")
try:  # what a corrupt LZMA member raises
    from lzma import LZMAError as _LZMAError
except ImportError:  # a Python without lzma: zipfile refuses LZMA members (RuntimeError)
    _LZMAError = zlib.error  # type: ignore[misc, assignment]


def _unzip(lab: LabSpec, path: Path, max_unpacked: int) -> dict[str, bytes]:
    """Check the whole zip, then read only the lab's files (and notebook) out of it:
    `{path inside the lab: bytes}`."""
    name = path.name
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError,
            NotImplementedError) as exc:  # NotImplementedError: a member's "version needed"
        raise SubmissionError("batch_bad_zip", name=name, reason=_reason(exc)) from None
    with archive:
        members = archive.infolist()
        if len(members) > MAX_ZIP_MEMBERS:
            raise SubmissionError("batch_zip_bomb", name=name, limit=max_unpacked // 2**20)
        if sum(m.file_size for m in members) > max_unpacked:
            raise SubmissionError("batch_zip_bomb", name=name, limit=max_unpacked // 2**20)
        names: dict[str, zipfile.ZipInfo] = {}
        member: zipfile.ZipInfo | None  # reused below for names.get(), which may be None
        for member in members:
            clean = _safe_name(member.filename)
            if clean is None:
                raise SubmissionError("batch_unsafe_zip", name=name,
                                      path=member.filename[:200])
            if clean and not member.is_dir() and clean.split("/")[0] not in _IGNORED:
                names[clean] = member
        if not names:
            raise SubmissionError("batch_empty", name=name)
        prefix = _zip_prefix(lab, names, path)
        wanted = [*lab.files, f"{lab.id}.ipynb"]
        found = {}
        for rel in wanted:
            member = names.get(prefix + rel)
            if member is None:
                continue
            mode = member.external_attr >> 16
            if stat.S_ISLNK(mode):
                raise SubmissionError("bad_file", path=rel, reason="symlink")
            limit = workspace.MAX_FILE_BYTES if rel.endswith(".py") else (
                getattr(workspace, "NOTEBOOK_MAX_BYTES", workspace.MAX_FILE_BYTES))
            data = _read_member(archive, member, limit, name)
            if len(data) > limit:
                raise SubmissionError("file_too_large", path=rel, limit=limit)
            found[rel] = data
    return found


def _reader(members: dict[str, bytes]) -> workspace.Read:
    """Reads the lab's files from a zip's members as they are read from a folder: a
    missing one is `FileNotFoundError`, one over the size limit is refused."""

    def read(rel: str, limit: int) -> bytes:
        if rel not in members:
            raise FileNotFoundError(rel)
        if len(members[rel]) > limit:
            raise workspace.WorkspaceError("file_too_large", path=rel, limit=limit)
        return members[rel]

    return read


def _safe_name(raw: str) -> str | None:
    """The member's path, normalised; None if it is absolute or climbs out (`..`)."""
    text = raw.replace("\\", "/")
    if text.startswith("/") or _DRIVE.match(text) or "\0" in text:
        return None
    parts = [p for p in PurePosixPath(text).parts if p not in ("", ".")]
    if ".." in parts:
        return None
    return "/".join(parts)


def _zip_prefix(lab: LabSpec, names: dict[str, zipfile.ZipInfo], path: Path) -> str:
    candidates = set()
    for clean in names:
        for marker in _markers(lab):
            if clean == marker:
                candidates.add("")
            elif (clean.endswith("/" + marker)
                  and clean.count("/") <= SEARCH_DEPTH + marker.count("/")):
                candidates.add(clean[: -len(marker)])
    if not candidates:
        raise SubmissionError("batch_no_lab_files", name=path.name, files=", ".join(lab.files))
    return _pick_prefix(candidates, Entry(path.stem, path.parent, path.name, "zip"))


def _read_member(archive: zipfile.ZipFile, member: zipfile.ZipInfo, limit: int,
                 name: str) -> bytes:
    """At most `limit + 1` bytes of a member: a lying size header cannot make us read more."""
    if member.flag_bits & 0x1:
        raise SubmissionError("batch_bad_zip", name=name, reason="encrypted")
    try:
        with archive.open(member) as handle:
            return handle.read(limit + 1)
    except (zipfile.BadZipFile, zlib.error, _LZMAError, NotImplementedError, RuntimeError, OSError,
            EOFError, ValueError) as exc:
        raise SubmissionError("batch_bad_zip", name=name, reason=_reason(exc)) from None


def _reason(exc: BaseException) -> str:
    text = str(exc).splitlines()[0][:120] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
