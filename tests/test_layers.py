"""The parts stand apart as docs/writing-rules.md and the design say: the estimator's memory model
needs no LibCST, its script reader and every rule use only the public rule API
(`trainlint.rules`) for everything it offers, and `analysis` imports neither the estimator nor the server."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import trainlint.rules

ROOT = Path(__file__).resolve().parents[1]
# The estimator's modules that read a script (through trainlint.rules) or a run's configuration file (a torchtune
# recipe's YAML, into the script reader's inputs); every other one is the
# memory model, which knows numbers, catalogs and configs, never syntax trees.
SCRIPT_READER = {
    "reading", "script_defaults", "script_plan", "training_loop", "anchors", "custom_models", "editor", "projected_oom",
    "torchtune_config", "script_inputs",
}
MEMORY_MODEL = sorted(
    path.stem for path in (ROOT / "estimator").glob("*.py") if path.stem not in SCRIPT_READER | {"__init__"}
)
# What the memory model may import besides the standard library and its sibling modules.
MEMORY_MODEL_MAY_IMPORT = {"msgspec", "trainlint.analysis.files"}


def _imports(path: Path) -> list[tuple[int, str]]:
    """(level, module) of every import in a file, wherever it is (a function's own imports too)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(0, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            found.append((node.level, node.module or ""))
    return found


def test_the_memory_model_imports_no_libcst():
    modules = ", ".join(f"trainlint.estimator.{name}" for name in MEMORY_MODEL)
    program = f"import sys, {modules}\nprint(sorted(m for m in sys.modules if m.split('.')[0] == 'libcst'))"
    done = subprocess.run([sys.executable, "-I", "-c", program], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]"
    assert {"costmodel", "report", "remedies", "hardware", "architectures"} <= set(MEMORY_MODEL)


def test_the_memory_model_imports_only_the_standard_library_msgspec_and_itself():
    allowed = set(sys.stdlib_module_names) | {"__future__"}
    for name in MEMORY_MODEL:
        for level, module in _imports(ROOT / "estimator" / f"{name}.py"):
            fine = level or module.split(".")[0] in allowed or module in MEMORY_MODEL_MAY_IMPORT
            assert fine or module.startswith("trainlint.estimator."), f"estimator/{name}.py imports {module}"


def test_the_script_reader_takes_from_the_public_api_all_it_has():
    public = set(trainlint.rules.__all__)
    for name in sorted(SCRIPT_READER):
        for node in ast.walk(ast.parse((ROOT / "estimator" / f"{name}.py").read_text(encoding="utf-8"))):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            modules = [alias.name for alias in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for module in modules:
                assert module.split(".")[0] not in ("analysis", "server"), f"estimator/{name}.py imports {module}"
                if module.startswith("trainlint.") and not module.startswith("trainlint.estimator."):
                    assert module == "trainlint.rules" or module.startswith("trainlint.analysis."), f"estimator/{name}.py imports {module}"
                if isinstance(node, ast.ImportFrom) and module.startswith("trainlint.analysis."):
                    names = {alias.name for alias in node.names} & public
                    assert not names, f"estimator/{name}.py imports {sorted(names)} from {module}, not trainlint.rules"
                if isinstance(node, ast.ImportFrom) and node.level:
                    assert module.split(".")[0] in MEMORY_MODEL + sorted(SCRIPT_READER), f"estimator/{name}.py: .{module}"


def test_analysis_imports_neither_the_estimator_nor_the_server_nor_the_cli():
    for path in sorted((ROOT / "analysis").rglob("*.py")):
        for level, module in _imports(path):
            if level == 0 and module.startswith("trainlint."):
                allowed = module.startswith("trainlint.analysis") or module == "trainlint.rules"
                assert allowed, f"{path.relative_to(ROOT)} imports {module}"


def test_the_registry_finds_the_built_in_rules_without_importing_the_estimator():
    program = (
        "import sys\nfrom trainlint.analysis.registry import builtin_rules\n"
        "print(len(builtin_rules()), any(m.startswith('trainlint.estimator') for m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-I", "-c", program], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.split() == ["23", "False"]


def test_the_server_starts_without_importing_the_analysis():
    # `trainlint server` answers `initialize` before the analysis is imported (half a second of CPU,
    # taken on a thread of its own): neither LibCST nor a rule nor the estimator comes with the server
    program = (
        "import sys\nimport trainlint.cli, trainlint.server.server\n"
        "print(sorted(m for m in sys.modules if m == 'libcst' or m.startswith(('trainlint.analysis.rules.', 'trainlint.estimator'))))"
    )
    done = subprocess.run([sys.executable, "-I", "-c", program], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "['trainlint.analysis.rules.base']"
