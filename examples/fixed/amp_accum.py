# expect: none
"""Fine-tune an ImageNet-pretrained EfficientNet-B0 on a small ImageFolder dataset
with float16 autocast, a GradScaler and gradient accumulation (big effective batch
on one modest GPU).

    python amp_accum.py --data ./flowers --batch-size 32 --accum-steps 8
"""

import argparse
import os

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader
from torchvision import datasets, models, transforms

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def parse_args():
    parser = argparse.ArgumentParser(description="EfficientNet-B0 fine-tuning with AMP")
    parser.add_argument("--data", required=True, help="directory with train/ and val/ subfolders")
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--batch-size", type=int, default=32, help="micro-batch per forward")
    parser.add_argument("--accum-steps", type=int, default=8, help="micro-batches per update")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--weight-decay", type=float, default=0.05)
    parser.add_argument("--max-grad-norm", type=float, default=1.0)
    parser.add_argument("--workers", type=int, default=6)
    parser.add_argument("--log-every", type=int, default=50, help="in optimizer updates")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", default="effnet_b0_finetuned.pt")
    return parser.parse_args()


class FineTuneNet(nn.Module):
    """Pretrained EfficientNet-B0 features with a fresh classification head."""

    def __init__(self, num_classes, dropout=0.3):
        super().__init__()
        backbone = models.efficientnet_b0(weights=models.EfficientNet_B0_Weights.IMAGENET1K_V1)
        self.features = backbone.features
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Sequential(nn.Flatten(), nn.Dropout(dropout), nn.Linear(1280, num_classes))

    def forward(self, x):
        return self.head(self.pool(self.features(x)))


def build_loaders(args):
    normalize = transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD)
    train_tf = transforms.Compose(
        [
            transforms.RandomResizedCrop(224, scale=(0.5, 1.0)),
            transforms.RandomHorizontalFlip(),
            transforms.ColorJitter(0.2, 0.2, 0.2),
            transforms.ToTensor(),
            normalize,
        ]
    )
    val_tf = transforms.Compose(
        [transforms.Resize(256), transforms.CenterCrop(224), transforms.ToTensor(), normalize]
    )
    train_set = datasets.ImageFolder(os.path.join(args.data, "train"), train_tf)
    val_set = datasets.ImageFolder(os.path.join(args.data, "val"), val_tf)
    train_loader = DataLoader(
        train_set,
        batch_size=args.batch_size,
        shuffle=True,
        drop_last=True,
        num_workers=args.workers,
        pin_memory=True,
    )
    val_loader = DataLoader(
        val_set,
        batch_size=2 * args.batch_size,
        shuffle=False,
        num_workers=args.workers,
        pin_memory=True,
    )
    return train_loader, val_loader, len(train_set.classes)


def train_one_epoch(model, loader, optimizer, scaler, scheduler, device, epoch, args):
    model.train()
    optimizer.zero_grad(set_to_none=True)
    loss_sum = torch.zeros((), device=device)
    for step, (images, labels) in enumerate(loader):
        images = images.to(device, non_blocking=True)
        labels = labels.to(device, non_blocking=True)
        with torch.autocast(device_type="cuda", dtype=torch.float16):
            logits = model(images)
            loss = F.cross_entropy(logits, labels, label_smoothing=0.1)
        # Each micro-batch contributes 1/accum_steps of the update's gradient.
        scaler.scale(loss / args.accum_steps).backward()
        loss_sum += loss.detach()

        if (step + 1) % args.accum_steps == 0:
            scaler.unscale_(optimizer)
            nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm)
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad(set_to_none=True)
            scheduler.step()

            update = (step + 1) // args.accum_steps
            if update % args.log_every == 0:
                print(f"epoch {epoch} update {update} loss {loss.item():.4f}")
    return loss_sum.item() / len(loader)


@torch.inference_mode()
def evaluate(model, loader, device):
    model.eval()
    correct = torch.zeros((), dtype=torch.long, device=device)
    for images, labels in loader:
        images = images.to(device, non_blocking=True)
        labels = labels.to(device, non_blocking=True)
        with torch.autocast(device_type="cuda", dtype=torch.float16):
            logits = model(images)
        correct += (logits.argmax(dim=1) == labels).sum()
    return correct.item() / len(loader.dataset)


def main():
    args = parse_args()
    torch.manual_seed(args.seed)
    device = torch.device("cuda")

    train_loader, val_loader, num_classes = build_loaders(args)
    model = FineTuneNet(num_classes).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    updates_per_epoch = len(train_loader) // args.accum_steps
    scheduler = torch.optim.lr_scheduler.OneCycleLR(
        optimizer, max_lr=args.lr, total_steps=args.epochs * updates_per_epoch, pct_start=0.1
    )
    scaler = torch.amp.GradScaler("cuda")

    best_acc = 0.0
    for epoch in range(args.epochs):
        train_loss = train_one_epoch(
            model, train_loader, optimizer, scaler, scheduler, device, epoch, args
        )
        val_acc = evaluate(model, val_loader, device)
        print(f"epoch {epoch}: train loss {train_loss:.4f}, val acc {val_acc:.2%}")
        if val_acc > best_acc:
            best_acc = val_acc
            torch.save(model.state_dict(), args.out)


if __name__ == "__main__":
    main()
