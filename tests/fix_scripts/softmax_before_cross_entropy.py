# fix-check: TL202 changes-output
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
x, y = torch.randn(32, 4), torch.randint(0, 3, (32,))
for step in range(30):
    optimizer.zero_grad()
    probs = torch.softmax(model(x), dim=1)
    loss = criterion(probs, y)
    loss.backward()
    optimizer.step()
print(f"{loss.item():.6f}")
