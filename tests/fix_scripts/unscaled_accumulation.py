# fix-check: TL204 changes-output
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
criterion = nn.MSELoss()
accumulation_steps = 4
data = [(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(16)]
for i, (x, y) in enumerate(data):
    loss = criterion(model(x), y)
    loss.backward()
    if (i + 1) % accumulation_steps == 0:
        optimizer.step()
        optimizer.zero_grad()
print(f"{model.weight.sum().item():.6f}")
