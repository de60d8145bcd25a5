"""Effect files: one `define_effect` per `effects/<name>.py`, named by the stem; mistakes
name the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from weft.definitions import DefinitionError, load_directory

EFFECT = """
from pydantic import BaseModel
from weft.definitions import define_effect


class Args(BaseModel):
    text: str


def run(state, args):
    return args.text


effect = define_effect(args=Args, execute=run{extra})
"""


def effects_dir(tmp_path: Path, files: dict[str, str]) -> Path:
    folder = tmp_path / "effects"
    folder.mkdir(parents=True)
    for stem, body in files.items():
        (folder / f"{stem}.py").write_text(body)
    return tmp_path


def test_an_effect_file_is_loaded_under_its_stem(tmp_path: Path) -> None:
    definitions = load_directory(effects_dir(tmp_path, {"remind": EFFECT.format(extra="")}))
    assert list(definitions.effects) == ["remind"]
    assert definitions.effects["remind"].args.model_json_schema()["required"] == ["text"]


@pytest.mark.parametrize(
    ("stem", "body", "expected"),
    [
        ("bad name", EFFECT.format(extra=""), r"effects/bad name.py: name: the file stem"),
        ("remind", EFFECT.format(extra=", name='other'"), r"differs from the file stem"),
        ("remind", EFFECT.format(extra=", args=1"), r"effects/remind.py: .*keyword argument"),
        ("remind", "x = 1\n", r"effects/remind.py: must define exactly one effect"),
        ("remind", EFFECT.format(extra=", name='a b'"), r"effects/remind.py: name: 'a b' must"),
    ],
)
def test_a_bad_effect_file_names_the_file(
    tmp_path: Path, stem: str, body: str, expected: str
) -> None:
    with pytest.raises(DefinitionError, match=expected):
        load_directory(effects_dir(tmp_path, {stem: body}))
