# fix-check: TL301 same-output
import warnings

import torch
from torch.utils.data import DataLoader, TensorDataset

warnings.simplefilter("ignore")  # pin_memory without an accelerator is ignored, with a warning
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
torch.manual_seed(0)
model = torch.nn.Linear(3, 1).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
dataset = TensorDataset(torch.randn(40, 3), torch.randn(40, 1))
loader = DataLoader(dataset, batch_size=8, num_workers=1)
for x, y in loader:
    optimizer.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x.to(device)), y.to(device))
    loss.backward()
    optimizer.step()
print(f"{model.weight.sum().item():.6f}")
