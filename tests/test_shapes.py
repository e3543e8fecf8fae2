"""benchmarks/shapes.py: each transformation rewrites a toy program into one that does the same thing, and
skips one it cannot rewrite exactly."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import sys
import textwrap
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def _load():
    spec = importlib.util.spec_from_file_location("shapes", BENCHMARKS / "shapes.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["shapes"] = module
    spec.loader.exec_module(module)
    return module


shapes = _load()


def _code(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


SCRIPT = _code(
    """
    import model as lib
    from model import Net


    def score(model, batch, scale=1.0):
        total = 0
        for x in batch:
            total += sum(model(x)) * scale
        return total


    net = Net()
    net.load_state_dict(lib.load("ckpt.pth"))
    result = score(net, [lib.ones(2)])
    print(result, net.training)
    """
)


def _run(code: str, files: dict[str, str], folder: Path) -> str:
    """What the program prints, run as a script beside a stand-in `model.py`."""
    folder.mkdir()
    for path, text in {"model.py": MODEL, **files}.items():
        (folder / path).write_text(text, encoding="utf-8")
    printed = io.StringIO()
    sys.path.insert(0, str(folder))
    try:
        with contextlib.redirect_stdout(printed):
            exec(compile(code, str(folder / "main.py"), "exec"), {"__name__": "__main__"})
    finally:
        sys.path.remove(str(folder))
        for name in ("model", "shapes_helpers"):
            sys.modules.pop(name, None)
    return printed.getvalue()


MODEL = _code(
    """
    def load(path):
        return {}


    def ones(n):
        return [1.0] * n


    class Net:
        training = True

        def load_state_dict(self, state):
            pass

        def __call__(self, x):
            return [2 * value for value in x]
    """
)


def test_rename_renames_own_names_and_keeps_attributes_keywords_and_imports():
    variant, files = shapes.rename(SCRIPT, {})
    assert "def fn_1(v1, v2, v3=1.0):" in variant and "v6 = Net()" in variant and "v7 = fn_1(v6, [lib.ones(2)])" in variant
    assert "v6.load_state_dict(lib.load(" in variant and "print(v7, v6.training)" in variant and files == {}


def test_rename_keeps_a_parameter_passed_by_keyword():
    code = _code(
        """
        def f(a, b):
            return a - b

        c = f(1, b=2)
        """
    )
    variant, _ = shapes.rename(code, {})
    assert "def fn_1(v1, b):" in variant and "fn_1(1, b=2)" in variant


def test_into_main_moves_the_script_and_skips_names_a_function_reads():
    variant, _ = shapes.into_main(SCRIPT, {})
    assert "def main():\n    net = Net()" in variant and variant.endswith('if __name__ == "__main__":\n    main()\n')
    reads_global = SCRIPT.replace("total = 0", "total = len(result or [])")
    with pytest.raises(shapes.Skip):
        shapes.into_main(reads_global, {})


def test_to_module_inlines_a_parameterless_main():
    variant, _ = shapes.into_main(SCRIPT, {})
    back, _ = shapes.to_module(variant, {})
    assert "def main" not in back and "__main__" not in back and "\nnet = Net()\n" in back
    returns = variant.replace("    print(result, net.training)", "    return result")
    with pytest.raises(shapes.Skip):
        shapes.to_module(returns, {})


def test_into_method_makes_each_call_an_instance_call():
    variant, _ = shapes.into_method(SCRIPT, {})
    assert "class Thing1:\n    def score(self, model, batch, scale=1.0):" in variant
    assert "result = Thing1().score(net, [lib.ones(2)])" in variant
    passed = SCRIPT + "callbacks = [score]\n"
    with pytest.raises(shapes.Skip):
        shapes.into_method(passed, {})


def test_to_file_moves_a_self_contained_function_to_a_second_file():
    variant, files = shapes.to_file(SCRIPT, {})
    assert "from shapes_helpers import score" in variant and "def score" not in variant
    assert "def score(model, batch, scale=1.0):" in files["shapes_helpers.py"]
    assert files["shapes_helpers.py"].startswith("import model as lib\nfrom model import Net\n")
    reads_module_name = SCRIPT.replace("scale=1.0", "scale=None").replace("* scale", "* SCALE") + "SCALE = 1\n"
    with pytest.raises(shapes.Skip):
        shapes.to_file(reads_module_name, {})


@pytest.mark.parametrize("name", list(shapes.TRANSFORMS))
def test_every_transformation_keeps_what_the_program_prints(name, tmp_path):
    # to-module inlines a main(): it starts from the script with one
    original = shapes.into_main(SCRIPT, {})[0] if name == "to-module" else SCRIPT
    variant, files = shapes.TRANSFORMS[name](original, {})
    assert variant != original
    assert _run(original, {}, tmp_path / "before") == "4.0 True\n" == _run(variant, files, tmp_path / "after")
