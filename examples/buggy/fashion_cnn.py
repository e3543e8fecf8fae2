# expect: TL202@67, TL302@71, TL202@83
"""A compact CNN for Fashion-MNIST, trained with AdamW and a cosine schedule.

    python fashion_cnn.py --epochs 20 --save fashion_cnn.pt
"""

import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader
from torchvision import datasets, transforms
from tqdm import tqdm


def parse_args():
    parser = argparse.ArgumentParser(description="Fashion-MNIST CNN")
    parser.add_argument("--data", default="./data")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--weight-decay", type=float, default=1e-4)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--seed", type=int, default=2024)
    parser.add_argument("--save", default="")
    return parser.parse_args()


def conv_block(c_in, c_out):
    return nn.Sequential(
        nn.Conv2d(c_in, c_out, 3, padding=1, bias=False),
        nn.BatchNorm2d(c_out),
        nn.GELU(),
        nn.Conv2d(c_out, c_out, 3, padding=1, bias=False),
        nn.BatchNorm2d(c_out),
        nn.GELU(),
        nn.MaxPool2d(2),
    )


class FashionCNN(nn.Module):
    def __init__(self, num_classes=10, dropout=0.3):
        super().__init__()
        self.features = nn.Sequential(conv_block(1, 32), conv_block(32, 64))  # 28 -> 14 -> 7
        self.classifier = nn.Sequential(
            nn.Flatten(),
            nn.Dropout(dropout),
            nn.Linear(64 * 7 * 7, 256),
            nn.GELU(),
            nn.Dropout(dropout),
            nn.Linear(256, num_classes),
        )

    def forward(self, x):
        return self.classifier(self.features(x))


def train_one_epoch(model, loader, optimizer, scheduler, device, epoch):
    model.train()
    progress = tqdm(loader, desc=f"epoch {epoch}", leave=False)
    for images, labels in progress:
        images = images.to(device, non_blocking=True)
        labels = labels.to(device, non_blocking=True)
        optimizer.zero_grad(set_to_none=True)
        scores = model(images)
        loss = F.nll_loss(scores, labels)
        loss.backward()
        optimizer.step()
        scheduler.step()
        progress.set_postfix(loss=f"{loss.item():.4f}")


@torch.no_grad()
def evaluate(model, loader, device):
    model.eval()
    loss_sum = torch.zeros((), device=device)
    correct = torch.zeros((), dtype=torch.long, device=device)
    for images, labels in loader:
        images = images.to(device, non_blocking=True)
        labels = labels.to(device, non_blocking=True)
        scores = model(images)
        loss_sum += F.nll_loss(scores, labels, reduction="sum")
        correct += (scores.argmax(dim=1) == labels).sum()
    n = len(loader.dataset)
    return loss_sum.item() / n, correct.item() / n


def main():
    args = parse_args()
    torch.manual_seed(args.seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    train_tf = transforms.Compose(
        [
            transforms.RandomCrop(28, padding=2),
            transforms.RandomHorizontalFlip(),
            transforms.ToTensor(),
            transforms.Normalize((0.2860,), (0.3530,)),
        ]
    )
    test_tf = transforms.Compose(
        [transforms.ToTensor(), transforms.Normalize((0.2860,), (0.3530,))]
    )
    train_set = datasets.FashionMNIST(args.data, train=True, download=True, transform=train_tf)
    test_set = datasets.FashionMNIST(args.data, train=False, download=True, transform=test_tf)
    loader_opts = {
        "num_workers": args.workers,
        "pin_memory": True,
        "persistent_workers": args.workers > 0,
    }
    train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True, **loader_opts)
    test_loader = DataLoader(test_set, batch_size=1024, shuffle=False, **loader_opts)

    model = FashionCNN().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(
        optimizer, T_max=args.epochs * len(train_loader)
    )
    for epoch in range(args.epochs):
        train_one_epoch(model, train_loader, optimizer, scheduler, device, epoch)
        test_loss, accuracy = evaluate(model, test_loader, device)
        print(f"epoch {epoch}: test loss {test_loss:.4f}, accuracy {accuracy:.2%}")

    if args.save:
        torch.save(model.state_dict(), args.save)


if __name__ == "__main__":
    main()
