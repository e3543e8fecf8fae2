from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from trainlint.analysis.findings import Severity
from trainlint.analysis.rules.base import Rule
from trainlint.analysis.selection import resolve_selector
from trainlint.cli import main
from trainlint.config import (
    ConfigError,
    engine_codes_in,
    find_config_file,
    load_config,
    without_engine_codes,
)
from trainlint.linter import Linter


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def test_reads_every_key_from_pyproject(tmp_path):
    pyproject = write(tmp_path / "pyproject.toml", """
        [project]
        name = "demo"

        [tool.trainlint]
        select = ["TL1", "unseeded-run"]
        ignore = ["TL101"]
        exclude = ["generated/", "*_pb2.py"]
        fail-on = "warning"
        target-gpu = "A100-80GB"

        [tool.trainlint.severity]
        retained-graph = "note"

        [tool.trainlint.per-file-ignores]
        "tests/**" = ["TL101", "unseeded-run"]
    """)
    config = load_config(pyproject)
    assert config.source == pyproject
    assert config.root == tmp_path
    assert config.select == ("TL1", "unseeded-run")
    assert config.ignore == ("TL101",)
    assert config.exclude == ("generated/", "*_pb2.py")
    assert config.fail_on is Severity.WARNING
    assert config.target_gpu == "A100-80GB"
    assert config.severity == {"TL101": Severity.NOTE}
    assert config.per_file_ignores.codes_for(tmp_path / "tests" / "unit" / "test_x.py") == {"TL101", "TL401"}
    assert config.per_file_ignores.codes_for(tmp_path / "src" / "train.py") == frozenset()


def test_defaults_when_the_table_is_empty(tmp_path):
    config = load_config(write(tmp_path / "trainlint.toml", ""))
    assert (config.select, config.ignore, config.exclude) == ((), (), ())
    assert config.fail_on is Severity.ERROR
    assert config.target_gpu is None
    assert not config.per_file_ignores


def test_trainlint_toml_is_a_top_level_table(tmp_path):
    config = load_config(write(tmp_path / "trainlint.toml", """
        select = ["TL101"]
        [severity]
        TL101 = "warning"
    """))
    assert config.select == ("TL101",)
    assert config.severity == {"TL101": Severity.WARNING}


def test_dotted_keys_of_up_to_16_parts_are_read_and_longer_ones_refused(tmp_path):
    """Python's TOML reader takes time that grows with the square of a key's parts; the dots
    inside strings, comments and floats are no parts."""
    sixteen = ".".join(["a"] * 16)
    text = f"""
        [tool.trainlint]
        exclude = ["{sixteen}"]  # {sixteen}.{sixteen}

        [tool.other.{".".join(["b"] * 14)}]
        {sixteen} = '''{sixteen}.{sixteen}
        {sixteen}'''
        floats = [1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5, 8.5, 9.5, 10.5, 11.5, 12.5, 13.5, 14.5, 15.5, 16.5, 17.5]
    """
    config = load_config(write(tmp_path / "pyproject.toml", text))
    assert config.exclude == (sixteen,)
    write(tmp_path / "pyproject.toml", text + f"{sixteen}.z = 1\n")
    with pytest.raises(ConfigError, match=r"pyproject.toml: invalid TOML: a dotted key of more than 16 parts on line 8$"):
        load_config(tmp_path / "pyproject.toml")


class TestFinding:
    def test_nearest_config_walking_up(self, tmp_path):
        outer = write(tmp_path / "pyproject.toml", "[tool.trainlint]\n")
        inner = write(tmp_path / "pkg" / "pyproject.toml", "[tool.trainlint]\nfail-on = 'note'\n")
        (tmp_path / "pkg" / "deep" / "er").mkdir(parents=True)
        assert find_config_file(tmp_path / "pkg" / "deep" / "er") == inner
        assert find_config_file(tmp_path / "other.py") == outer

    def test_pyproject_without_the_table_is_passed_over(self, tmp_path):
        outer = write(tmp_path / "pyproject.toml", "[tool.trainlint]\n")
        write(tmp_path / "sub" / "pyproject.toml", "[project]\nname = 'x'\n")
        assert find_config_file(tmp_path / "sub") == outer

    def test_trainlint_toml_wins_in_the_same_folder(self, tmp_path):
        write(tmp_path / "pyproject.toml", "[tool.trainlint]\nfail-on = 'note'\n")
        own = write(tmp_path / "trainlint.toml", "fail-on = 'warning'\n")
        assert find_config_file(tmp_path) == own
        assert Linter().config_for(tmp_path / "a.py").fail_on is Severity.WARNING

    def test_no_config_means_defaults_rooted_at_cwd(self, tmp_path, monkeypatch):
        monkeypatch.chdir(tmp_path)
        (tmp_path / "a.py").write_text("")
        config = Linter().config_for(Path("a.py"))
        assert config.source is None
        assert config.root == tmp_path

    def test_each_file_gets_its_nearest_configuration(self, tmp_path):
        top = write(tmp_path / "trainlint.toml", "")
        inner = write(tmp_path / "a" / "trainlint.toml", "")
        (tmp_path / "b").mkdir()
        linter = Linter()
        assert linter.config_for(tmp_path / "a" / "x.py").source == inner
        assert linter.config_for(tmp_path / "b" / "y.py").source == top
        assert linter.config_for(tmp_path / "a").source == inner  # a folder: its own configuration


class TestErrors:
    def error_for(self, tmp_path: Path, body: str, name: str = "pyproject.toml") -> str:
        path = write(tmp_path / name, body)
        with pytest.raises(ConfigError) as caught:
            load_config(path)
        message = str(caught.value)
        assert name in message
        assert "\n" not in message
        return message

    def test_unknown_key_is_named_with_a_suggestion(self, tmp_path):
        message = self.error_for(tmp_path, "[tool.trainlint]\nselekt = ['TL101']\n")
        assert "unknown key 'selekt'" in message
        assert "did you mean 'select'?" in message
        assert "[tool.trainlint]" in message

    def test_snake_case_key_is_unknown(self, tmp_path):
        assert "unknown key 'fail_on'" in self.error_for(tmp_path, "[tool.trainlint]\nfail_on = 'error'\n")

    def test_wrong_type(self, tmp_path):
        message = self.error_for(tmp_path, "[tool.trainlint]\nselect = 'TL101'\n")
        assert "select: expected a list, got a string" in message

    def test_wrong_item_type(self, tmp_path):
        assert "exclude[1]: expected a string, got an integer" in self.error_for(
            tmp_path, "[tool.trainlint]\nexclude = ['a', 3]\n"
        )

    def test_unknown_rule_code(self, tmp_path):
        message = self.error_for(tmp_path, "[tool.trainlint]\nselect = ['TL101', 'TL999']\n")
        assert "select[1]" in message and "TL999" in message

    def test_unknown_rule_name_gets_a_suggestion(self, tmp_path):
        message = self.error_for(tmp_path, "[tool.trainlint]\nignore = ['retained-grph']\n")
        assert "ignore[0]" in message and "did you mean 'retained-graph'?" in message

    def test_bad_severity_value(self, tmp_path):
        message = self.error_for(tmp_path, "[tool.trainlint.severity]\nTL101 = 'fatal'\n")
        assert "severity.TL101: expected error, warning or note, got 'fatal'" in message

    def test_unknown_rule_in_severity(self, tmp_path):
        assert "severity.no-such-rule" in self.error_for(tmp_path, "[tool.trainlint.severity]\nno-such-rule = 'note'\n")

    def test_bad_fail_on(self, tmp_path):
        assert "fail-on: expected error, warning or note, got 'fatal'" in self.error_for(
            tmp_path, "fail-on = 'fatal'\n", name="trainlint.toml"
        )

    def test_per_file_ignores_needs_a_list(self, tmp_path):
        message = self.error_for(tmp_path, "[tool.trainlint.per-file-ignores]\n'tests/*' = 'TL101'\n")
        assert "per-file-ignores.'tests/*': expected a list of rule codes or names, got a string" in message

    def test_per_file_ignores_unknown_rule(self, tmp_path):
        assert "TL998" in self.error_for(tmp_path, "[tool.trainlint.per-file-ignores]\n'a.py' = ['TL998']\n")

    def test_invalid_toml(self, tmp_path):
        assert "invalid TOML" in self.error_for(tmp_path, "[tool.trainlint\n")

    def test_table_of_the_wrong_kind(self, tmp_path):
        assert "must be a table" in self.error_for(tmp_path, "[tool]\ntrainlint = 3\n")

    def test_missing_explicit_file(self, tmp_path):
        with pytest.raises(ConfigError, match="config file not found"):
            load_config(tmp_path / "nope.toml")


def test_engine_codes_can_be_ignored_but_not_selected(tmp_path):
    config = load_config(write(tmp_path / "trainlint.toml", """
        ignore = ["syntax-error", "TL101"]
        [per-file-ignores]
        "templates/*" = ["TL000"]
    """))
    assert engine_codes_in(config.ignore) == {"TL000"}
    assert without_engine_codes(config.ignore) == ("TL101",)
    assert config.per_file_ignores.codes_for(tmp_path / "templates" / "t.py") == {"TL000"}
    with pytest.raises(ConfigError, match="TL000"):
        load_config(write(tmp_path / "other" / "trainlint.toml", "select = ['TL000']\n"))


def test_cli_reports_config_errors_in_one_line_and_exits_2(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "pyproject.toml", "[tool.trainlint]\nfail-on = 'fatal'\n")
    (tmp_path / "a.py").write_text("x = 1\n")
    assert main(["check", "a.py"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("trainlint: error: pyproject.toml: [tool.trainlint] fail-on:")


def test_cli_explicit_config_file(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "pyproject.toml", "[tool.trainlint]\nfail-on = 'fatal'\n")
    strict = write(tmp_path / "ci" / "strict.toml", "fail-on = 'note'\n")
    (tmp_path / "a.py").write_text("x = 1\n")
    assert main(["check", "--config", str(strict), "a.py"]) == 0
    assert main(["check", "--config", "missing.toml", "a.py"]) == 2
    assert "config file not found: missing.toml" in capsys.readouterr().err


class TestResolveSelector:
    class Retained(Rule):
        code, name, severity = "TL101", "retained-graph", Severity.ERROR

    class ZeroGrad(Rule):
        code, name, severity = "TL201", "missing-zero-grad", Severity.ERROR

    class Softmax(Rule):
        code, name, severity = "TL202", "softmax-before-cross-entropy", Severity.ERROR

    RULES = [Retained, ZeroGrad, Softmax]

    @pytest.mark.parametrize(
        ("token", "codes"),
        [
            ("TL101", ["TL101"]),
            ("tl101", ["TL101"]),
            ("TL2", ["TL201", "TL202"]),
            ("TL20", ["TL201", "TL202"]),
            ("TL", ["TL101", "TL201", "TL202"]),
            ("retained-graph", ["TL101"]),
            (" Missing-Zero-Grad ", ["TL201"]),
        ],
    )
    def test_matches(self, token, codes):
        assert resolve_selector(token, self.RULES) == codes

    @pytest.mark.parametrize(
        ("token", "message"),
        [
            ("TL102", "unknown rule code 'TL102'"),
            ("TL1010", "unknown rule code 'TL1010'"),
            ("TL9", "no rule code starts with 'TL9'"),
            ("softmax-before-crossentropy", "did you mean 'softmax-before-cross-entropy'?"),
            ("nothing-like-it", "unknown rule 'nothing-like-it'"),
            ("  ", "empty rule selector"),
        ],
    )
    def test_unknown(self, token, message):
        with pytest.raises(ValueError, match=re.escape(message)):
            resolve_selector(token, self.RULES)
