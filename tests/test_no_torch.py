"""The server, the estimator and notebook checks never import torch (only trainlint.guard may)."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_server_estimator_and_notebooks_run_without_importing_torch(tmp_path):
    fake = tmp_path / "fake_site" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise SystemExit('torch was imported')\n")
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(
        """\
        import torch
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained("gpt2")
        optimizer = torch.optim.AdamW(model.parameters())
        for batch in loader:
            model(**batch).loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        """
    ))
    program = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(fake.parent)!r})
        from pathlib import Path
        import trainlint.server.server  # the language server, with every feature's module
        from trainlint.analysis.module import ModuleAnalysis
        from trainlint.analysis.settings import AnalysisSettings
        from trainlint.estimator.editor import estimate_module
        from trainlint.notebooks import CellProgram
        from trainlint.server.documents import DocumentState
        from trainlint.settings import EffectiveSettings
        from trainlint.cli import main

        text = Path({str(script)!r}).read_text()
        state = DocumentState("file:///train.py", None)
        analysis = state.analyse(text, 1, EffectiveSettings(AnalysisSettings(target_gpu="t4")))
        assert state.vram(analysis, "t4").report is not None
        state.analyse(CellProgram([text]).text, 2, EffectiveSettings(AnalysisSettings()))
        status = main(["estimate", {str(script)!r}, "--gpu", "t4", "--format", "json"])
        print("torch" in sys.modules, status in (0, 1))
        """
    )
    result = subprocess.run([sys.executable, "-I", "-c", program], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "False True"
