"""`trainlint estimate` as a new user meets it: what "fits" means, remedies that save something,
every assumed parallelism said, the catalog listed, names suggested, a model class from the next
file read, and each setting a user knows that changes memory accepted."""

from __future__ import annotations

import json
import textwrap

from trainlint.cli import main


def _estimate(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["estimate", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_a_model_class_imported_from_the_next_file_is_counted(tmp_path, capsys):
    (tmp_path / "model.py").write_text(textwrap.dedent(
        """\
        import torch.nn as nn


        class GPT(nn.Module):
            def __init__(self, vocab=50304, width=768, depth=12):
                super().__init__()
                self.embed = nn.Embedding(vocab, width)
                self.blocks = nn.ModuleList([nn.Linear(width, width) for _ in range(depth)])
                self.head = nn.Linear(width, vocab, bias=False)
        """
    ), encoding="utf-8")
    (tmp_path / "train.py").write_text(textwrap.dedent(
        """\
        import torch
        from model import GPT

        model = GPT(width=512)
        optimizer = torch.optim.AdamW(model.parameters())
        for x, y in loader:
            loss = model(x, y)
            loss.backward()
            optimizer.step()
        """
    ), encoding="utf-8")
    code, out, err = _estimate(capsys, str(tmp_path / "train.py"), "--format", "json")
    report = json.loads(out)
    assert report["model"]["params"] == 2 * 50304 * 512 + 12 * (512 * 512 + 512), err
    assert report["inputs"]["model"]["value"] == "GPT (a class of model.py)"
    assert code == 2  # its activations are not modelled: the count, and no verdict
