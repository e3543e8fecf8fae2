# fix-check: TL203 changes-output
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(6, 1)
criterion = nn.BCEWithLogitsLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.3)
x, y = torch.randn(64, 6), torch.randint(0, 2, (64, 1)).float()
for step in range(25):
    optimizer.zero_grad()
    probs = torch.sigmoid(model(x))
    loss = criterion(probs, y)
    loss.backward()
    optimizer.step()
print(f"{loss.item():.6f}")
