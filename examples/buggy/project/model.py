# expect: none
"""A 1-D convolutional activity classifier with attention pooling over time."""

import torch
import torch.nn as nn


class AttentionPool(nn.Module):
    """Weighted average over time steps, with weights the model learns."""

    def __init__(self, dim):
        super().__init__()
        self.score = nn.Linear(dim, 1)

    def forward(self, h):  # h: (batch, time, dim)
        weights = torch.softmax(self.score(h), dim=1)
        return (weights * h).sum(dim=1)


def conv_bn(c_in, c_out, kernel):
    return nn.Sequential(
        nn.Conv1d(c_in, c_out, kernel, padding=kernel // 2, bias=False),
        nn.BatchNorm1d(c_out),
        nn.ReLU(inplace=True),
    )


class ActivityNet(nn.Module):
    """Maps a window of sensor readings (batch, time, channels) to activity logits."""

    def __init__(self, in_channels, num_classes, width=64, dropout=0.2):
        super().__init__()
        self.encoder = nn.Sequential(
            conv_bn(in_channels, width, 7),
            conv_bn(width, 2 * width, 5),
            conv_bn(2 * width, 2 * width, 3),
        )
        self.pool = AttentionPool(2 * width)
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(2 * width, num_classes)

    def forward(self, x):
        h = self.encoder(x.transpose(1, 2)).transpose(1, 2)  # (batch, time, 2 * width)
        return self.head(self.dropout(self.pool(h)))
