# fix-check: TL502 changes-output
import torch
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

dataset = TensorDataset(torch.arange(12.0))
sampler = DistributedSampler(dataset, num_replicas=1, rank=0, shuffle=True, seed=0)
loader = DataLoader(dataset, batch_size=4, sampler=sampler)
orders = []
for epoch in range(3):
    order = []
    for (batch,) in loader:
        order.extend(int(x) for x in batch)
    orders.append(order)
print(orders)
