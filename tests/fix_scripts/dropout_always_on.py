# fix-check: TL211 changes-output
import torch
import torch.nn.functional as F
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 16)
        self.fc2 = nn.Linear(16, 2)

    def forward(self, x):
        x = F.dropout(F.relu(self.fc1(x)), p=0.5)
        return self.fc2(x)


torch.manual_seed(0)
net = Net().eval()
x = torch.randn(4, 6)
print(torch.equal(net(x), net(x)))
