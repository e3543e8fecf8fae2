"""A two-file project for tests of evidence across files: a model class ending in softmax in
model.py, and train.py, which imports it and feeds its output to a cross-entropy loss (TL202)."""

import textwrap

MODEL = textwrap.dedent(
    """\
    import torch.nn as nn
    import torch.nn.functional as F


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(784, 10)

        def forward(self, x):
            return F.softmax(self.fc(x), dim=1)
    """
)
# The training loop of train.py, and of b_helpers.py below inside a function.
TRAINING = textwrap.dedent(
    """\
    model = Net()
    criterion = torch.nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
    """
)
TRAIN = "import torch\n\nfrom model import Net\n\n" + TRAINING

# A third file between the two: b_helpers.py trains c_model.py's Net (TL202 in b_helpers.py, citing
# c_model.py's forward), and a_train.py only calls it, so a check of the folder meets b_helpers.py
# first as an import target, then as a file to check.
HELPERS_TRAINING_A_MODEL = (
    "import torch\nfrom c_model import Net\n\n\ndef train(loader):\n" + textwrap.indent(TRAINING, "    ")
)
IMPORTING_THE_HELPER = "from b_helpers import train\n\ntrain(loader)\n"
