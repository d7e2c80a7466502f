"""A class's submissions: find them in a folder and read each one's files safely.

A submissions folder holds one entry per student: a workspace folder or a `.zip` of one
(as LMS downloads come); the student id is the entry's name without `.zip`. Reading an
entry never trusts it: zips are checked before anything is unpacked (no path may leave
the folder, the unpacked size is bounded, members are read with a cap), only the lab's
own files are taken out, into memory (nothing of an entry is ever written), and
anything unusable becomes a `SubmissionError` whose message names the problem, so that
student gets an `error` and the batch goes on.

A lab file may come renamed as browsers and systems rename files (`broadcasting (1).py`,
`Broadcasting.py`): it is graded as the lab's, and the note says so. Two files that
could be one lab file are refused (`batch_two_files`): which one the student meant
cannot be told.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import stat
import zipfile
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from labkit import fileset, i18n, textsafe
from labkit.course.catalogue import LabSpec
from labkit.errors import LabkitError
from labkit.student import handin, locate, workspace

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
    receipt: bytes = b""  # the `labkit submit` receipt beside them, as sent (never graded)


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
        return _with_receipt(_collect(entry, lab, lang, *_unzip(lab, entry.path, max_unpacked)),
                             entry.path)
    if entry.kind == "files":
        return _read_uploads(lab, entry, lang, max_unpacked)
    inner = _single_zip(lab, entry.path)
    if inner is not None:  # an LMS folder holding the zip the student uploaded
        return _with_receipt(_collect(entry, lab, lang, *_unzip(lab, inner, max_unpacked)),
                             inner)
    root = entry.path / _find_root(lab, entry.path, entry)
    chosen, renamed = _in_folder(lab, root)
    return _collect(entry, lab, lang, lambda rel, limit: workspace.read_plain_file(
        root, chosen.get(rel, rel), limit), renamed)


def _with_receipt(collected: Collected, path: Path) -> Collected:
    """`collected`, with the receipt at the root of the zip at `path` if there is one (a
    zip already checked whole by `_unzip`; the member read with `handin`'s size bound)."""
    try:
        with zipfile.ZipFile(path) as archive:
            member = archive.getinfo(handin.RECEIPT_NAME)
            if member.file_size > handin.MAX_RECEIPT_BYTES:
                return collected
            data = _read_member(archive, member, handin.MAX_RECEIPT_BYTES, path.name)
    except (KeyError, zipfile.BadZipFile, OSError, SubmissionError):
        return collected
    return dataclasses.replace(collected, receipt=data)


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


# A browser saving a file again writes `name (1).ext` (Firefox `name(1).ext`)
_BROWSER_COPY = re.compile(r"^(?P<stem>.+?) ?\((?P<copy>[0-9]{1,3})\)(?P<ext>\.[^.]*)?$",
                           re.DOTALL)


def _stands_for(name: str, wanted: str) -> bool:
    """Whether a file named `name` is the lab's file named `wanted` (in the same folder):
    that name, or it as a browser saves a second copy (`broadcasting (1).py`) or a system
    that ignores case keeps it (`Broadcasting.py`)."""
    if name == wanted:
        return True
    copy = _BROWSER_COPY.match(name)
    plain = copy["stem"] + (copy["ext"] or "") if copy else name
    return plain.lower() == wanted.lower()


def _one_of(rel: str, base: str, found: Iterable[tuple[str, str]]) -> tuple[str, str] | None:
    """(name, where it is) of the one item of `found` that is the lab's file `rel` (named
    `base` in its folder); None if none is. Two are refused: which one the student meant
    cannot be told, and keeping either would be a guess."""
    matches = sorted((where, name) for name, where in found if _stands_for(name, base))
    if len(matches) > 1:
        raise SubmissionError("batch_two_files", file=rel,
                              names=", ".join(textsafe.shown(where) for where, _ in matches))
    return (matches[0][1], matches[0][0]) if matches else None


def _marker_prefix(path: str, marker: str) -> str | None:
    """The folder ("" or "a/b/") below which `path` is the lab's file `marker` (its name
    perhaps renamed: `_stands_for`); None if it is not that file."""
    parent, _, name = path.rpartition("/")
    marker_parent, _, marker_name = marker.rpartition("/")
    if not _stands_for(name, marker_name):
        return None
    if not marker_parent:
        return parent + "/" if parent else ""
    if parent == marker_parent:
        return ""
    if parent.endswith("/" + marker_parent):
        return parent[: -len(marker_parent)]
    return None


def _collect(entry: Entry, lab: LabSpec, lang: str, read: workspace.Read,
             renamed: dict[str, str] | None = None) -> Collected:
    """The lab's files as `read` gives them; the note says which renamed file (`renamed`:
    lab file -> where it was) was graded as which lab file, and what the notebook lost."""
    used = set()

    def reading(rel: str, limit: int) -> bytes:
        data = read(rel, limit)
        used.add(rel)
        return data

    try:
        found = workspace.read_submission(lab, reading, lang)
    except workspace.WorkspaceError as exc:
        raise SubmissionError(exc.key, **exc.params) from None
    except (OSError, UnicodeError, ValueError) as exc:
        raise SubmissionError("batch_unreadable", name=entry.name,
                              reason=type(exc).__name__) from None
    notes = [i18n.t("batch_renamed", lang, found=textsafe.shown(where), file=rel)
             for rel, where in (renamed or {}).items() if rel in used]
    note = " ".join(filter(None, ("; ".join(notes), found.note)))
    return Collected(found.files, note, fileset.digest(found.files))


# --- loose uploads ------------------------------------------------------------------------


def _read_uploads(lab: LabSpec, entry: Entry, lang: str, max_unpacked: int) -> Collected:
    """A "files" entry: what one student uploaded, loose in the download (`entry.files`).
    Each lab file is one upload; with none of them, the one `.zip` uploaded is read."""
    chosen, renamed = {}, {}
    for rel in _wanted(lab):
        one = _one_of(rel, rel, entry.files)
        if one is not None:
            chosen[rel] = one[1]
            if one[0] != rel:
                renamed[rel] = one[0]  # the name the student gave it, shown in the note
    if chosen:
        return _collect(entry, lab, lang, lambda rel, limit: _read_loose(
            entry.root, chosen, rel, limit), renamed)
    zips = sorted(where for name, where in entry.files if name.lower().endswith(".zip"))
    if len(zips) > 1:
        raise SubmissionError("batch_two_zips", names=", ".join(map(textsafe.shown, zips)))
    if zips:
        return _collect(entry, lab, lang, *_unzip(lab, entry.root / zips[0], max_unpacked))
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
    if any(lab_file(lab, i.name) for i in items):  # one renamed (`Broadcasting.py`)
        return None
    zips = [i for i in items if i.name.lower().endswith(".zip")
            and i.is_file(follow_symlinks=False)]
    if len(zips) != 1 or any(i.is_dir(follow_symlinks=False) for i in items):
        return None
    return Path(zips[0].path)


def _find_root(lab: LabSpec, folder: Path, entry: Entry) -> str:
    """The folder inside an entry that holds the lab's files ("" for the entry itself,
    usually; else "sub/"), found as `labkit grade` finds a student's (`locate.lab_roots`),
    a renamed lab file (`Broadcasting.py`) counting too."""
    best = set(locate.lab_roots(lab, folder, SEARCH_DEPTH))
    for path in _walk(folder, SEARCH_DEPTH + 1):
        rel = path.relative_to(folder).as_posix()
        for marker in _markers(lab):
            prefix = _marker_prefix(rel, marker)
            if prefix is not None:
                best.add(prefix)
    if not best:
        if not any(True for _ in _walk(folder, 1)):
            raise SubmissionError("batch_empty", name=entry.name)
        raise SubmissionError("batch_no_lab_files", name=entry.name,
                              files=", ".join(lab.files))
    return _pick_prefix(best, entry)


def _in_folder(lab: LabSpec, root: Path) -> tuple[dict[str, str], dict[str, str]]:
    """Where in `root` each lab file is, when a file of another name is it (`_stands_for`),
    and those renamed ones (lab file -> where it is). One named as the lab's is found
    by its name; two that could be one lab file are refused."""
    chosen, renamed = {}, {}
    for rel in _wanted(lab):
        parent, _, base = rel.rpartition("/")
        try:
            names = os.listdir(root / parent)
        except OSError:  # not there, or not a folder: reading the file says which
            continue
        one = _one_of(rel, base, ((n, f"{parent}/{n}" if parent else n) for n in names))
        if one is not None and one[0] != base:
            chosen[rel] = renamed[rel] = one[1]
    return chosen, renamed


def _pick_prefix(candidates: set[str], entry: Entry) -> str:
    shallowest = min(p.count("/") for p in candidates)
    best = sorted(p for p in candidates if p.count("/") == shallowest)
    if len(best) > 1:
        raise SubmissionError("batch_ambiguous", name=entry.name,
                              folders=", ".join(p.rstrip("/") or "." for p in best[:4]))
    return best[0]


# --- zips ---------------------------------------------------------------------------------

_DRIVE = re.compile(r"^[A-Za-z]:")
try:  # what a corrupt LZMA member raises
    from lzma import LZMAError as _LZMAError
except ImportError:  # a Python without lzma: zipfile refuses LZMA members (RuntimeError)
    _LZMAError = zlib.error  # type: ignore[misc, assignment]


def _unzip(lab: LabSpec, path: Path,
           max_unpacked: int) -> tuple[workspace.Read, dict[str, str]]:
    """Check the whole zip, then read only the lab's files (and notebook) out of it: a
    reader of them (`_reader`), and the renamed ones (lab file -> member it was read from)."""
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
        twice: set[str] = set()  # paths two members have (`a/x` and `a\x`, or one name twice)
        for member in members:
            clean = _safe_name(member.filename)
            if clean is None:
                raise SubmissionError("batch_unsafe_zip", name=name,
                                      path=member.filename[:200])
            if clean and not member.is_dir() and clean.split("/")[0] not in _IGNORED:
                if clean in names:
                    twice.add(clean)
                names[clean] = member
        if not names:
            raise SubmissionError("batch_empty", name=name)
        prefix = _zip_prefix(lab, names, path)
        folders: dict[str, list[tuple[str, str]]] = {}  # folder -> (name, member's path)
        for clean in names:
            parent, _, base = clean.rpartition("/")
            folders.setdefault(parent, []).append((base, clean))
        found, renamed = {}, {}
        for rel in _wanted(lab):
            parent, _, base = (prefix + rel).rpartition("/")
            one = _one_of(rel, base, folders.get(parent, ()))
            if one is None:
                continue
            if one[1] in twice:
                raise SubmissionError("batch_two_files", file=rel,
                                      names=", ".join([textsafe.shown(one[1])] * 2))
            member = names[one[1]]
            if one[0] != base:
                renamed[rel] = one[1]
            mode = member.external_attr >> 16
            if stat.S_ISLNK(mode):
                raise SubmissionError("bad_file", path=rel, reason="symlink")
            limit = workspace.MAX_FILE_BYTES if rel.endswith(".py") else (
                getattr(workspace, "NOTEBOOK_MAX_BYTES", workspace.MAX_FILE_BYTES))
            data = _read_member(archive, member, limit, name)
            if len(data) > limit:
                raise SubmissionError("file_too_large", path=rel, limit=limit)
            found[rel] = data
    return _reader(found), renamed


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
            prefix = _marker_prefix(clean, marker)
            if prefix is not None and prefix.count("/") <= SEARCH_DEPTH:
                candidates.add(prefix)
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
