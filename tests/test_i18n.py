"""Every text a student reads exists in English and Spanish."""

from __future__ import annotations

import string
import tomllib
from pathlib import Path

import pytest

from labkit import i18n
from labkit.course.catalogue import catalogue, lab_checks

MESSAGES = tomllib.loads((Path(i18n.__file__).with_name("messages.toml")).read_text())
LABS = [lab for lab in catalogue() if (lab.grader_dir / "checks.toml").is_file()]


def fields(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name}


@pytest.mark.parametrize("key", sorted(MESSAGES))
def test_kit_messages_exist_in_both_languages_with_the_same_fields(key):
    en, es = MESSAGES[key]["en"], MESSAGES[key]["es"]
    assert en and es
    assert fields(en) == fields(es)


@pytest.mark.parametrize("lab", LABS, ids=lambda lab: lab.id)
def test_lab_texts_exist_in_both_languages(lab):
    specs = lab_checks(lab)
    for spec in specs.checks:
        for texts in (spec.title, spec.fail, spec.hint):
            assert texts.get("en") and texts.get("es"), spec.id
    for key, texts in specs.messages.items():
        assert texts.get("en") and texts.get("es"), key
        assert fields(texts["en"]) == fields(texts["es"]), key
    assert lab.title.get("en") and lab.title.get("es")
    assert (lab.exercise_dir / "README.md").is_file()
    assert (lab.exercise_dir / "README.es.md").is_file()


@pytest.mark.parametrize(
    ("explicit", "environ", "expected"),
    [
        ("es", {"LANG": "en_US.UTF-8"}, "es"),
        (None, {"LANG": "es_AR.UTF-8"}, "es"),
        (None, {"LC_ALL": "en_GB.UTF-8", "LANG": "es_ES.UTF-8"}, "en"),
        (None, {"LC_MESSAGES": "es", "LANG": "en_US"}, "es"),
        (None, {"LANG": "fr_FR.UTF-8"}, "en"),
        (None, {"LANG": "C.UTF-8"}, "en"),
        (None, {}, "en"),
    ],
)
def test_language_detection(explicit, environ, expected):
    assert i18n.detect_lang(explicit, environ) == expected
