# fix-check: TL102 same-output
import torch
from torch import nn


def validate(model, loader, criterion):
    model.eval()
    total, correct = 0.0, 0
    for x, y in loader:
        out = model(x)
        total += criterion(out, y).item()
        correct += (out.argmax(1) == y).sum().item()
    return total / len(loader), correct


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(5, 12), nn.Dropout(0.2), nn.Linear(12, 4))
criterion = nn.CrossEntropyLoss()
loader = [(torch.randn(7, 5), torch.randint(0, 4, (7,))) for _ in range(6)]
loss, correct = validate(model, loader, criterion)
print(f"{loss:.6f} {correct}")
