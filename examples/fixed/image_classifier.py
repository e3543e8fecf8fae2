# expect: none
"""Train a ResNet-18 on CIFAR-10 from scratch with SGD and a one-cycle schedule.

    python image_classifier.py --data ./data --epochs 30
"""

import argparse
import os

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader
from torchvision import datasets, models, transforms

CIFAR_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR_STD = (0.2470, 0.2435, 0.2616)


def parse_args():
    parser = argparse.ArgumentParser(description="ResNet-18 on CIFAR-10")
    parser.add_argument("--data", default="./data", help="CIFAR-10 root (downloaded if missing)")
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--weight-decay", type=float, default=5e-4)
    parser.add_argument("--label-smoothing", type=float, default=0.1)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--log-every", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="checkpoints")
    return parser.parse_args()


class CifarResNet18(nn.Module):
    """torchvision's ResNet-18 with a stem sized for 32x32 images."""

    def __init__(self, num_classes: int = 10):
        super().__init__()
        net = models.resnet18(num_classes=num_classes)
        # A 3x3 stride-1 stem and no max-pool keep the small images' spatial detail.
        net.conv1 = nn.Conv2d(3, 64, kernel_size=3, stride=1, padding=1, bias=False)
        net.maxpool = nn.Identity()
        self.net = net

    def forward(self, x):
        return self.net(x)


def build_loaders(args):
    normalize = transforms.Normalize(CIFAR_MEAN, CIFAR_STD)
    train_tf = transforms.Compose(
        [
            transforms.RandomCrop(32, padding=4),
            transforms.RandomHorizontalFlip(),
            transforms.ToTensor(),
            normalize,
        ]
    )
    test_tf = transforms.Compose([transforms.ToTensor(), normalize])
    train_set = datasets.CIFAR10(args.data, train=True, download=True, transform=train_tf)
    test_set = datasets.CIFAR10(args.data, train=False, download=True, transform=test_tf)
    train_loader = DataLoader(
        train_set,
        batch_size=args.batch_size,
        shuffle=True,
        drop_last=True,
        num_workers=args.workers,
        pin_memory=True,
    )
    test_loader = DataLoader(
        test_set, batch_size=256, shuffle=False, num_workers=args.workers, pin_memory=True
    )
    return train_loader, test_loader


def train_one_epoch(model, loader, optimizer, scheduler, device, epoch, args):
    model.train()
    loss_sum = torch.zeros((), device=device)
    for step, (images, labels) in enumerate(loader):
        images = images.to(device, non_blocking=True)
        labels = labels.to(device, non_blocking=True)

        logits = model(images)
        loss = F.cross_entropy(logits, labels, label_smoothing=args.label_smoothing)

        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        scheduler.step()

        loss_sum += loss.detach()
        if step % args.log_every == 0:
            lr = scheduler.get_last_lr()[0]
            print(f"epoch {epoch} step {step}/{len(loader)} loss {loss.item():.4f} lr {lr:.4f}")
    return loss_sum.item() / len(loader)


@torch.no_grad()
def evaluate(model, loader, device):
    model.eval()
    loss_sum = torch.zeros((), device=device)
    correct = torch.zeros((), dtype=torch.long, device=device)
    for images, labels in loader:
        images = images.to(device, non_blocking=True)
        labels = labels.to(device, non_blocking=True)
        logits = model(images)
        loss_sum += F.cross_entropy(logits, labels, reduction="sum")
        correct += (logits.argmax(dim=1) == labels).sum()
    n = len(loader.dataset)
    return loss_sum.item() / n, correct.item() / n


def main():
    args = parse_args()
    torch.manual_seed(args.seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    train_loader, test_loader = build_loaders(args)
    model = CifarResNet18(num_classes=10).to(device)
    optimizer = torch.optim.SGD(
        model.parameters(),
        lr=args.lr,
        momentum=0.9,
        weight_decay=args.weight_decay,
        nesterov=True,
    )
    scheduler = torch.optim.lr_scheduler.OneCycleLR(
        optimizer, max_lr=args.lr, epochs=args.epochs, steps_per_epoch=len(train_loader)
    )

    os.makedirs(args.out, exist_ok=True)
    best_acc = 0.0
    for epoch in range(args.epochs):
        train_loss = train_one_epoch(model, train_loader, optimizer, scheduler, device, epoch, args)
        test_loss, test_acc = evaluate(model, test_loader, device)
        print(
            f"epoch {epoch}: train loss {train_loss:.4f}, "
            f"test loss {test_loss:.4f}, test acc {test_acc:.2%}"
        )
        if test_acc > best_acc:
            best_acc = test_acc
            torch.save(model.state_dict(), os.path.join(args.out, "resnet18_cifar10.pt"))
    print(f"best test accuracy {best_acc:.2%}")


if __name__ == "__main__":
    main()
