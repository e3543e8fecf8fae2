# expect: TL501@62, TL302@96
"""Data-parallel ResNet-50 training on an ImageFolder tree, one process per GPU.

    torchrun --standalone --nproc_per_node=8 ddp_train.py --data /datasets/imagenet
"""

import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler
from torchvision import datasets, models, transforms

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def parse_args():
    parser = argparse.ArgumentParser(description="DDP ResNet-50")
    parser.add_argument("--data", required=True, help="directory with train/ and val/ subfolders")
    parser.add_argument("--num-classes", type=int, default=1000)
    parser.add_argument("--epochs", type=int, default=90)
    parser.add_argument("--batch-size", type=int, default=64, help="per GPU")
    parser.add_argument("--lr", type=float, default=0.1, help="for a global batch of 256")
    parser.add_argument("--weight-decay", type=float, default=1e-4)
    parser.add_argument("--workers", type=int, default=8, help="per GPU")
    parser.add_argument("--log-every", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="checkpoints")
    return parser.parse_args()


def setup_distributed():
    dist.init_process_group(backend="nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    return dist.get_rank(), dist.get_world_size(), local_rank


def build_loaders(args, rank, world_size):
    normalize = transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD)
    train_tf = transforms.Compose(
        [
            transforms.RandomResizedCrop(224),
            transforms.RandomHorizontalFlip(),
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
        num_workers=args.workers,
        pin_memory=True,
        drop_last=True,
        persistent_workers=args.workers > 0,
    )
    val_sampler = DistributedSampler(val_set, num_replicas=world_size, rank=rank, shuffle=False)
    val_loader = DataLoader(
        val_set,
        batch_size=args.batch_size,
        sampler=val_sampler,
        num_workers=args.workers,
        pin_memory=True,
    )
    return train_loader, val_loader


def train_one_epoch(model, loader, optimizer, device, epoch, rank, args):
    model.train()
    loss_sum = torch.zeros((), device=device)
    t0 = time.perf_counter()
    for step, (images, labels) in enumerate(loader):
        images = images.to(device, non_blocking=True)
        labels = labels.to(device, non_blocking=True)
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
            logits = model(images)
            loss = F.cross_entropy(logits, labels, label_smoothing=0.1)

        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        torch.cuda.synchronize()

        loss_sum += loss.detach()
        if (step + 1) % args.log_every == 0:
            elapsed = time.perf_counter() - t0
            if rank == 0:
                rate = args.log_every * images.size(0) / elapsed
                print(
                    f"epoch {epoch} step {step + 1}/{len(loader)} "
                    f"loss {loss.item():.4f} {rate:.0f} img/s per GPU"
                )
            t0 = time.perf_counter()
    dist.all_reduce(loss_sum)
    return loss_sum.item() / (len(loader) * dist.get_world_size())


@torch.no_grad()
def evaluate(model, loader, device):
    model.eval()
    # summed loss, correct predictions, examples seen (on this rank)
    stats = torch.zeros(3, device=device)
    for images, labels in loader:
        images = images.to(device, non_blocking=True)
        labels = labels.to(device, non_blocking=True)
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
            logits = model(images)
        stats[0] += F.cross_entropy(logits.float(), labels, reduction="sum")
        stats[1] += (logits.argmax(dim=1) == labels).sum()
        stats[2] += labels.numel()
    dist.all_reduce(stats)
    return (stats[0] / stats[2]).item(), (stats[1] / stats[2]).item()


def main():
    args = parse_args()
    rank, world_size, local_rank = setup_distributed()
    device = torch.device("cuda", local_rank)
    torch.manual_seed(args.seed)

    train_loader, val_loader = build_loaders(args, rank, world_size)
    model = models.resnet50(num_classes=args.num_classes).to(device)
    model = DDP(model, device_ids=[local_rank])

    # Linear scaling rule: lr grows with the global batch.
    lr = args.lr * args.batch_size * world_size / 256
    optimizer = torch.optim.SGD(
        model.parameters(), lr=lr, momentum=0.9, weight_decay=args.weight_decay
    )
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs)

    if rank == 0:
        os.makedirs(args.out, exist_ok=True)
    for epoch in range(args.epochs):
        train_loss = train_one_epoch(model, train_loader, optimizer, device, epoch, rank, args)
        val_loss, val_acc = evaluate(model, val_loader, device)
        scheduler.step()
        if rank == 0:
            print(
                f"epoch {epoch}: train loss {train_loss:.4f}, "
                f"val loss {val_loss:.4f}, val acc {val_acc:.2%}"
            )
            checkpoint = {
                "epoch": epoch,
                "model": model.module.state_dict(),
                "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(),
            }
            torch.save(checkpoint, os.path.join(args.out, "last.pt"))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
