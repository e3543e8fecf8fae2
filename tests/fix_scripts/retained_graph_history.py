# fix-check: TL101 same-output
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(8, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
data = [(torch.randn(16, 8), torch.randn(16, 1)) for _ in range(20)]

history = []
for x, y in data:
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    history.append(loss)
print(f"{sum(float(h) for h in history) / len(history):.6f}")
