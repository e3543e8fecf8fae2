# fix-check: TL206 changes-output
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(3, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
data = [(torch.randn(5, 3), torch.randn(5, 1)) for _ in range(10)]
for x, y in data:
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.zero_grad()
    optimizer.step()
print(f"{model.weight.sum().item():.6f}")
