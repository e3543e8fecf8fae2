"""Where TL502 says `set_epoch` goes: a trainer that counts its passes over the loader names that line."""

from __future__ import annotations

import textwrap

from trainlint.analysis.engine import analyze_source

TRAINER = textwrap.dedent(
    """
    import torch
    import torch.distributed as dist
    from torch.utils.data import DataLoader
    from torch.utils.data.distributed import DistributedSampler


    class Trainer:
        def __init__(self, model, optimizer, loader, max_steps):
            self.model = model
            self.optimizer = optimizer
            self.loader = loader
            self.max_steps = max_steps
            self.steps = 0
            self.epochs = 0

        def run(self):
            while self.steps < self.max_steps:
                self._train_epoch()

        def _train_epoch(self):
            for features, labels in self.loader:
                loss = torch.nn.functional.mse_loss(self.model(features.cuda()), labels.cuda())
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
                self.steps += 1
            self.epochs += 1


    def main(dataset, model):
        dist.init_process_group("nccl")
        model = torch.nn.parallel.DistributedDataParallel(model.cuda())
        sampler = DistributedSampler(dataset, shuffle=True)
        loader = DataLoader(dataset, batch_size=16, sampler=sampler)
        Trainer(model, torch.optim.Adam(model.parameters()), loader, 10_000).run()
    """
).lstrip()


def test_the_line_that_counts_epochs_is_evidence():
    findings = [f for f in analyze_source(TRAINER, "train.py") if f.code == "TL502"]
    assert len(findings) == 1
    counted = TRAINER.splitlines().index("        self.epochs += 1") + 1
    notes = {e.line: e.note for e in findings[0].evidence}
    assert "counts each pass" in notes.get(counted, "")


def test_a_step_counter_inside_the_loop_is_not_named():
    per_step = TRAINER.replace("        self.epochs += 1\n", "")
    assert per_step != TRAINER
    findings = [f for f in analyze_source(per_step, "train.py") if f.code == "TL502"]
    assert len(findings) == 1
    steps = per_step.splitlines().index("            self.steps += 1") + 1
    assert all("counts each pass" not in e.note for e in findings[0].evidence)
    assert steps not in {e.line for e in findings[0].evidence}
