"""How learning platforms lay a class's submissions out, and which entry is whose.

`discover(root, layout)` turns a download into `Entry`s (see `labkit.classroom.submissions`)
keyed by the platform's own student id, and lists what it could not place, with a reason:

- `folders`: one folder or `.zip` per student, named by the student (labkit's own).
- `canvas`: "Download submissions" gives one flat folder of files named
  `login_[late_]userid_attachmentid_filename`, lower-cased (older downloads: `LATE`); a
  file uploaded again is renamed `filename-1.py`, `filename-2.py`... Files are grouped by
  user id and the newest copy of each uploaded name is kept; `late` marks the entry late.
- `moodle`: "Download all submissions" gives `Full Name_participantid_assignsubmission_file_/`
  folders (or, without "download in folders", flat files with that prefix); online-text
  folders (`..._assignsubmission_onlinetext_`) are not code and are listed as ignored.

The LMS's prefix is read from the left, as far as the LMS writes it: what follows is the
name the student gave the file, which may imitate anything (another student's prefix)
and never moves the file to another entry. A student's loose files are one entry: its
lab files, or else the one `.zip` uploaded; two uploads that could be one lab file are
refused when the entry is read (`labkit.classroom.submissions`), never merged.
- `gradescope`: the "Export Submissions" folder: `submission_metadata.yml` maps each
  `submission_N/` folder to its submitters (`:name:`, `:sid:`, `:email:`). Its zip
  unpacks into `assignment_<id>_export/`: a download that holds only a folder that is an
  LMS's download is read inside it (`Discovered.inside`).

Names are the students' own text: ids and names are stored as `textsafe.shown` gives them.
The metadata file is bounded in size before it is parsed.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from labkit import textsafe
from labkit.classroom import submissions
from labkit.classroom.submissions import Entry
from labkit.course.catalogue import LabSpec
from labkit.errors import EnglishError

LAYOUTS = ("canvas", "moodle", "gradescope", "folders")
GRADESCOPE_METADATA = "submission_metadata.yml"
MAX_METADATA_BYTES = 16 * 1024 * 1024
MAX_METADATA_NODES = 1_000_000
MAX_ITEMS = 100_000  # entries of a download folder looked at, at most

# Each LMS's prefix is read from the left, as far as the LMS writes it, and what follows
# is the student's uploaded name, whatever it holds (another prefix, say). Canvas takes
# every `_digits_` out of the login it writes, so the first `_user_attachment_` after it
# is its own; Moodle writes the full name with every `_` made a space, so its first `_`
# ends the name. Ids are ASCII digits (`\d` would take any script's).
_CANVAS = re.compile(r"^(?P<login>[^_]*(?:_(?![0-9]+_)[^_]*)*?)_(?:(?P<late>late|LATE)_)?"
                     r"(?P<user>[0-9]+)_(?P<attachment>[0-9]+)_(?P<file>.+)$", re.DOTALL)
_MOODLE = re.compile(r"^(?P<person>[^_]*)_(?P<participant>[0-9]+)_assignsubmission_"
                     r"(?P<plugin>[a-z0-9]+)_(?P<file>.*)$", re.DOTALL)
_COPY = re.compile(r"^(?P<stem>.+?)-(?P<copy>\d+)(?P<ext>\.[^.]+)?$", re.DOTALL)


class LayoutError(EnglishError):
    """The download cannot be read as the layout asked for (one line, for the CLI)."""


@dataclass(frozen=True)
class Ignored:
    """Something of the download that is no student's entry, and why."""

    name: str  # as `textsafe.shown` prints it
    reason: str
    expected: bool = False  # what the layout is known to hold besides code (online text)


@dataclass(frozen=True)
class Discovered:
    layout: str
    entries: list[Entry]
    ignored: list[Ignored]
    inside: str = ""  # the one folder the download was found in, if it was wrapped in one

    @property
    def mostly_ignored(self) -> bool:
        """More of the download left out than placed: the layout is most likely wrong."""
        unplaced = sum(not i.expected for i in self.ignored)
        return unplaced > len(self.entries)


def discover(root: Path, lab: LabSpec, layout: str = "auto") -> Discovered:
    """The entries of a download in `layout` ("auto": the one its names say)."""
    root = Path(root)
    names = _names(root)
    inside = _wrapped(root, names, layout)
    if inside:
        root, names = root / inside, _names(root / inside)
    chosen = detect(root, names) if layout == "auto" else layout
    if chosen == "canvas":
        found = _canvas(root, lab, names)
    elif chosen == "moodle":
        found = _moodle(root, lab, names)
    elif chosen == "gradescope":
        found = _gradescope(root, names)
    elif chosen == "folders":
        entries, ignored = submissions.discover(root)
        found = Discovered("folders", entries, [Ignored(n, "neither a folder nor a .zip")
                                                for n in ignored])
    else:
        raise LayoutError(f"unknown layout {layout!r} (choose from auto, {', '.join(LAYOUTS)})")
    return dataclasses.replace(found, inside=inside)


def _wrapped(root: Path, names: list[tuple[str, bool]], layout: str) -> str:
    """The one folder `root` holds, when that folder is an LMS's download (Gradescope's
    zip unpacks into `assignment_<id>_export/`; any zip may be unpacked into a folder of
    its name): read as plain folders, it would be one student. "" otherwise."""
    if len(names) != 1 or not names[0][1] or layout == "folders":
        return ""
    inner = detect(root / names[0][0])
    return names[0][0] if inner != "folders" and layout in ("auto", inner) else ""


def detect(root: Path, names: Iterable[tuple[str, bool]] | None = None) -> str:
    """The layout whose naming most of the download follows; `folders` when none does."""
    items = list(_names(root) if names is None else names)
    if any(name == GRADESCOPE_METADATA and not is_dir for name, is_dir in items):
        return "gradescope"
    moodle = sum(bool(_MOODLE.match(name)) for name, _ in items)
    canvas = sum(bool(_CANVAS.match(name)) for name, is_dir in items if not is_dir)
    if items and moodle * 2 > len(items):
        return "moodle"
    if items and canvas * 2 > len(items):
        return "canvas"
    return "folders"


def _names(root: Path) -> list[tuple[str, bool]]:
    """(name, is a real folder) of the download's visible items."""
    found = []
    try:
        with os.scandir(root) as items:
            for item in items:
                if item.name.startswith(".") or item.name in ("__MACOSX",):
                    continue
                found.append((item.name, item.is_dir(follow_symlinks=False)))
                if len(found) > MAX_ITEMS:
                    raise LayoutError(f"{root} holds more than {MAX_ITEMS} entries")
    except OSError as exc:
        raise LayoutError(f"{root} cannot be read: {exc.strerror}") from None
    return sorted(found)


# --- Canvas -------------------------------------------------------------------------------


def _canvas(root: Path, lab: LabSpec, names: list[tuple[str, bool]]) -> Discovered:
    ignored: list[Ignored] = []
    users: dict[str, list[re.Match[str]]] = {}
    for name, is_dir in names:
        match = None if is_dir else _CANVAS.match(name)
        if match is None or not (root / name).is_file() or (root / name).is_symlink():
            ignored.append(Ignored(textsafe.shown(name), "not a file named as Canvas names "
                                   "submissions (login_[late_]userid_id_filename)"))
            continue
        users.setdefault(match["user"], []).append(match)
    wanted = (*lab.files, f"{lab.id}.ipynb")
    entries = []
    for user, files in users.items():
        # Canvas renames a file uploaded again `name-N.ext`: of each uploaded name, its
        # newest copy is the one to grade. Two uploads of one name and copy stay, and
        # reading the entry refuses them: which one was meant cannot be told.
        chosen: dict[str, tuple[int, list[re.Match[str]]]] = {}
        for match in files:
            original, copy = _original(match["file"], wanted)
            if original not in chosen or chosen[original][0] < copy:
                chosen[original] = (copy, [match])
            elif chosen[original][0] == copy:
                chosen[original][1].append(match)
        uploads = sorted((original, m.string) for original, (_, kept) in chosen.items()
                         for m in kept)
        lab_files = [name for original, name in uploads if submissions.lab_file(lab, original)]
        zips = sorted(((copy, int(m["attachment"])), m) for name, (copy, kept) in chosen.items()
                      for m in kept if name.lower().endswith(".zip"))
        newest = max(files, key=lambda m: int(m["attachment"]))
        late = any(m["late"] for _, kept in chosen.values() for m in kept)
        login = textsafe.shown(newest["login"])
        if not lab_files and zips:  # a zip of the workspace, read as any zip
            zip_name = zips[-1][1].string
            entries.append(Entry(user, root, zip_name, "zip", late=late, person=login))
        else:
            first = lab_files[0] if lab_files else newest.string
            entries.append(Entry(user, root, first, "files", files=tuple(uploads), late=late,
                                 person=login))
    return Discovered("canvas", submissions.one_per_student(entries), ignored)


def _original(name: str, wanted: tuple[str, ...]) -> tuple[str, int]:
    """(the uploaded file's own name, which copy of it: 0 the first upload, N its `-N`)."""
    if name in wanted:
        return name, 0
    match = _COPY.match(name)
    if match:
        original = match["stem"] + (match["ext"] or "")
        return original, int(match["copy"])
    return name, 0


# --- Moodle -------------------------------------------------------------------------------


def _moodle(root: Path, lab: LabSpec, names: list[tuple[str, bool]]) -> Discovered:
    ignored: list[Ignored] = []
    entries: list[Entry] = []
    loose: dict[str, list[tuple[str, str]]] = {}
    people: dict[str, str] = {}
    for name, is_dir in names:
        match = _MOODLE.match(name)
        if match is None:
            ignored.append(Ignored(textsafe.shown(name), "not named as Moodle names "
                                   "submissions (Full Name_id_assignsubmission_file_)"))
            continue
        participant, person = match["participant"], textsafe.shown(match["person"])
        if match["plugin"] != "file":
            ignored.append(Ignored(textsafe.shown(name),
                                   f"Moodle {match['plugin']} submission, not files",
                                   expected=True))
        elif is_dir and not match["file"]:
            entries.append(Entry(participant, root, name, "folder", person=person))
        elif not is_dir and match["file"] and not (root / name).is_symlink():
            loose.setdefault(participant, []).append((match["file"], name))
            people[participant] = person
        else:
            ignored.append(Ignored(textsafe.shown(name), "not a folder or file of a Moodle "
                                   "file submission"))
    for participant, files in loose.items():
        # all of a participant's loose files are one entry: its lab files, or else the
        # one zip it uploaded (several: reading the entry says so)
        files.sort()
        lab_files = [name for uploaded, name in files if submissions.lab_file(lab, uploaded)]
        zips = [name for uploaded, name in files if uploaded.lower().endswith(".zip")]
        if not lab_files and len(zips) == 1:
            entries.append(Entry(participant, root, zips[0], "zip", person=people[participant]))
        else:
            first = (lab_files or zips or [files[0][1]])[0]
            entries.append(Entry(participant, root, first, "files", files=tuple(files),
                                 person=people[participant]))
    return Discovered("moodle", submissions.one_per_student(entries), ignored)


# --- Gradescope ---------------------------------------------------------------------------


def _gradescope(root: Path, names: list[tuple[str, bool]]) -> Discovered:
    metadata = _metadata(root / GRADESCOPE_METADATA)
    folders = {name for name, is_dir in names if is_dir}
    ignored: list[Ignored] = []
    entries: list[Entry] = []
    for folder, info in metadata.items():
        if folder not in folders:
            ignored.append(Ignored(textsafe.shown(folder), f"listed in {GRADESCOPE_METADATA} "
                                   "but not in the download"))
            continue
        submitters = info.get(":submitters") if isinstance(info, dict) else None
        if not isinstance(submitters, list) or not submitters:
            ignored.append(Ignored(textsafe.shown(folder), "no submitter in "
                                   f"{GRADESCOPE_METADATA}"))
            continue
        for submitter in submitters:  # a group submission counts for each of its members
            if not isinstance(submitter, dict):
                continue
            sid, email = _text(submitter.get(":sid")), _text(submitter.get(":email"))
            student = sid or email
            if not student:
                ignored.append(Ignored(textsafe.shown(folder), "a submitter with no student "
                                       "id or email"))
                continue
            entries.append(Entry(student, root, folder, "folder", email=email,
                                 person=_text(submitter.get(":name"))))
    for name, _ in names:
        if name != GRADESCOPE_METADATA and name not in metadata:
            ignored.append(Ignored(textsafe.shown(name), f"not in {GRADESCOPE_METADATA}"))
    return Discovered("gradescope", submissions.one_per_student(entries), ignored)


def _metadata(path: Path) -> dict[str, Any]:
    import yaml  # only a Gradescope download needs it

    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_METADATA_BYTES + 1)
    except OSError as exc:
        raise LayoutError(f"{path} cannot be read: {exc.strerror}") from None
    if len(data) > MAX_METADATA_BYTES:
        raise LayoutError(f"{path} is larger than {MAX_METADATA_BYTES // 2**20} MiB")
    try:
        # BaseLoader: every scalar stays text (no dates, numbers or tags to construct)
        parsed = yaml.load(data, Loader=yaml.BaseLoader)  # noqa: S506
    except yaml.YAMLError as exc:
        raise LayoutError(f"{path} is not valid YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(parsed, dict):
        raise LayoutError(f"{path} is not a Gradescope submission metadata file")
    budget = [MAX_METADATA_NODES]
    return {str(k): _plain(v, budget, 0) for k, v in parsed.items()}


def _plain(value: Any, budget: list[int], depth: int) -> Any:
    """A copy of the parsed value, refusing one that aliases expand past a node budget
    or that nests deeper than Gradescope's own file does."""
    budget[0] -= 1
    if budget[0] < 0 or depth > 8:
        raise LayoutError(f"{GRADESCOPE_METADATA} is larger or deeper than a Gradescope "
                          "export's")
    if isinstance(value, dict):
        return {str(k): _plain(v, budget, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v, budget, depth + 1) for v in value]
    return value


def _text(value: Any) -> str:
    return textsafe.shown(str(value)).strip() if value not in (None, "") else ""
