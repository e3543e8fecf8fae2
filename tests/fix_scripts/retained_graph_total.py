# fix-check: TL101 same-output
import torch
import torch.nn.functional as F
from torch import nn


def evaluate(model, batches):
    total = 0.0
    for x, y in batches:
        total += F.cross_entropy(model(x), y)
    return float(total) / len(batches)


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))
batches = [(torch.randn(10, 6), torch.randint(0, 3, (10,))) for _ in range(8)]
print(f"{evaluate(model, batches):.6f}")
