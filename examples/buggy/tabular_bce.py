# expect: TL401@38, TL203@70
"""Binary classifier for tabular data: an MLP on a CSV with a 0/1 target column.

    python tabular_bce.py --csv customers.csv --target churned --epochs 40
"""

import argparse

import numpy as np
import pandas as pd
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def parse_args():
    parser = argparse.ArgumentParser(description="tabular binary classifier")
    parser.add_argument("--csv", required=True)
    parser.add_argument("--target", required=True, help="name of the 0/1 label column")
    parser.add_argument("--val-fraction", type=float, default=0.2)
    parser.add_argument("--epochs", type=int, default=40)
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--weight-decay", type=float, default=1e-5)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", default="tabular_mlp.pt")
    return parser.parse_args()


def load_splits(path, target, val_fraction):
    """One-hot encode categoricals, split, and standardise with training statistics."""
    df = pd.read_csv(path)
    y = df.pop(target).to_numpy(dtype=np.float32)
    df = df.fillna(df.median(numeric_only=True))
    x = pd.get_dummies(df, dummy_na=True).to_numpy(dtype=np.float32)

    order = np.random.permutation(len(x))
    n_val = int(len(x) * val_fraction)
    val_idx, train_idx = order[:n_val], order[n_val:]

    mean = x[train_idx].mean(axis=0)
    std = x[train_idx].std(axis=0) + 1e-6
    x = (x - mean) / std
    return (x[train_idx], y[train_idx]), (x[val_idx], y[val_idx])


class MLP(nn.Module):
    def __init__(self, in_features, hidden=(256, 128), dropout=0.2):
        super().__init__()
        layers = []
        width = in_features
        for h in hidden:
            layers += [nn.Linear(width, h), nn.BatchNorm1d(h), nn.ReLU(), nn.Dropout(dropout)]
            width = h
        layers.append(nn.Linear(width, 1))
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x).squeeze(-1)  # one logit per row


def train_one_epoch(model, loader, criterion, optimizer, device):
    model.train()
    loss_sum = torch.zeros((), device=device)
    for x, y in loader:
        x = x.to(device, non_blocking=True)
        y = y.to(device, non_blocking=True)
        logits = model(x)
        loss = criterion(torch.sigmoid(logits), y)

        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        loss_sum += loss.detach()
    return loss_sum.item() / len(loader)


@torch.no_grad()
def evaluate(model, loader, criterion, device):
    model.eval()
    loss_sum = torch.zeros((), device=device)
    correct = torch.zeros((), device=device)
    for x, y in loader:
        x = x.to(device, non_blocking=True)
        y = y.to(device, non_blocking=True)
        logits = model(x)
        loss_sum += criterion(logits, y) * y.size(0)
        correct += ((logits > 0).float() == y).sum()
    n = len(loader.dataset)
    return loss_sum.item() / n, correct.item() / n


def main():
    args = parse_args()
    torch.manual_seed(args.seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    (x_train, y_train), (x_val, y_val) = load_splits(args.csv, args.target, args.val_fraction)
    train_loader = DataLoader(
        TensorDataset(torch.from_numpy(x_train), torch.from_numpy(y_train)),
        batch_size=args.batch_size,
        shuffle=True,
        drop_last=True,  # BatchNorm needs more than one row per batch
        num_workers=args.workers,
        pin_memory=True,
    )
    val_loader = DataLoader(
        TensorDataset(torch.from_numpy(x_val), torch.from_numpy(y_val)),
        batch_size=args.batch_size,
        shuffle=False,
        num_workers=args.workers,
        pin_memory=True,
    )

    model = MLP(x_train.shape[1]).to(device)
    # Weight the rare positive class up by the negative/positive ratio.
    pos_rate = float(y_train.mean())
    pos_weight = torch.tensor((1.0 - pos_rate) / pos_rate, device=device)
    criterion = nn.BCEWithLogitsLoss(pos_weight=pos_weight)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)

    best_loss = float("inf")
    for epoch in range(args.epochs):
        train_loss = train_one_epoch(model, train_loader, criterion, optimizer, device)
        val_loss, val_acc = evaluate(model, val_loader, criterion, device)
        print(
            f"epoch {epoch}: train loss {train_loss:.4f}, "
            f"val loss {val_loss:.4f}, val acc {val_acc:.2%}"
        )
        if val_loss < best_loss:
            best_loss = val_loss
            torch.save(model.state_dict(), args.out)


if __name__ == "__main__":
    main()
