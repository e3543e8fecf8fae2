# fix-check: TL207 same-output
import warnings

import torch
from torch import nn

warnings.simplefilter("ignore")  # GradScaler is disabled without CUDA: it scales by 1, and says so
torch.manual_seed(0)
model = nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
scaler = torch.cuda.amp.GradScaler()
data = [(torch.randn(6, 4), torch.randint(0, 2, (6,))) for _ in range(8)]
for x, y in data:
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    scaler.scale(loss).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)
    scaler.update()
print(f"{model.weight.sum().item():.6f}")
