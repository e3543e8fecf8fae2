# expect: TL101@76, TL102@83, TL101@90
"""Fine-tune a causal language model on plain-text files with a hand-written loop.

    python lm_finetune.py --model gpt2 --train train.txt --valid valid.txt --bf16
"""

import argparse
import math
import os

import torch
from torch.utils.data import DataLoader, Dataset
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    get_linear_schedule_with_warmup,
    set_seed,
)


def parse_args():
    parser = argparse.ArgumentParser(description="causal LM fine-tuning")
    parser.add_argument("--model", default="gpt2", help="hub id or local checkpoint directory")
    parser.add_argument("--train", required=True, help="plain-text training file")
    parser.add_argument("--valid", required=True, help="plain-text validation file")
    parser.add_argument("--block-size", type=int, default=512)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--lr", type=float, default=5e-5)
    parser.add_argument("--weight-decay", type=float, default=0.01)
    parser.add_argument("--warmup-ratio", type=float, default=0.06)
    parser.add_argument("--max-grad-norm", type=float, default=1.0)
    parser.add_argument("--bf16", action="store_true", help="autocast the forward pass to bfloat16")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--log-every", type=int, default=20)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--out", default="finetuned")
    return parser.parse_args()


class TextBlocks(Dataset):
    """A text file tokenised once and cut into contiguous blocks of block_size tokens."""

    def __init__(self, path, tokenizer, block_size):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        ids = tokenizer(text, return_attention_mask=False)["input_ids"]
        n_blocks = len(ids) // block_size
        if n_blocks == 0:
            raise ValueError(f"{path} has fewer than {block_size} tokens")
        blocks = torch.tensor(ids[: n_blocks * block_size], dtype=torch.long)
        self.blocks = blocks.view(n_blocks, block_size)

    def __len__(self):
        return self.blocks.size(0)

    def __getitem__(self, index):
        return self.blocks[index]


def train_one_epoch(model, loader, optimizer, scheduler, device, epoch, args):
    model.train()
    total_loss = torch.zeros((), device=device)
    for step, input_ids in enumerate(loader):
        input_ids = input_ids.to(device, non_blocking=True)
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=args.bf16):
            outputs = model(input_ids=input_ids, labels=input_ids)
        loss = outputs.loss

        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm)
        optimizer.step()
        scheduler.step()

        total_loss += loss
        if step % args.log_every == 0:
            lr = scheduler.get_last_lr()[0]
            print(f"epoch {epoch} step {step}/{len(loader)} loss {loss.item():.4f} lr {lr:.2e}")
    return total_loss.item() / len(loader)


def evaluate(model, loader, device, args):
    model.eval()
    total_loss = torch.zeros((), device=device)
    for input_ids in loader:
        input_ids = input_ids.to(device, non_blocking=True)
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=args.bf16):
            outputs = model(input_ids=input_ids, labels=input_ids)
        total_loss += outputs.loss.float()
    mean_loss = total_loss.item() / len(loader)
    return mean_loss, math.exp(mean_loss)


def main():
    args = parse_args()
    set_seed(args.seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model).to(device)

    train_set = TextBlocks(args.train, tokenizer, args.block_size)
    valid_set = TextBlocks(args.valid, tokenizer, args.block_size)
    train_loader = DataLoader(
        train_set,
        batch_size=args.batch_size,
        shuffle=True,
        drop_last=True,
        num_workers=args.workers,
        pin_memory=True,
    )
    valid_loader = DataLoader(
        valid_set,
        batch_size=args.batch_size,
        shuffle=False,
        num_workers=args.workers,
        pin_memory=True,
    )

    # No weight decay on biases and normalisation weights.
    decay = [p for p in model.parameters() if p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.ndim < 2]
    optimizer = torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": args.weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ],
        lr=args.lr,
    )
    total_steps = args.epochs * len(train_loader)
    scheduler = get_linear_schedule_with_warmup(
        optimizer, int(args.warmup_ratio * total_steps), total_steps
    )

    best_loss = math.inf
    for epoch in range(args.epochs):
        train_loss = train_one_epoch(model, train_loader, optimizer, scheduler, device, epoch, args)
        valid_loss, perplexity = evaluate(model, valid_loader, device, args)
        print(
            f"epoch {epoch}: train loss {train_loss:.4f}, "
            f"valid loss {valid_loss:.4f}, perplexity {perplexity:.2f}"
        )
        if valid_loss < best_loss:
            best_loss = valid_loss
            os.makedirs(args.out, exist_ok=True)
            model.save_pretrained(args.out)
            tokenizer.save_pretrained(args.out)


if __name__ == "__main__":
    main()
