# expect: none
"""Windows of accelerometer and gyroscope readings stored as NumPy arrays.

The data directory holds train_x.npy (N, time, channels), train_y.npy (N,) and the
same for test. A validation split is carved out of the training windows.
"""

import os

import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset


def load_arrays(root, split):
    x = np.load(os.path.join(root, f"{split}_x.npy")).astype(np.float32)
    y = np.load(os.path.join(root, f"{split}_y.npy")).astype(np.int64)
    return torch.from_numpy(x), torch.from_numpy(y)


def build_loaders(root, batch_size, workers, val_fraction, seed):
    """Train/validation/test loaders, standardised with training-split statistics."""
    x, y = load_arrays(root, "train")
    x_test, y_test = load_arrays(root, "test")

    order = torch.randperm(len(x), generator=torch.Generator().manual_seed(seed))
    n_val = int(len(x) * val_fraction)
    val_idx, train_idx = order[:n_val], order[n_val:]

    mean = x[train_idx].mean(dim=(0, 1))
    std = x[train_idx].std(dim=(0, 1)) + 1e-6
    train_set = TensorDataset((x[train_idx] - mean) / std, y[train_idx])
    val_set = TensorDataset((x[val_idx] - mean) / std, y[val_idx])
    test_set = TensorDataset((x_test - mean) / std, y_test)

    train_loader = DataLoader(
        train_set,
        batch_size=batch_size,
        shuffle=True,
        drop_last=True,
        num_workers=workers,
        pin_memory=True,
    )
    val_loader = DataLoader(
        val_set, batch_size=4 * batch_size, num_workers=workers, pin_memory=True
    )
    test_loader = DataLoader(
        test_set, batch_size=4 * batch_size, num_workers=workers, pin_memory=True
    )
    return train_loader, val_loader, test_loader
