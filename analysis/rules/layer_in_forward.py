"""A layer with parameters is built inside `forward()`: new random weights on every call, never trained.

`nn.Linear(...)`, `nn.Conv2d(...)`, `nn.Embedding(...)`, `nn.LayerNorm(...)` and the like create
fresh, randomly initialised parameters each time they are constructed. Built inside `forward`,
the layer is rebuilt on every step: its weights are not in `model.parameters()` when the
optimizer is created, so they are never updated, and every forward uses different random
weights. The loss plateaus at chance while the GPU hours run; the layer is also allocated on the
CPU, so on a GPU model the forward fails or silently copies.

How to fix: build the layer once in `__init__` (`self.proj = nn.Linear(...)`) and call it in
`forward`. If its size is only known from the first input, use a lazy module (`nn.LazyLinear`)
or build it once behind `if self.proj is None:`.
"""

from __future__ import annotations

from trainlint.rules import CallEvent, Fires, Quiet, Rule, RuleContext, ScopeAnalysis, Severity, shortened

_PARAMETERISED = frozenset({
    "Linear", "Bilinear", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d",
    "Embedding", "EmbeddingBag", "LayerNorm", "GroupNorm", "RMSNorm", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d",
    "RNN", "LSTM", "GRU", "RNNCell", "LSTMCell", "GRUCell", "MultiheadAttention", "PReLU",
    "Transformer", "TransformerEncoderLayer", "TransformerDecoderLayer",
})
_LAZY_GUARD_WORDS = ("None", "hasattr", "getattr", "_initialized", "_built")


class LayerInForward(Rule):
    code = "TL209"
    name = "layer-in-forward"
    severity = Severity.ERROR

    def check_scope(self, ctx: RuleContext, scope: ScopeAnalysis) -> None:
        function = scope.function
        if function is None or function.name != "forward" or function.owner is None:
            return
        if not ctx.summary.is_module_class(function.owner):
            return
        for call in scope.calls():
            layer = _layer(call)
            if layer is not None and not _built_once(scope, call):
                self._report(ctx, scope, call, layer)

    def _report(self, ctx: RuleContext, scope: ScopeAnalysis, call: CallEvent, layer: str) -> None:
        assert scope.function is not None and scope.function.owner is not None, "check() looks into module classes' forward"
        owner = scope.function.owner
        ctx.report(
            call.node,
            f"`{shortened(scope.chunk.code_for(call.node), 60)}` builds a new `{layer}` with fresh random weights every time "
            f"`{owner.name}.forward` runs: they are not among the parameters the optimizer updates, so this layer "
            f"never trains and every step uses different weights",
            evidence=[
                ((scope.chunk, scope.function.node.name), f"`{owner.name}.forward` runs on every step"),
                ((scope.chunk, call.node), f"a `{layer}` with parameters is constructed here"),
            ],
            help=f"build it once in `__init__` (`self.<name> = nn.{layer}(...)`) and call it in `forward`",
        )


def _layer(call: CallEvent) -> str | None:
    callee = call.callee or ""
    if callee.startswith("torch.nn.") and callee.count(".") == 2:
        name = callee.rpartition(".")[2]
        return name if name in _PARAMETERISED else None
    return None


def _built_once(scope: ScopeAnalysis, call: CallEvent) -> bool:
    """``if self.proj is None: self.proj = nn.Linear(...)`` and similar lazy initialisation."""
    for condition in call.context.conditions:
        if condition.test is not None and any(word in scope.chunk.code_for(condition.test) for word in _LAZY_GUARD_WORDS):
            return True
    return False


LayerInForward.MUST_FIRE = (
    Fires(
        """
        import torch.nn as nn

        class Classifier(nn.Module):
            def __init__(self, backbone):
                super().__init__()
                self.backbone = backbone

            def forward(self, x):
                features = self.backbone(x)
                head = nn.Linear(features.shape[-1], 10)
                return head(features)
        """
    ),
    Fires(
        """
        import torch
        from torch import nn

        class Net(nn.Module):
            def forward(self, x):
                x = nn.Conv2d(3, 16, 3)(x)
                return torch.relu(x)
        """
    ),
    Fires(
        """
        import torch.nn as nn

        class Seq(nn.Module):
            def forward(self, tokens):
                emb = nn.Embedding(1000, 64)(tokens)
                out, _ = nn.LSTM(64, 128, batch_first=True)(emb)
                return out
        """,
        count=2,
    ),
    Fires(
        """
        import torch.nn as nn

        class Block(nn.Module):
            def forward(self, x):
                self.norm = nn.LayerNorm(x.shape[-1])
                return self.norm(x)
        """
    ),
    Fires(
        """
        import torch.nn as nn

        class Base(nn.Module):
            pass

        class Head(Base):
            def forward(self, x):
                if x.dim() == 4:
                    x = x.flatten(1)
                return nn.Linear(x.shape[1], 2)(x)
        """
    ),
    Fires(
        """
        import torch
        import pytorch_lightning as pl

        class Lit(pl.LightningModule):
            def forward(self, x):
                attention = torch.nn.MultiheadAttention(64, 4)
                return attention(x, x, x)[0]
        """
    ),
)

LayerInForward.MUST_NOT_FIRE = (
    Quiet(
        """
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(128, 10)

            def forward(self, x):
                return self.fc(x)
        """
    ),
    Quiet(
        """
        import torch.nn as nn

        class Net(nn.Module):
            def forward(self, x):
                x = nn.ReLU()(x)
                x = nn.Dropout(0.1)(x)
                return nn.Flatten()(x)
        """
    ),
    Quiet(
        """
        import torch.nn as nn

        class Lazy(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = None

            def forward(self, x):
                if self.proj is None:
                    self.proj = nn.Linear(x.shape[-1], 64)
                return self.proj(x)
        """
    ),
    Quiet(
        """
        import torch.nn as nn

        def build(d):
            return nn.Linear(d, d)

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.layers = nn.ModuleList([nn.Linear(8, 8) for _ in range(4)])

            def forward(self, x):
                for layer in self.layers:
                    x = layer(x)
                return x
        """
    ),
    Quiet(
        """
        import torch.nn as nn

        class Wrapper:
            def forward(self, x):
                return nn.Linear(4, 4)(x)
        """
    ),
    Quiet(
        """
        import torch.nn as nn

        class Net(nn.Module):
            def build_head(self, d):
                return nn.Linear(d, 10)

            def forward(self, x):
                return self.head(x)
        """
    ),
    Quiet(
        """
        import torch.nn as nn

        class Net(nn.Module):
            def forward(self, x):
                if not hasattr(self, "head"):
                    self.head = nn.Linear(x.shape[-1], 10).to(x.device)
                return self.head(x)
        """
    ),
)
