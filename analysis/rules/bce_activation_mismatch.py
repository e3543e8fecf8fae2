"""A binary cross-entropy loss gets its input on the wrong side of the sigmoid.

`nn.BCEWithLogitsLoss`/`F.binary_cross_entropy_with_logits` apply the sigmoid themselves.
Feeding them `sigmoid` output squashes twice: every input lands in (0.5, 0.73), the loss can
never reach a confident prediction, gradients vanish and the model plateaus — the run finishes
and the model is quietly bad. `nn.BCELoss`/`F.binary_cross_entropy` expect probabilities in
[0, 1]; given raw logits they fail on the first out-of-range value (on a GPU as a device-side
assert that kills the job) or, where logits happen to fall in range, train on nonsense.
A model whose last layer is a convolution or a linear layer (a DCGAN discriminator) outputs
logits too: what the loss gets is read from the model's own layers, also in another file. A model
class whose `forward` ends in a sigmoid, fed by another file to a with-logits loss (or to a loss
module of the project whose `forward` calls one, a focal loss), is reported at that sigmoid.

How to fix: keep the model's output as logits and use the with-logits loss (it is also the
numerically stable one); apply `torch.sigmoid` only for metrics and inference. If the model
must output probabilities, pair it with `BCELoss`.
"""

from __future__ import annotations

import re

import libcst as cst

from trainlint.analysis.activation_consumers import activations_consumed, report_consumed
from trainlint.analysis.activations import (
    LossCall,
    bound_name,
    loss_calls,
    loss_evidence,
    loss_origin,
    occurrences,
    remove_activation,
)
from trainlint.analysis.torchapi import LOSSES_WANTING_BINARY_LOGITS, LOSSES_WANTING_BINARY_PROBS
from trainlint.rules import Fires, ModuleView, Quiet, Rule, RuleContext, ScopeAnalysis, Severity, Tag, quoted

# What BCELoss / F.binary_cross_entropy accept that their with-logits versions also accept.
_SHARED_CLASS_KEYWORDS = frozenset({"weight", "size_average", "reduce", "reduction"})
_SHARED_FUNCTION_KEYWORDS = _SHARED_CLASS_KEYWORDS | {"input", "target"}


class BceActivationMismatch(Rule):
    code = "TL203"
    name = "bce-activation-mismatch"
    severity = Severity.ERROR

    def check_scope(self, ctx: RuleContext, scope: ScopeAnalysis) -> None:
        for loss in loss_calls(ctx.module, scope, LOSSES_WANTING_BINARY_LOGITS | LOSSES_WANTING_BINARY_PROBS):
            if loss.loss in LOSSES_WANTING_BINARY_LOGITS and loss.kind == Tag.SIGMOID:
                self._report_sigmoid(ctx, loss)
            elif loss.loss in LOSSES_WANTING_BINARY_PROBS and loss.kind == Tag.LOGITS:
                self._report_logits(ctx, loss)
        for value, consumers in activations_consumed(ctx.module, scope, Tag.SIGMOID, LOSSES_WANTING_BINARY_LOGITS):
            report_consumed(
                ctx, scope, value, consumers, "sigmoid outputs",
                "applies the sigmoid itself: every input is squashed twice into (0.5, 0.73), so the loss cannot reach "
                "confident predictions and the gradients vanish", "return the logits; apply `torch.sigmoid` only for metrics or inference",
            )

    def _report_sigmoid(self, ctx: RuleContext, loss: LossCall) -> None:
        origin = loss_origin(ctx.module, loss)
        message = (
            f"`{quoted(loss.chunk, loss.event.node)}` gets sigmoid outputs from {origin.description}, but "
            f"{loss.loss} applies the sigmoid itself: every input is squashed twice into (0.5, 0.73), "
            "so the loss cannot reach confident predictions and the gradients vanish"
        )
        # only offered when the sigmoid feeds this loss and nothing else
        fix = ctx.fix("remove the sigmoid so the loss gets logits", remove_activation(ctx, loss, origin) or (), safe=True)
        ctx.report(
            loss.event.node, message, evidence=loss_evidence(loss, origin),
            help="pass the logits; apply `torch.sigmoid` only for metrics or inference", fix=fix,
        )

    def _report_logits(self, ctx: RuleContext, loss: LossCall) -> None:
        origin = loss_origin(ctx.module, loss)
        message = (
            f"`{quoted(loss.chunk, loss.event.node)}` gets raw logits from {origin.description}, but "
            f"{loss.loss} expects probabilities in [0, 1]: the first out-of-range value fails the run "
            "(a device-side assert on GPU), and in-range logits train on a meaningless loss"
        )
        ctx.report(
            loss.event.node, message, evidence=loss_evidence(loss, origin),
            help="use `BCEWithLogitsLoss` / `binary_cross_entropy_with_logits` on the logits",
            fix=ctx.fix("switch to the with-logits loss", _switch_to_logits_loss(ctx, loss) or (), safe=True),
        )


def _switch_to_logits_loss(ctx: RuleContext, loss: LossCall):
    """Rename BCELoss to BCEWithLogitsLoss where it is built (or the functional call), when every use is on logits."""
    if loss.criterion is None:
        call = loss.event.node
        if not _arguments_carry_over(call, _SHARED_FUNCTION_KEYWORDS, 6):
            return None
        return _rename_callee(ctx, call, "binary_cross_entropy_with_logits", "torch.nn.functional", loss.chunk)
    if loss.criterion.site is None:
        return None
    chunk, construction = loss.criterion.site
    if not isinstance(construction, cst.Call) or not _arguments_carry_over(construction, _SHARED_CLASS_KEYWORDS, 4):
        return None
    if not _only_used_on_logits(ctx.module, chunk, construction):
        return None
    return _rename_callee(ctx, construction, "BCEWithLogitsLoss", "torch.nn", chunk)


def _arguments_carry_over(call: cst.Call, keywords: frozenset[str], positional_limit: int) -> bool:
    positional = 0
    for arg in call.args:
        if arg.star:
            return False
        if arg.keyword is None:
            positional += 1
        elif arg.keyword.value not in keywords:
            return False
    return positional <= positional_limit


def _only_used_on_logits(module: ModuleView, chunk, construction: cst.Call) -> bool:
    """Every call of the criterion gets logits, and its name appears nowhere else (not passed on, not rebound)."""
    name = bound_name(module, chunk, construction)
    if name is None:
        return False
    uses = [
        call
        for scope in module.all_scopes
        for call in loss_calls(module, scope, LOSSES_WANTING_BINARY_PROBS)
        if call.criterion is not None and call.criterion.site is not None and call.criterion.site[1] is construction
    ]
    if not uses or any(call.kind != Tag.LOGITS for call in uses):
        return False
    bindings = calls = 0
    for match in occurrences(module.text, name):
        rest = module.text[match.end():]
        if re.match(r"\s*=(?!=)", rest):
            bindings += 1
        elif re.match(r"\s*\(", rest):
            calls += 1
        else:
            return False
    return bindings == 1 and calls == len(uses)


def _rename_callee(ctx: RuleContext, call: cst.Call, new_name: str, namespace: str, chunk):
    func = call.func
    if isinstance(func, cst.Attribute):
        return [ctx.edit_replace(func.attr, new_name, chunk=chunk)]
    spelled = ctx.name_for(f"{namespace}.{new_name}")
    if isinstance(func, cst.Name) and spelled is not None:
        return [ctx.edit_replace(func, spelled, chunk=chunk)]
    return None


BceActivationMismatch.MUST_FIRE = (
    Fires(
        """
        import torch
        import torch.nn as nn

        criterion = nn.BCEWithLogitsLoss(pos_weight=torch.tensor([3.0]))
        for x, y in loader:
            optimizer.zero_grad()
            loss = criterion(torch.sigmoid(model(x)), y)
            loss.backward()
            optimizer.step()
        """,
        fixed="""
        import torch
        import torch.nn as nn

        criterion = nn.BCEWithLogitsLoss(pos_weight=torch.tensor([3.0]))
        for x, y in loader:
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
        """,
        severity=Severity.ERROR,
    ),
    Fires(
        """
        import torch.nn.functional as F

        def train_step(model, batch):
            logits = model(batch["x"])
            return F.binary_cross_entropy_with_logits(logits.sigmoid().squeeze(1), batch["y"].float())
        """,
        fixed="""
        import torch.nn.functional as F

        def train_step(model, batch):
            logits = model(batch["x"])
            return F.binary_cross_entropy_with_logits(logits.squeeze(1), batch["y"].float())
        """,
        severity=Severity.ERROR,
    ),
    Fires(
        """
        import torch.nn as nn

        model = nn.Sequential(
            nn.Linear(20, 64),
            nn.ReLU(),
            nn.Linear(64, 1),
            nn.Sigmoid(),
        ).cuda()
        criterion = nn.BCEWithLogitsLoss()
        for x, y in loader:
            loss = criterion(model(x).squeeze(-1), y)
            loss.backward()
        """,
        fixed="""
        import torch.nn as nn

        model = nn.Sequential(
            nn.Linear(20, 64),
            nn.ReLU(),
            nn.Linear(64, 1),
        ).cuda()
        criterion = nn.BCEWithLogitsLoss()
        for x, y in loader:
            loss = criterion(model(x).squeeze(-1), y)
            loss.backward()
        """,
        severity=Severity.ERROR,
    ),
    Fires(
        """
        import torch
        import torch.nn as nn

        class Discriminator(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = nn.Sequential(nn.Linear(784, 256), nn.LeakyReLU(0.2))
                self.out = nn.Linear(256, 1)

            def forward(self, x):
                return torch.sigmoid(self.out(self.net(x)))

        netD = Discriminator()
        adversarial_loss = nn.BCEWithLogitsLoss()
        for real, _ in loader:
            d_loss = adversarial_loss(netD(real), torch.ones(real.size(0), 1))
            d_loss.backward()
        """,
        severity=Severity.ERROR,
    ),
    Fires(
        """
        import torch.nn as nn

        class Detector(nn.Module):
            def __init__(self):
                super().__init__()
                self.backbone = nn.Linear(512, 128)
                self.head = nn.Linear(128, 1)

            def forward(self, x):
                return self.head(self.backbone(x).relu())

        model = Detector()
        criterion = nn.BCELoss(reduction="sum")
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward()
        """,
        fixed="""
        import torch.nn as nn

        class Detector(nn.Module):
            def __init__(self):
                super().__init__()
                self.backbone = nn.Linear(512, 128)
                self.head = nn.Linear(128, 1)

            def forward(self, x):
                return self.head(self.backbone(x).relu())

        model = Detector()
        criterion = nn.BCEWithLogitsLoss(reduction="sum")
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward()
        """,
        severity=Severity.ERROR,
    ),
    Fires(
        """
        import torch.nn as nn
        import torch.nn.functional as F

        head = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 1))
        for feats, labels in loader:
            out = head(feats)
            loss = F.binary_cross_entropy(out.view(-1), labels)
            loss.backward()
        """,
        fixed="""
        import torch.nn as nn
        import torch.nn.functional as F

        head = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 1))
        for feats, labels in loader:
            out = head(feats)
            loss = F.binary_cross_entropy_with_logits(out.view(-1), labels)
            loss.backward()
        """,
        severity=Severity.ERROR,
    ),
    Fires(  # the same criterion also scores sigmoid outputs: switching its class would break that call
        """
        import torch
        import torch.nn as nn

        probe = nn.Linear(128, 1)
        bce = nn.BCELoss()
        for x, y in loader:
            bce(probe(x), y).backward()
        with torch.no_grad():
            val = bce(torch.sigmoid(probe(val_x)), val_y)
        """,
        severity=Severity.ERROR,
    ),
    Fires(
        """
        import torch.nn as nn
        import torch.nn.functional as F

        loss_fn = nn.BCEWithLogitsLoss()
        for x, y in loader:
            scores = model(x)
            probs = F.sigmoid(scores)
            loss_fn(probs, y).backward()
        """,
        fixed="""
        import torch.nn as nn
        import torch.nn.functional as F

        loss_fn = nn.BCEWithLogitsLoss()
        for x, y in loader:
            scores = model(x)
            probs = scores
            loss_fn(probs, y).backward()
        """,
        severity=Severity.ERROR,
    ),
    Fires(  # criterion and model both handed in by the caller
        """
        import torch
        import torch.nn as nn

        def train_one_epoch(model, loader, criterion, optimizer):
            model.train()
            for x, y in loader:
                logits = model(x)
                loss = criterion(torch.sigmoid(logits), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()

        def main():
            model = nn.Sequential(nn.Linear(30, 64), nn.ReLU(), nn.Linear(64, 1))
            criterion = nn.BCEWithLogitsLoss(pos_weight=torch.tensor(4.0))
            optimizer = torch.optim.Adam(model.parameters())
            for epoch in range(40):
                train_one_epoch(model, train_loader, criterion, optimizer)
        """,
        fixed="""
        import torch
        import torch.nn as nn

        def train_one_epoch(model, loader, criterion, optimizer):
            model.train()
            for x, y in loader:
                logits = model(x)
                loss = criterion(logits, y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()

        def main():
            model = nn.Sequential(nn.Linear(30, 64), nn.ReLU(), nn.Linear(64, 1))
            criterion = nn.BCEWithLogitsLoss(pos_weight=torch.tensor(4.0))
            optimizer = torch.optim.Adam(model.parameters())
            for epoch in range(40):
                train_one_epoch(model, train_loader, criterion, optimizer)
        """,
        severity=Severity.ERROR,
    ),
    Fires(  # a discriminator whose last layer is a convolution outputs raw scores, not probabilities
        """
        import torch
        import torch.nn as nn

        class Discriminator(nn.Module):
            def __init__(self, ndf=64):
                super().__init__()
                self.main = nn.Sequential(
                    nn.Conv2d(3, ndf, 4, 2, 1, bias=False),
                    nn.LeakyReLU(0.2, inplace=True),
                    nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False),
                    nn.BatchNorm2d(ndf * 2),
                    nn.LeakyReLU(0.2, inplace=True),
                    nn.Conv2d(ndf * 2, 1, 4, 1, 0, bias=False),
                )

            def forward(self, x):
                return self.main(x).view(-1, 1).squeeze(1)

        netD = Discriminator().cuda()
        criterion = nn.BCELoss()
        optimizerD = torch.optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
        for epoch in range(25):
            for real, _ in dataloader:
                netD.zero_grad()
                output = netD(real.cuda())
                errD_real = criterion(output, torch.ones_like(output))
                errD_real.backward()
                optimizerD.step()
        """,
        fixed="""
        import torch
        import torch.nn as nn

        class Discriminator(nn.Module):
            def __init__(self, ndf=64):
                super().__init__()
                self.main = nn.Sequential(
                    nn.Conv2d(3, ndf, 4, 2, 1, bias=False),
                    nn.LeakyReLU(0.2, inplace=True),
                    nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False),
                    nn.BatchNorm2d(ndf * 2),
                    nn.LeakyReLU(0.2, inplace=True),
                    nn.Conv2d(ndf * 2, 1, 4, 1, 0, bias=False),
                )

            def forward(self, x):
                return self.main(x).view(-1, 1).squeeze(1)

        netD = Discriminator().cuda()
        criterion = nn.BCEWithLogitsLoss()
        optimizerD = torch.optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
        for epoch in range(25):
            for real, _ in dataloader:
                netD.zero_grad()
                output = netD(real.cuda())
                errD_real = criterion(output, torch.ones_like(output))
                errD_real.backward()
                optimizerD.step()
        """,
        severity=Severity.ERROR,
    ),
    Fires(  # two files: the discriminator in models.py ends in a convolution
        """
        import torch
        import torch.nn as nn
        from models import Discriminator

        netD = Discriminator()
        criterion = nn.BCELoss()
        optimizerD = torch.optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
        for real, _ in dataloader:
            optimizerD.zero_grad()
            output = netD(real)
            loss = criterion(output, torch.ones_like(output))
            loss.backward()
            optimizerD.step()
        """,
        fixed="""
        import torch
        import torch.nn as nn
        from models import Discriminator

        netD = Discriminator()
        criterion = nn.BCEWithLogitsLoss()
        optimizerD = torch.optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
        for real, _ in dataloader:
            optimizerD.zero_grad()
            output = netD(real)
            loss = criterion(output, torch.ones_like(output))
            loss.backward()
            optimizerD.step()
        """,
        files={"models.py": """
            import torch.nn as nn

            class Discriminator(nn.Module):
                def __init__(self, ndf=64):
                    super().__init__()
                    self.main = nn.Sequential(
                        nn.Conv2d(3, ndf, 4, 2, 1, bias=False),
                        nn.LeakyReLU(0.2, inplace=True),
                        nn.Conv2d(ndf, 1, 4, 1, 0, bias=False),
                    )

                def forward(self, x):
                    return self.main(x).view(-1, 1).squeeze(1)
        """},
        severity=Severity.ERROR,
    ),
    Fires(  # a trainer method of train.py is handed, from the entry script, a detector whose forward ends in a sigmoid
        """
        import torch
        import torch.nn as nn

        class Trainer:
            def __init__(self, loader, epochs):
                self.loader = loader
                self.epochs = epochs
                self.criterion = nn.BCEWithLogitsLoss()

            def fit(self, detector, optimizer):
                for epoch in range(self.epochs):
                    for images, labels in self.loader:
                        optimizer.zero_grad()
                        scores = detector(images).squeeze(1)
                        loss = self.criterion(scores, labels.float())
                        loss.backward()
                        optimizer.step()
        """,
        files={
            "model.py": """
                import torch
                import torch.nn as nn

                class SpoofDetector(nn.Module):
                    def __init__(self, backbone, features):
                        super().__init__()
                        self.backbone = backbone
                        self.cls = nn.Linear(features, 1)

                    def forward(self, x):
                        return torch.sigmoid(self.cls(self.backbone(x)))
                """,
            "main.py": """
                import torch
                import torchvision
                from model import SpoofDetector
                from train import Trainer

                detector = SpoofDetector(torchvision.models.resnet18(num_classes=256), 256).cuda()
                trainer = Trainer(train_loader, epochs=30)
                trainer.fit(detector, torch.optim.Adam(detector.parameters(), lr=1e-4))
                """,
        },
        severity=Severity.ERROR,
    ),
    Fires(  # a classifier of this file returns sigmoid scores with a depth map; the scripts feed the scores to a focal loss built on the with-logits loss
        """
        import torch
        import torch.nn as nn


        class PadNet(nn.Module):
            def __init__(self, backbone, features=768):
                super().__init__()
                self.backbone = backbone
                self.depth = nn.Conv2d(features, 1, kernel_size=1)
                self.cls = nn.Linear(features, 1)

            def forward(self, x):
                fmap = self.backbone(x)
                map_x = self.depth(fmap).squeeze(1)
                x = self.cls(fmap.mean((2, 3)))
                x = torch.sigmoid(x)
                return x, map_x
        """,
        files={
            "losses.py": """
                import torch
                import torch.nn as nn
                import torch.nn.functional as F


                class WeightedFocalLoss(nn.Module):
                    def __init__(self, alpha=0.25, gamma=2):
                        super().__init__()
                        self.alpha = torch.tensor([alpha, 1 - alpha]).cuda()
                        self.gamma = gamma

                    def forward(self, inputs, targets):
                        bce = F.binary_cross_entropy_with_logits(inputs, targets, reduction="none")
                        at = self.alpha.gather(0, targets.long().view(-1))
                        pt = torch.exp(-bce)
                        return (at * (1 - pt) ** self.gamma * bce).mean()
                """,
            "main.py": """
                import torch
                from losses import WeightedFocalLoss
                from train import PadNet


                def run(backbone, loader, epochs):
                    model = PadNet(backbone).cuda()
                    criterion = WeightedFocalLoss(alpha=0.5, gamma=2).cuda()
                    depth_criterion = torch.nn.SmoothL1Loss().cuda()
                    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
                    for epoch in range(epochs):
                        for images, labels, depth in loader:
                            optimizer.zero_grad()
                            pred, map_y = model(images.cuda())
                            pred = torch.squeeze(pred)
                            loss = criterion(pred.type(torch.cuda.FloatTensor), labels.cuda().float())
                            loss = loss + depth_criterion(map_y, depth.cuda())
                            loss.backward()
                            optimizer.step()
                """,
        },
        severity=Severity.ERROR,
        at="        x = torch.sigmoid(x)",
    ),
)

BceActivationMismatch.MUST_NOT_FIRE = (
    Quiet(  # the same classifier, and a focal loss built on the probability loss: sigmoid then BCE is right
        """
        import torch
        import torch.nn as nn


        class PadNet(nn.Module):
            def __init__(self, backbone, features=768):
                super().__init__()
                self.backbone = backbone
                self.cls = nn.Linear(features, 1)

            def forward(self, x):
                x = self.cls(self.backbone(x).mean((2, 3)))
                return torch.sigmoid(x)
        """,
        files={
            "losses.py": """
                import torch
                import torch.nn as nn
                import torch.nn.functional as F


                class FocalLoss(nn.Module):
                    def __init__(self, gamma=2):
                        super().__init__()
                        self.gamma = gamma

                    def forward(self, probs, targets):
                        bce = F.binary_cross_entropy(probs, targets, reduction="none")
                        return ((1 - torch.exp(-bce)) ** self.gamma * bce).mean()
                """,
            "main.py": """
                import torch
                from losses import FocalLoss
                from train import PadNet


                def run(backbone, loader):
                    model = PadNet(backbone).cuda()
                    criterion = FocalLoss().cuda()
                    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
                    for images, labels in loader:
                        optimizer.zero_grad()
                        loss = criterion(model(images.cuda()).squeeze(1), labels.cuda().float())
                        loss.backward()
                        optimizer.step()
                """,
        },
    ),
    Quiet(  # the sigmoid is for metrics; the loss gets logits
        """
        import torch
        import torch.nn as nn

        criterion = nn.BCEWithLogitsLoss()
        for x, y in loader:
            logits = model(x)
            loss = criterion(logits, y)
            preds = (torch.sigmoid(logits) > 0.5).float()
            acc = (preds == y).float().mean()
            loss.backward()
        """
    ),
    Quiet(  # a model that ends in nn.Sigmoid paired with BCELoss is consistent
        """
        import torch.nn as nn

        model = nn.Sequential(nn.Linear(20, 1), nn.Sigmoid())
        criterion = nn.BCELoss()
        for x, y in loader:
            criterion(model(x), y).backward()
        """
    ),
    Quiet(  # sigmoid outputs as BCELoss input are what it expects
        """
        import torch
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(8, 1)

            def forward(self, x):
                return self.fc(x)

        model = Net()
        criterion = nn.BCELoss()
        for x, y in loader:
            criterion(torch.sigmoid(model(x)), y).backward()
        """
    ),
    Quiet(  # distillation: the teacher's sigmoid is the target, not the input
        """
        import torch
        import torch.nn.functional as F

        for x, _ in loader:
            with torch.no_grad():
                soft = torch.sigmoid(teacher(x))
            loss = F.binary_cross_entropy_with_logits(student(x), soft)
            loss.backward()
        """
    ),
    Quiet(  # unknown model output: nothing to judge
        """
        import torch.nn as nn

        model = build_model(cfg)
        criterion = nn.BCELoss()
        for x, y in loader:
            criterion(model(x), y).backward()
        """
    ),
    Quiet(  # multi-label classification on a Hugging Face model's logits
        """
        import torch.nn as nn
        from transformers import AutoModelForSequenceClassification

        model = AutoModelForSequenceClassification.from_pretrained("bert-base-uncased", num_labels=6)
        loss_fct = nn.BCEWithLogitsLoss()
        for batch in loader:
            outputs = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
            loss = loss_fct(outputs.logits, batch["labels"].float())
            loss.backward()
        """
    ),
    Quiet(  # a project's own loss of the same name
        """
        import torch
        from losses import BCEWithLogitsLoss

        criterion = BCEWithLogitsLoss(smooth=0.1)
        for x, y in loader:
            criterion(torch.sigmoid(model(x)), y).backward()
        """
    ),
    Quiet(  # the same discriminator ends in nn.Sigmoid, as BCELoss expects
        """
        import torch
        import torch.nn as nn

        class Discriminator(nn.Module):
            def __init__(self, ndf=64):
                super().__init__()
                self.main = nn.Sequential(
                    nn.Conv2d(3, ndf, 4, 2, 1, bias=False),
                    nn.LeakyReLU(0.2, inplace=True),
                    nn.Conv2d(ndf, 1, 4, 1, 0, bias=False),
                    nn.Sigmoid(),
                )

            def forward(self, x):
                return self.main(x).view(-1, 1).squeeze(1)

        netD = Discriminator().cuda()
        criterion = nn.BCELoss()
        for real, _ in dataloader:
            output = netD(real.cuda())
            criterion(output, torch.ones_like(output)).backward()
        """
    ),
)
