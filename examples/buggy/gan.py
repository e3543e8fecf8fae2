# expect: TL302@108, TL101@117
"""DCGAN on a folder of images at 64x64 (faces, bedrooms, ...).

    python gan.py --data ./celeba --epochs 25 --samples samples/
"""

import argparse
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader
from torchvision import datasets, transforms
from torchvision.utils import save_image


def parse_args():
    parser = argparse.ArgumentParser(description="DCGAN")
    parser.add_argument("--data", required=True, help="ImageFolder root (one or more subfolders)")
    parser.add_argument("--epochs", type=int, default=25)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--nz", type=int, default=100, help="latent size")
    parser.add_argument("--lr", type=float, default=2e-4)
    parser.add_argument("--beta1", type=float, default=0.5)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--log-every", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--samples", default="samples")
    return parser.parse_args()


class Generator(nn.Module):
    def __init__(self, nz=100, ngf=64, channels=3):
        super().__init__()

        def up(c_in, c_out, stride=2, padding=1):
            return [
                nn.ConvTranspose2d(c_in, c_out, 4, stride, padding, bias=False),
                nn.BatchNorm2d(c_out),
                nn.ReLU(inplace=True),
            ]

        self.net = nn.Sequential(
            *up(nz, ngf * 8, stride=1, padding=0),  # 4x4
            *up(ngf * 8, ngf * 4),  # 8x8
            *up(ngf * 4, ngf * 2),  # 16x16
            *up(ngf * 2, ngf),  # 32x32
            nn.ConvTranspose2d(ngf, channels, 4, 2, 1, bias=False),  # 64x64
            nn.Tanh(),
        )

    def forward(self, z):
        return self.net(z)


class Discriminator(nn.Module):
    """Outputs one real/fake logit per image; the loss applies the sigmoid."""

    def __init__(self, ndf=64, channels=3):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(channels, ndf, 4, 2, 1, bias=False),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ndf * 2),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf * 2, ndf * 4, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ndf * 4),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf * 4, ndf * 8, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ndf * 8),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf * 8, 1, 4, 1, 0, bias=False),
        )

    def forward(self, x):
        return self.net(x).view(-1)


def init_weights(module):
    if isinstance(module, (nn.Conv2d, nn.ConvTranspose2d)):
        nn.init.normal_(module.weight, 0.0, 0.02)
    elif isinstance(module, nn.BatchNorm2d):
        nn.init.normal_(module.weight, 1.0, 0.02)
        nn.init.zeros_(module.bias)


def train_one_epoch(gen, disc, loader, opt_g, opt_d, criterion, device, epoch, args):
    gen.train()
    disc.train()
    d_losses = []
    g_loss_sum = torch.zeros((), device=device)
    for step, (real, _) in enumerate(loader):
        real = real.to(device, non_blocking=True)
        batch = real.size(0)
        # One-sided label smoothing for the discriminator's real targets.
        real_targets = torch.full((batch,), 0.9, device=device)
        fake_targets = torch.zeros(batch, device=device)

        # Discriminator: push D(real) up and D(G(z)) down.
        noise = torch.randn(batch, args.nz, 1, 1, device=device)
        fake = gen(noise)
        opt_d.zero_grad(set_to_none=True)
        d_loss = criterion(disc(real), real_targets) + criterion(disc(fake.detach()), fake_targets)
        d_loss.backward()
        d_grad_sq = 0.0
        for p in disc.parameters():
            d_grad_sq += p.grad.norm().item() ** 2
        opt_d.step()

        # Generator: make D call the fakes real.
        opt_g.zero_grad(set_to_none=True)
        g_loss = criterion(disc(fake), torch.ones(batch, device=device))
        g_loss.backward()
        opt_g.step()

        d_losses.append(d_loss)
        g_loss_sum += g_loss.detach()
        if step % args.log_every == 0:
            print(
                f"[{epoch}][{step}/{len(loader)}] d_loss {d_loss.item():.4f} "
                f"g_loss {g_loss.item():.4f} |grad D| {d_grad_sq ** 0.5:.3f}"
            )
    return torch.stack(d_losses).mean().item(), g_loss_sum.item() / len(loader)


@torch.no_grad()
def save_samples(gen, noise, path):
    gen.eval()
    fake = gen(noise)
    save_image(fake, path, normalize=True, nrow=8)


def main():
    args = parse_args()
    torch.manual_seed(args.seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    transform = transforms.Compose(
        [
            transforms.Resize(64),
            transforms.CenterCrop(64),
            transforms.ToTensor(),
            transforms.Normalize((0.5, 0.5, 0.5), (0.5, 0.5, 0.5)),
        ]
    )
    dataset = datasets.ImageFolder(args.data, transform=transform)
    loader = DataLoader(
        dataset,
        batch_size=args.batch_size,
        shuffle=True,
        drop_last=True,
        num_workers=args.workers,
        pin_memory=True,
    )

    gen = Generator(nz=args.nz).to(device)
    disc = Discriminator().to(device)
    gen.apply(init_weights)
    disc.apply(init_weights)
    criterion = nn.BCEWithLogitsLoss()
    opt_g = torch.optim.Adam(gen.parameters(), lr=args.lr, betas=(args.beta1, 0.999))
    opt_d = torch.optim.Adam(disc.parameters(), lr=args.lr, betas=(args.beta1, 0.999))

    # The same latent points every epoch, so the sample grids show progress.
    fixed_noise = torch.randn(64, args.nz, 1, 1, device=device)
    os.makedirs(args.samples, exist_ok=True)
    for epoch in range(args.epochs):
        d_loss, g_loss = train_one_epoch(
            gen, disc, loader, opt_g, opt_d, criterion, device, epoch, args
        )
        print(f"epoch {epoch}: d_loss {d_loss:.4f}, g_loss {g_loss:.4f}")
        save_samples(gen, fixed_noise, os.path.join(args.samples, f"epoch_{epoch:03d}.png"))
        torch.save(
            {"generator": gen.state_dict(), "discriminator": disc.state_dict()},
            os.path.join(args.samples, "dcgan.pt"),
        )


if __name__ == "__main__":
    main()
