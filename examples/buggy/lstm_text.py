# expect: TL303@111, TL205@125
"""Bidirectional LSTM text classifier trained on TSV files of (label, text) rows.

    python lstm_text.py --train train.tsv --valid valid.tsv --epochs 10
"""

import argparse
import collections
import csv
import re

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_sequence
from torch.utils.data import DataLoader, Dataset

PAD, UNK = 0, 1
TOKEN_RE = re.compile(r"[a-z0-9']+")


def parse_args():
    parser = argparse.ArgumentParser(description="BiLSTM text classifier")
    parser.add_argument("--train", required=True, help="TSV: integer label <tab> text")
    parser.add_argument("--valid", required=True)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--max-len", type=int, default=400)
    parser.add_argument("--min-freq", type=int, default=2)
    parser.add_argument("--max-vocab", type=int, default=50_000)
    parser.add_argument("--clip", type=float, default=1.0)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--log-every", type=int, default=100)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--out", default="lstm_classifier.pt")
    return parser.parse_args()


def tokenize(text):
    return TOKEN_RE.findall(text.lower())


def read_tsv(path):
    with open(path, newline="", encoding="utf-8") as f:
        return [(int(label), text) for label, text in csv.reader(f, delimiter="\t")]


def build_vocab(rows, min_freq, max_size):
    counts = collections.Counter(tok for _, text in rows for tok in tokenize(text))
    words = [w for w, c in counts.most_common(max_size) if c >= min_freq]
    return {w: i for i, w in enumerate(["<pad>", "<unk>"] + words)}


class TextDataset(Dataset):
    def __init__(self, rows, vocab, max_len):
        self.examples = []
        for label, text in rows:
            ids = [vocab.get(tok, UNK) for tok in tokenize(text)[:max_len]] or [UNK]
            self.examples.append((torch.tensor(ids), label))

    def __len__(self):
        return len(self.examples)

    def __getitem__(self, index):
        return self.examples[index]


def collate(batch):
    seqs, labels = zip(*batch)
    lengths = torch.tensor([len(s) for s in seqs])  # stays on the CPU for packing
    return pad_sequence(seqs, batch_first=True, padding_value=PAD), lengths, torch.tensor(labels)


class LSTMClassifier(nn.Module):
    def __init__(self, vocab_size, num_classes, embed_dim=200, hidden=256, layers=2, dropout=0.3):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, embed_dim, padding_idx=PAD)
        self.lstm = nn.LSTM(
            embed_dim,
            hidden,
            num_layers=layers,
            batch_first=True,
            bidirectional=True,
            dropout=dropout,
        )
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(2 * hidden, num_classes)

    def forward(self, tokens, lengths):
        x = self.dropout(self.embed(tokens))
        packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        _, (h_n, _) = self.lstm(packed)
        # Final forward and backward states of the top layer.
        h = torch.cat([h_n[-2], h_n[-1]], dim=1)
        return self.head(self.dropout(h))


def class_weights(rows, num_classes):
    """Inverse-frequency weights, so rare classes are not ignored."""
    counts = torch.bincount(torch.tensor([label for label, _ in rows]), minlength=num_classes)
    return counts.sum() / (num_classes * counts.clamp(min=1).float())


def train_one_epoch(model, loader, optimizer, weights, device, epoch, args):
    loss_sum = torch.zeros((), device=device)
    for step, (tokens, lengths, labels) in enumerate(loader):
        tokens = tokens.to(device, non_blocking=True)
        labels = labels.to(device, non_blocking=True)
        logits = model(tokens, lengths)
        loss = F.cross_entropy(logits, labels, weight=weights.to(device))

        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        optimizer.step()

        loss_sum += loss.detach()
        if step % args.log_every == 0:
            print(f"epoch {epoch} step {step}/{len(loader)} loss {loss.item():.4f}")
    return loss_sum.item() / len(loader)


def validate(model, loader, device):
    model.eval()
    correct = torch.zeros((), dtype=torch.long, device=device)
    with torch.no_grad():
        for tokens, lengths, labels in loader:
            tokens = tokens.to(device, non_blocking=True)
            labels = labels.to(device, non_blocking=True)
            logits = model(tokens, lengths)
            correct += (logits.argmax(dim=1) == labels).sum()
    return correct.item() / len(loader.dataset)


def main():
    args = parse_args()
    torch.manual_seed(args.seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    train_rows, valid_rows = read_tsv(args.train), read_tsv(args.valid)
    vocab = build_vocab(train_rows, args.min_freq, args.max_vocab)
    num_classes = max(label for label, _ in train_rows) + 1
    train_loader = DataLoader(
        TextDataset(train_rows, vocab, args.max_len),
        batch_size=args.batch_size,
        shuffle=True,
        collate_fn=collate,
        num_workers=args.workers,
        pin_memory=True,
    )
    valid_loader = DataLoader(
        TextDataset(valid_rows, vocab, args.max_len),
        batch_size=args.batch_size,
        shuffle=False,
        collate_fn=collate,
        num_workers=args.workers,
        pin_memory=True,
    )

    model = LSTMClassifier(len(vocab), num_classes).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    weights = class_weights(train_rows, num_classes)

    best_acc = 0.0
    for epoch in range(args.epochs):
        train_loss = train_one_epoch(model, train_loader, optimizer, weights, device, epoch, args)
        valid_acc = validate(model, valid_loader, device)
        print(f"epoch {epoch}: train loss {train_loss:.4f}, valid acc {valid_acc:.2%}")
        if valid_acc > best_acc:
            best_acc = valid_acc
            torch.save({"model": model.state_dict(), "vocab": vocab}, args.out)


if __name__ == "__main__":
    main()
