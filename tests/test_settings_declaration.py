"""The editor's settings are declared once (trainlint.settings.EDITOR_SETTINGS): the VS Code
extension's package.json and settings.ts, and the table in docs/editors.md, say the same."""

from __future__ import annotations

import json
import re
from pathlib import Path

from trainlint.settings import EDITOR_SETTINGS, EditorSettings

ROOT = Path(__file__).resolve().parent.parent
DECLARED = {setting.key: setting for setting in EDITOR_SETTINGS}
# The extension's own settings (how to start the server), which the server never sees.
EXTENSION_ONLY = {"path", "interpreter"}


def test_package_json_declares_each_setting_with_its_type_default_and_description():
    manifest = json.loads((ROOT / "vscode-extension" / "package.json").read_text(encoding="utf-8"))
    properties = manifest["contributes"]["configuration"]["properties"]
    server_keys = {key.removeprefix("trainlint.") for key in properties} - EXTENSION_ONLY
    assert server_keys == set(DECLARED)
    for key, setting in DECLARED.items():
        entry = properties[f"trainlint.{key}"]
        json_type = entry["type"] if isinstance(entry["type"], str) else tuple(entry["type"])
        assert (json_type, entry["default"], entry["markdownDescription"]) == (
            setting.json_type, setting.default, setting.description
        ), key


def test_settings_ts_forwards_exactly_the_declared_keys():
    source = (ROOT / "vscode-extension" / "src" / "settings.ts").read_text(encoding="utf-8")
    listed = re.search(r"SERVER_SETTING_KEYS = \[([^\]]*)\]", source)
    assert listed is not None
    assert re.findall(r'"([^"]+)"', listed.group(1)) == [setting.key for setting in EDITOR_SETTINGS]


def test_docs_list_each_setting_with_its_default():
    text = (ROOT / "docs" / "editors.md").read_text(encoding="utf-8")
    section = text.split("## Settings", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    documented: dict[str, str] = {}
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        for key in re.findall(r"`([A-Za-z]+)`", cells[0]):
            documented[key] = cells[-1]
    assert set(documented) == set(DECLARED)
    for key, setting in DECLARED.items():
        if setting.default not in (None, "", {}):  # an unset default reads "the project's ..." in words
            assert documented[key] == f"`{json.dumps(setting.default)}`", key


def test_the_server_defaults_are_the_declared_defaults():
    defaults = EditorSettings()
    for setting in EDITOR_SETTINGS:
        expected = setting.convert(setting.default) if setting.default is not None else None
        assert getattr(defaults, setting.attribute) == expected, setting.key
