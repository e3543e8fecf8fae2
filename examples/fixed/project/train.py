# expect: none
"""Train the activity classifier on windows of sensor readings.

    python train.py --data ./har --epochs 30
"""

import argparse
import os

import torch
import torch.nn as nn

from data import build_loaders
from model import ActivityNet


def parse_args():
    parser = argparse.ArgumentParser(description="human activity recognition")
    parser.add_argument("--data", required=True)
    parser.add_argument("--num-classes", type=int, default=6)
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--weight-decay", type=float, default=1e-2)
    parser.add_argument("--clip", type=float, default=5.0)
    parser.add_argument("--val-fraction", type=float, default=0.15)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--log-every", type=int, default=50)
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--out", default="runs/activity")
    return parser.parse_args()


def train_one_epoch(model, loader, criterion, optimizer, device, epoch, args):
    model.train()
    loss_sum = torch.zeros((), device=device)
    for step, (x, y) in enumerate(loader):
        x = x.to(device, non_blocking=True)
        y = y.to(device, non_blocking=True)
        optimizer.zero_grad(set_to_none=True)
        logits = model(x)
        loss = criterion(logits, y)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        optimizer.step()

        loss_sum += loss.detach()
        if step % args.log_every == 0:
            print(f"epoch {epoch} step {step}/{len(loader)} loss {loss.item():.4f}")
    return loss_sum.item() / len(loader)


@torch.no_grad()
def evaluate(model, loader, device):
    model.eval()
    correct = torch.zeros((), dtype=torch.long, device=device)
    for x, y in loader:
        x = x.to(device, non_blocking=True)
        y = y.to(device, non_blocking=True)
        logits = model(x)
        correct += (logits.argmax(dim=1) == y).sum()
    return correct.item() / len(loader.dataset)


def main():
    args = parse_args()
    torch.manual_seed(args.seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    train_loader, val_loader, test_loader = build_loaders(
        args.data, args.batch_size, args.workers, args.val_fraction, args.seed
    )
    in_channels = train_loader.dataset.tensors[0].shape[-1]
    model = ActivityNet(in_channels, args.num_classes).to(device)
    criterion = nn.CrossEntropyLoss(label_smoothing=0.05)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, mode="max", patience=3)

    os.makedirs(args.out, exist_ok=True)
    best_path = os.path.join(args.out, "best.pt")
    best_acc = 0.0
    for epoch in range(args.epochs):
        train_loss = train_one_epoch(model, train_loader, criterion, optimizer, device, epoch, args)
        val_acc = evaluate(model, val_loader, device)
        scheduler.step(val_acc)
        print(f"epoch {epoch}: train loss {train_loss:.4f}, val acc {val_acc:.2%}")
        if val_acc > best_acc:
            best_acc = val_acc
            torch.save(model.state_dict(), best_path)

    model.load_state_dict(torch.load(best_path, map_location=device))
    print(f"test accuracy {evaluate(model, test_loader, device):.2%}")


if __name__ == "__main__":
    main()
