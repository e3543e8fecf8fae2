"""VRAMGuard's projection beside PyTorch's own count (MemTracker under FakeTensorMode), and its overhead.

    .venv/bin/python benchmarks/guard_vs_memtracker.py

For three models (an MLP, a small CNN, a transformer encoder layer) on the CPU: VRAMGuard's
weights, gradients, optimizer state and activations, then PyTorch's `MemTracker` peak over one
training step (forward, backward, optimizer step) run on fake tensors, and the time VRAMGuard's
check took. MemTracker's peak is a real timeline (the backward frees activations while it makes
gradients), so it sits below the sum of VRAMGuard's terms, which is what the guard compares
with the limit.
"""

from __future__ import annotations

import time

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.distributed._tools.mem_tracker import MemTracker

from trainlint.guard import VRAMGuard

MIB = 2**20


class TinyCNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.features = torch.nn.Sequential(torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.BatchNorm2d(32), torch.nn.ReLU(), torch.nn.MaxPool2d(2))
        self.head = torch.nn.Linear(32 * 32 * 32, 10)

    def forward(self, x):
        return self.head(self.features(x).flatten(1))


MODELS = {
    "mlp 256-4096-256, batch 512": (lambda: torch.nn.Sequential(torch.nn.Linear(256, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 256)), (512, 256)),
    "cnn 32x32, batch 64": (TinyCNN, (64, 3, 64, 64)),
    "transformer layer d=512, batch 16 x 256": (lambda: torch.nn.TransformerEncoderLayer(512, 8, 2048, dropout=0.0, batch_first=True), (16, 256, 512)),
}


def memtracker_peak(build, shape) -> int:
    with FakeTensorMode():
        model = build()
        optimizer = torch.optim.AdamW(model.parameters(), foreach=False)
        x = torch.randn(*shape)
        tracker = MemTracker()
        tracker.track_external(model, optimizer)
        with tracker:
            model(x).sum().backward()
            optimizer.step()
        return tracker.get_tracker_snapshot("peak")[torch.device("cpu")]["Total"]


def main() -> None:
    print(f"{'model':<42}{'weights':>9}{'grads':>8}{'optim':>8}{'activ.':>9}{'guard sum':>11}{'MemTracker':>12}{'check ms':>10}")
    for label, (build, shape) in MODELS.items():
        torch.manual_seed(0)
        model = build()
        optimizer = torch.optim.AdamW(model.parameters())
        started = time.perf_counter()
        with VRAMGuard(model, optimizer, example_input=torch.randn(*shape), memory_limit="1TiB") as guard:
            pass
        elapsed = (time.perf_counter() - started) * 1000
        p = guard.projection
        total = p.weights + p.gradients + p.optimizer + p.activations
        peak = memtracker_peak(build, shape)
        print(f"{label:<42}{p.weights / MIB:>9.1f}{p.gradients / MIB:>8.1f}{p.optimizer / MIB:>8.1f}{p.activations / MIB:>9.1f}"
              f"{total / MIB:>11.1f}{peak / MIB:>12.1f}{elapsed:>10.1f}")
    print("(MiB; MemTracker: peak of one step on fake tensors, AdamW without foreach)")


if __name__ == "__main__":
    main()
