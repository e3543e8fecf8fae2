# fix-check: TL403 same-output
import argparse

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=3)
args = parser.parse_args([])
if args.seed:
    torch.manual_seed(args.seed)
print(f"{torch.randn(3).sum().item():.6f}")
