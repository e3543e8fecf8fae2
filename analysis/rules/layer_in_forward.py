"""A layer with parameters is built inside `forward()`: new random weights on every call, never trained.

`nn.Linear(...)`, `nn.Conv2d(...)`, `nn.Embedding(...)`, `nn.LayerNorm(...)` and the like create
fresh, randomly initialised parameters each time they are constructed. Built inside `forward`,
the layer is rebuilt on every step: its weights are not in `model.parameters()` when the
optimizer is created, so they are never updated, and every forward uses different random
weights. The loss plateaus at chance while the GPU hours run; the layer is also allocated on the
CPU, so on a GPU model the forward fails or silently copies. The same holds for a layer built by a
method or function that `forward` calls (`self.classify(features)`, a builder of another file), two
calls deep; it is reported where `forward` makes the call.

How to fix: build the layer once in `__init__` (`self.proj = nn.Linear(...)`) and call it in
`forward`. If its size is only known from the first input, use a lazy module (`nn.LazyLinear`)
or build it once behind `if self.proj is None:`.
"""

from __future__ import annotations

from trainlint.rules import (
    CallEvent,
    Fires,
    Quiet,
    Rule,
    RuleContext,
    ScopeAnalysis,
    Severity,
    ordered_events,
    shortened,
)

_PARAMETERISED = frozenset({
    "Linear", "Bilinear", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d",
    "Embedding", "EmbeddingBag", "LayerNorm", "GroupNorm", "RMSNorm", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d",
    "RNN", "LSTM", "GRU", "RNNCell", "LSTMCell", "GRUCell", "MultiheadAttention", "PReLU",
    "Transformer", "TransformerEncoderLayer", "TransformerDecoderLayer",
})
_LAZY_GUARD_WORDS = ("None", "hasattr", "getattr", "_initialized", "_built")
# How deep into the helpers `forward` calls (its own methods, functions of the workspace) layers are looked for.
_HELPER_DEPTH = 2


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
        helpers_reported = set()  # a helper that builds several layers is reported once, where forward calls it
        for call, chain in ordered_events(scope, None):
            if not isinstance(call, CallEvent) or len(chain) > _HELPER_DEPTH or (chain and chain[0] in helpers_reported):
                continue
            layer = _layer(call)
            if layer is not None and not any(_built_once(link) for link in (*chain, call)):
                self._report(ctx, scope, call, chain, layer)
                helpers_reported.update(chain[:1])

    def _report(self, ctx: RuleContext, scope: ScopeAnalysis, call: CallEvent, chain: tuple[CallEvent, ...], layer: str) -> None:
        assert scope.function is not None and scope.function.owner is not None, "check() looks into module classes' forward"
        owner = scope.function.owner
        reported = chain[0] if chain else call  # a helper's layer is reported where `forward` calls the helper
        through = f", through `{shortened(scope.chunk.code_for(reported.node), 60)}`," if chain else ""
        ctx.report(
            reported.node,
            f"`{shortened(call.chunk.code_for(call.node), 60)}` builds a new `{layer}` with fresh random weights every time "
            f"`{owner.name}.forward` runs{through}: they are not among the parameters the optimizer updates, so this layer "
            f"never trains and every step uses different weights",
            evidence=[
                ((scope.chunk, scope.function.node.name), f"`{owner.name}.forward` runs on every step"),
                *(((link.chunk, link.node), f"`{shortened(link.chunk.code_for(link.node), 40)}` runs on every forward") for link in chain),
                ((call.chunk, call.node), f"a `{layer}` with parameters is constructed here"),
            ],
            help=f"build it once in `__init__` (`self.<name> = nn.{layer}(...)`) and call it in `forward`",
        )


def _layer(call: CallEvent) -> str | None:
    callee = call.callee or ""
    if callee.startswith("torch.nn.") and callee.count(".") == 2:
        name = callee.rpartition(".")[2]
        return name if name in _PARAMETERISED else None
    return None


def _built_once(call: CallEvent) -> bool:
    """``if self.proj is None: self.proj = nn.Linear(...)`` and similar lazy initialisation, around the layer or
    around the call of the helper that builds it."""
    for condition in call.context.conditions:
        if condition.test is not None and any(word in call.chunk.code_for(condition.test) for word in _LAZY_GUARD_WORDS):
            return True
    return False


LayerInForward.MUST_FIRE = (
    Fires(  # the head is built by a method that forward calls: a new one every step
        """
        import torch.nn as nn


        class Classifier(nn.Module):
            def __init__(self, backbone, num_classes):
                super().__init__()
                self.backbone = backbone
                self.num_classes = num_classes

            def classify(self, features):
                head = nn.Linear(features.shape[-1], self.num_classes)
                return head(features)

            def forward(self, x):
                return self.classify(self.backbone(x))
        """,
        at="self.classify(self.backbone(x))",
    ),
    Fires(  # a builder of another file, called in forward instead of __init__
        """
        import torch.nn as nn

        from blocks import mlp


        class Critic(nn.Module):
            def __init__(self, encoder, hidden):
                super().__init__()
                self.encoder = encoder
                self.hidden = hidden

            def forward(self, state):
                features = self.encoder(state)
                return mlp(features.shape[-1], self.hidden)(features)
        """,
        files={"blocks.py": """
            import torch.nn as nn


            def mlp(dim, hidden):
                return nn.Sequential(nn.Linear(dim, hidden), nn.ReLU(), nn.Linear(hidden, 1))
            """},
        at="mlp(features.shape[-1], self.hidden)(features)",
    ),
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
    Quiet(  # the helper builds the head once, the first time forward runs
        """
        import torch.nn as nn


        class Classifier(nn.Module):
            def __init__(self, backbone):
                super().__init__()
                self.backbone = backbone
                self.head = None

            def build_head(self, width):
                return nn.Linear(width, 10)

            def forward(self, x):
                features = self.backbone(x)
                if self.head is None:
                    self.head = self.build_head(features.shape[-1]).to(features.device)
                return self.head(features)
        """
    ),
)
