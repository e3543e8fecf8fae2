"""Functional dropout inside a module ignores `model.eval()`: it stays on at evaluation and inference.

`F.dropout(x, p)` defaults to `training=True`. Unlike the `nn.Dropout` layer, the function does not
know whether its module is in training mode, so `model.eval()` does not turn it off: validation
scores are computed with random units dropped (noisy, pessimistic, and they move run to run),
checkpoint selection picks on noise, and the deployed model predicts with dropout on. Nothing
fails; the numbers are just wrong. The same holds for attention's own dropout,
`F.scaled_dot_product_attention(q, k, v, dropout_p=p)`: the rate is a plain argument.

How to fix: pass the module's mode, `F.dropout(x, p, training=self.training)`, or use an
`nn.Dropout(p)` layer built in `__init__`; for attention, `dropout_p=p if self.training else 0.0`.
"""

from __future__ import annotations

import libcst as cst

from trainlint.rules import (
    AssignEvent,
    CallEvent,
    Fires,
    Quiet,
    Rule,
    RuleContext,
    ScopeAnalysis,
    Severity,
    dotted,
    literal_value,
    shortened,
    walk,
)

_FUNCTIONAL_DROPOUT = frozenset({
    "torch.nn.functional.dropout", "torch.nn.functional.dropout1d", "torch.nn.functional.dropout2d",
    "torch.nn.functional.dropout3d", "torch.nn.functional.alpha_dropout", "torch.nn.functional.feature_alpha_dropout",
})
# Positions of `p` and `training` in those functions: (input, p, training, inplace).
_RATE_POSITION = 1
_TRAINING_POSITION = 2


class DropoutAlwaysOn(Rule):
    code = "TL211"
    name = "dropout-always-on"
    severity = Severity.ERROR

    def check_scope(self, ctx: RuleContext, scope: ScopeAnalysis) -> None:
        owner = scope.function.owner if scope.function is not None else None
        if owner is None or not ctx.summary.is_module_class(owner):
            return
        for call in scope.calls():
            if call.callee in _FUNCTIONAL_DROPOUT and not _sets_training(call) and not _only_while_training(call) \
                    and not _asked_for_by_the_caller(scope, call):
                self._report(ctx, scope, call, owner.name)
            elif call.callee == _ATTENTION and not _only_while_training(call):
                rate = _attention_dropout(scope, call)
                if rate is not None:
                    self._report_attention(ctx, scope, call, owner.name, rate)

    def _report(self, ctx: RuleContext, scope: ScopeAnalysis, call: CallEvent, owner: str) -> None:
        assert call.callee is not None and scope.function is not None and scope.function.owner is not None, (
            "check() reports a call to a dropout function in a method of a module class"
        )
        written = scope.chunk.code_for(call.node)
        function = call.callee.rpartition(".")[2]
        method = scope.function.name
        ctx.report(
            call.node,
            f"`{shortened(written, 60)}` in `{owner}.{method}` runs with `training=True` whatever the module's mode: "
            f"`model.eval()` does not turn it off, so evaluation and inference drop units at random",
            evidence=[
                ((scope.chunk, scope.function.owner.node.name), f"`{owner}` is an `nn.Module`: `eval()` only switches its layers"),
                ((scope.chunk, call.node), f"`{function}` without `training=`: always on"),
            ],
            help="pass `training=self.training` (or use an `nn.Dropout` layer)",
            fix=ctx.fix("pass `training=self.training`", [_add_training(ctx, call.node)], safe=True) if _has_self(scope) else None,
        )


    def _report_attention(self, ctx: RuleContext, scope: ScopeAnalysis, call: CallEvent, owner: str, rate: cst.Arg) -> None:
        assert scope.function is not None, "check() reports a call in a method of a module class"
        method = scope.function.name
        written = scope.chunk.code_for(rate.value)
        guarded = f"{written} if self.training else 0.0"
        fix = None
        if _has_self(scope) and rate.keyword is not None:
            value = guarded if not isinstance(rate.value, (cst.IfExp, cst.Lambda)) else f"({written}) if self.training else 0.0"
            fix = ctx.fix("drop only in training mode", [ctx.edit_replace(rate.value, value)], safe=True)
        ctx.report(
            call.node,
            f"`scaled_dot_product_attention(..., dropout_p={shortened(written, 40)})` in `{owner}.{method}` drops "
            f"attention weights whatever the module's mode: `model.eval()` does not reach a function's argument, so "
            f"evaluation and inference drop them at random",
            evidence=[
                ((scope.chunk, scope.function.owner.node.name) if scope.function.owner else None,
                 f"`{owner}` is an `nn.Module`: `eval()` only switches its layers"),
                ((scope.chunk, rate.value), "the dropout rate, the same in training and evaluation"),
            ],
            help=f"pass `dropout_p={shortened(guarded, 60)}`",
            fix=fix,
        )


_ATTENTION = "torch.nn.functional.scaled_dot_product_attention"
_ATTENTION_DROPOUT_POSITION = 4  # (query, key, value, attn_mask, dropout_p, is_causal, scale)


def _attention_dropout(scope: ScopeAnalysis, call: CallEvent) -> cst.Arg | None:
    """The `dropout_p` argument of an attention call when it can be non-zero in evaluation: not a zero
    literal, not a test of `self.training` (`p if self.training else 0.0`, or a name bound to one),
    not a parameter of the method (its caller decides, as Hugging Face's attention helpers do)."""
    if any(arg.star for arg in call.arg_nodes):
        return None
    positional = [arg for arg in call.arg_nodes if arg.keyword is None]
    rate = call.keyword("dropout_p") or (positional[_ATTENTION_DROPOUT_POSITION] if len(positional) > _ATTENTION_DROPOUT_POSITION else None)
    if rate is None:
        return None
    value = rate.value
    if isinstance(value, (cst.Integer, cst.Float)) and not literal_value(value):
        return None
    if _tests_training(value):
        return None
    if isinstance(value, cst.Name):
        if value.value in scope.params:
            return None
        binding = scope.last_binding(value.value)
        if binding is None or binding.value_node is None or _tests_training(binding.value_node):
            return None
        if any(isinstance(event, AssignEvent) and value.value in event.targets for event in scope.events if event is not binding):
            return None  # bound more than once: one binding may depend on the mode
    return rate


def _tests_training(node: cst.CSTNode) -> bool:
    return any(
        (isinstance(part, cst.Attribute) and dotted(part) == "self.training") or (isinstance(part, cst.Name) and part.value == "training")
        for part in walk(node)
    )


def _sets_training(call: CallEvent) -> bool:
    if call.keyword("training") is not None or any(arg.star for arg in call.arg_nodes):
        return True
    positional = [arg for arg in call.arg_nodes if arg.keyword is None]
    return len(positional) > _TRAINING_POSITION


def _asked_for_by_the_caller(scope: ScopeAnalysis, call: CallEvent) -> bool:
    """Outside ``forward``, a rate that is the method's own parameter (latent diffusion's
    ``p_sample(..., noise_dropout=0.)`` drops sampling noise when its caller asks): each call says
    whether to drop, which is the point, not the module's mode."""
    assert scope.function is not None, "check() passes a method's scope"
    if scope.function.name in {"forward", "__call__"}:
        return False
    positional = [arg for arg in call.arg_nodes if arg.keyword is None]
    rate = call.keyword("p") or (positional[_RATE_POSITION] if len(positional) > _RATE_POSITION else None)
    return rate is not None and isinstance(rate.value, cst.Name) and rate.value.value in scope.params


def _only_while_training(call: CallEvent) -> bool:
    """The call sits under ``if self.training:`` (``if self.training and p > 0:``): in eval mode it
    does not run, which is what ``training=self.training`` would give."""
    return any(condition.branch == "if" and _requires_training(condition.test) for condition in call.context.conditions)


def _requires_training(test: cst.BaseExpression | None) -> bool:
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return _requires_training(test.left) or _requires_training(test.right)
    return dotted(test) == "self.training" if test is not None else False


def _has_self(scope: ScopeAnalysis) -> bool:
    assert scope.function is not None, "a method's scope"
    params = scope.function.node.params.params
    return bool(params) and params[0].name.value == "self"


def _add_training(ctx: RuleContext, node: cst.Call):
    if not node.args:
        return None
    last = node.args[-1]
    if isinstance(last.comma, cst.Comma):
        return ctx.edit_insert_after(last.comma, " training=self.training,")
    return ctx.edit_insert_after(last, ", training=self.training")


DropoutAlwaysOn.MUST_FIRE = (
    Fires(  # the rate is forward's own parameter: every call drops, in eval mode too
        """
        import torch.nn as nn
        import torch.nn.functional as F


        class Head(nn.Module):
            def __init__(self, dim, classes):
                super().__init__()
                self.fc = nn.Linear(dim, classes)

            def forward(self, x, drop_rate=0.1):
                return self.fc(F.dropout(x, p=drop_rate))
        """,
        fixed="""
        import torch.nn as nn
        import torch.nn.functional as F


        class Head(nn.Module):
            def __init__(self, dim, classes):
                super().__init__()
                self.fc = nn.Linear(dim, classes)

            def forward(self, x, drop_rate=0.1):
                return self.fc(F.dropout(x, p=drop_rate, training=self.training))
        """,
    ),
    Fires(
        """
        import torch.nn as nn
        import torch.nn.functional as F

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc1 = nn.Linear(784, 256)
                self.fc2 = nn.Linear(256, 10)

            def forward(self, x):
                x = F.relu(self.fc1(x))
                x = F.dropout(x, 0.5)
                return self.fc2(x)
        """,
        fixed="""
        import torch.nn as nn
        import torch.nn.functional as F

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc1 = nn.Linear(784, 256)
                self.fc2 = nn.Linear(256, 10)

            def forward(self, x):
                x = F.relu(self.fc1(x))
                x = F.dropout(x, 0.5, training=self.training)
                return self.fc2(x)
        """,
    ),
    Fires(
        """
        import torch
        from torch import nn

        class Block(nn.Module):
            def forward(self, x):
                return torch.nn.functional.dropout(x, p=0.1)
        """,
        fixed="""
        import torch
        from torch import nn

        class Block(nn.Module):
            def forward(self, x):
                return torch.nn.functional.dropout(x, p=0.1, training=self.training)
        """,
    ),
    Fires(
        """
        import torch.nn as nn
        from torch.nn.functional import dropout2d

        class ConvNet(nn.Module):
            def forward(self, x):
                x = dropout2d(x, 0.25)
                return x
        """,
        fixed="""
        import torch.nn as nn
        from torch.nn.functional import dropout2d

        class ConvNet(nn.Module):
            def forward(self, x):
                x = dropout2d(x, 0.25, training=self.training)
                return x
        """,
    ),
    Fires(
        """
        import torch.nn as nn
        import torch.nn.functional as F

        class Encoder(nn.Module):
            def _embed(self, tokens):
                return F.dropout(self.embedding(tokens), p=self.p)

            def forward(self, tokens):
                return self._embed(tokens)
        """,
        fixed="""
        import torch.nn as nn
        import torch.nn.functional as F

        class Encoder(nn.Module):
            def _embed(self, tokens):
                return F.dropout(self.embedding(tokens), p=self.p, training=self.training)

            def forward(self, tokens):
                return self._embed(tokens)
        """,
    ),
    Fires(
        """
        import torch.nn as nn
        import torch.nn.functional as F

        class Base(nn.Module):
            pass

        class Head(Base):
            def forward(self, x):
                return F.alpha_dropout(
                    x,
                    0.2,
                )
        """,
        fixed="""
        import torch.nn as nn
        import torch.nn.functional as F

        class Base(nn.Module):
            pass

        class Head(Base):
            def forward(self, x):
                return F.alpha_dropout(
                    x,
                    0.2, training=self.training,
                )
        """,
    ),
    Fires(
        """
        import pytorch_lightning as pl
        import torch.nn.functional as F

        class LitModel(pl.LightningModule):
            def forward(self, x):
                return self.head(F.dropout(self.body(x), 0.3))
        """,
        fixed="""
        import pytorch_lightning as pl
        import torch.nn.functional as F

        class LitModel(pl.LightningModule):
            def forward(self, x):
                return self.head(F.dropout(self.body(x), 0.3, training=self.training))
        """,
    ),
    Fires(  # attention's own dropout: `dropout_p` is a plain argument, which `eval()` cannot reach
        """
        import torch.nn as nn
        import torch.nn.functional as F


        class CausalSelfAttention(nn.Module):
            def __init__(self, config):
                super().__init__()
                self.n_head = config.n_head
                self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd)
                self.c_proj = nn.Linear(config.n_embd, config.n_embd)
                self.attn_dropout = config.attn_pdrop

            def forward(self, x):
                B, T, C = x.size()
                q, k, v = self.c_attn(x).split(C, dim=2)
                q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
                k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
                v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
                y = F.scaled_dot_product_attention(q, k, v, dropout_p=self.attn_dropout, is_causal=True)
                return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))
        """,
        fixed="""
        import torch.nn as nn
        import torch.nn.functional as F


        class CausalSelfAttention(nn.Module):
            def __init__(self, config):
                super().__init__()
                self.n_head = config.n_head
                self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd)
                self.c_proj = nn.Linear(config.n_embd, config.n_embd)
                self.attn_dropout = config.attn_pdrop

            def forward(self, x):
                B, T, C = x.size()
                q, k, v = self.c_attn(x).split(C, dim=2)
                q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
                k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
                v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
                y = F.scaled_dot_product_attention(q, k, v, dropout_p=self.attn_dropout if self.training else 0.0, is_causal=True)
                return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))
        """,
    ),
)

DropoutAlwaysOn.MUST_NOT_FIRE = (
    Quiet(  # attention dropout only in training: inline, through a name, or zero
        """
        import torch
        import torch.nn as nn


        class Attention(nn.Module):
            def __init__(self, dim, heads, dropout=0.1):
                super().__init__()
                self.heads = heads
                self.qkv = nn.Linear(dim, dim * 3)
                self.dropout = dropout

            def forward(self, x, mask=None):
                q, k, v = self.qkv(x).chunk(3, dim=-1)
                a = torch.nn.functional.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout if self.training else 0.0)
                dropout_p = 0.0 if not self.training else self.dropout
                b = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)
                c = torch.nn.functional.scaled_dot_product_attention(q, k, v, mask, 0.0, False)
                return a + b + c
        """
    ),
    Quiet(  # the caller decides the rate: it passes `self.attention_dropout if self.training else 0.0`
        """
        import torch.nn as nn
        import torch.nn.functional as F


        class SdpaAttention(nn.Module):
            def __init__(self, config):
                super().__init__()
                self.attention_dropout = config.attention_dropout
                self.o_proj = nn.Linear(config.hidden_size, config.hidden_size)

            def attend(self, query, key, value, mask, dropout=0.0):
                return F.scaled_dot_product_attention(query, key, value, attn_mask=mask, dropout_p=dropout)

            def forward(self, query, key, value, mask):
                out = self.attend(query, key, value, mask, dropout=self.attention_dropout if self.training else 0.0)
                return self.o_proj(out)
        """
    ),
    Quiet(  # a sampling method drops its noise when the caller asks for it: latent diffusion's p_sample
        """
        import torch
        import torch.nn as nn


        class LatentDiffusion(nn.Module):
            def __init__(self, unet):
                super().__init__()
                self.unet = unet

            @torch.no_grad()
            def p_sample(self, x, t, temperature=1.0, noise_dropout=0.0):
                model_mean, model_log_variance = self.unet(x, t).chunk(2, dim=1)
                noise = torch.randn_like(x) * temperature
                if noise_dropout > 0.0:
                    noise = torch.nn.functional.dropout(noise, p=noise_dropout)
                nonzero_mask = (t != 0).float().reshape(-1, *((1,) * (x.dim() - 1)))
                return model_mean + nonzero_mask * (0.5 * model_log_variance).exp() * noise
        """
    ),
    Quiet(  # dropout applied only while training, EfficientNet's head as pytorch-cifar writes it
        """
        import torch.nn as nn
        import torch.nn.functional as F


        class EfficientNet(nn.Module):
            def __init__(self, cfg, num_classes=10):
                super().__init__()
                self.cfg = cfg
                self.conv1 = nn.Conv2d(3, 32, kernel_size=3, stride=1, padding=1, bias=False)
                self.bn1 = nn.BatchNorm2d(32)
                self.linear = nn.Linear(32, num_classes)

            def forward(self, x):
                out = F.relu(self.bn1(self.conv1(x)))
                out = F.adaptive_avg_pool2d(out, 1).flatten(1)
                dropout_rate = self.cfg["dropout_rate"]
                if self.training and dropout_rate > 0:
                    out = F.dropout(out, p=dropout_rate)
                return self.linear(out)
        """
    ),
    Quiet(
        """
        import torch.nn as nn
        import torch.nn.functional as F

        class Net(nn.Module):
            def forward(self, x):
                return F.dropout(x, 0.5, training=self.training)
        """
    ),
    Quiet(
        """
        import torch.nn as nn
        import torch.nn.functional as F

        class Net(nn.Module):
            def forward(self, x):
                return F.dropout(x, 0.5, self.training)
        """
    ),
    Quiet(
        """
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.drop = nn.Dropout(0.5)

            def forward(self, x):
                return self.drop(x)
        """
    ),
    Quiet(
        """
        import torch.nn as nn
        import torch.nn.functional as F

        class MCDropoutNet(nn.Module):
            def forward(self, x):
                return F.dropout(x, 0.5, training=True)  # Monte Carlo dropout: on at inference on purpose
        """
    ),
    Quiet(
        """
        import torch.nn.functional as F

        def augment(x, p=0.1):
            return F.dropout(x, p)
        """
    ),
    Quiet(
        """
        import torch.nn as nn
        import torch.nn.functional as F

        class Net(nn.Module):
            def forward(self, x, **kwargs):
                return F.dropout(x, **kwargs)
        """
    ),
    Quiet(
        """
        class Helper:
            def forward(self, x):
                import torch.nn.functional as F
                return F.dropout(x, 0.5)
        """
    ),
)
