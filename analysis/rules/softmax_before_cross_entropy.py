"""A classification loss gets the wrong kind of input: probabilities into cross-entropy, logits into NLL.

`nn.CrossEntropyLoss` and `F.cross_entropy` take raw logits and apply log-softmax themselves.
Feeding them `softmax` output applies softmax twice: the "probabilities" the loss sees are
squashed into a narrow band, the gradients shrink towards zero, and the model trains far slower
or plateaus at a worse accuracy — with no error, just a wasted run. `nn.NLLLoss`/`F.nll_loss`
take log-probabilities: given raw logits it rewards pushing one score to infinity, given
probabilities it optimises `-p` instead of `-log p`. (`log_softmax` into cross-entropy is
harmless, since log-softmax of log-probabilities changes nothing, and is reported as a note.)
A model class whose `forward` ends in a softmax (also as the last module of an `nn.Sequential`,
added by `add_module` too) and whose output the training code of another file feeds to
cross-entropy is reported at that softmax, where the fix goes, citing the loss call; so is a forward
ending in a plain layer (raw logits) whose output another file feeds to NLL.

How to fix: give cross-entropy the logits — drop the `softmax` (or the final `nn.Softmax`
layer) and apply softmax only where you need probabilities (metrics, inference). For NLL, end
the model in `log_softmax`/`nn.LogSoftmax`, or switch to `CrossEntropyLoss` on logits.
"""

from __future__ import annotations

from trainlint.analysis.activation_consumers import activations_consumed, report_consumed
from trainlint.analysis.activations import (
    KIND_WORDS,
    LossCall,
    loss_calls,
    loss_evidence,
    loss_origin,
    remove_activation,
    rename_activation,
)
from trainlint.analysis.torchapi import LOSSES_WANTING_LOG_PROBS, LOSSES_WANTING_LOGITS
from trainlint.rules import Fires, Quiet, Rule, RuleContext, ScopeAnalysis, Severity, Tag, quoted

_CLASSIFICATION_LOSSES = LOSSES_WANTING_LOGITS | LOSSES_WANTING_LOG_PROBS


class SoftmaxBeforeCrossEntropy(Rule):
    code = "TL202"
    name = "softmax-before-cross-entropy"
    severity = Severity.ERROR

    def check_scope(self, ctx: RuleContext, scope: ScopeAnalysis) -> None:
        for loss in loss_calls(ctx.module, scope, _CLASSIFICATION_LOSSES):
            kind = loss.kind
            if loss.loss in LOSSES_WANTING_LOGITS and kind in {Tag.PROBS, Tag.LOG_PROBS}:
                self._report_cross_entropy(ctx, loss, kind)
            elif loss.loss in LOSSES_WANTING_LOG_PROBS and kind in {Tag.PROBS, Tag.LOGITS}:
                self._report_nll(ctx, loss, kind)
        for value, consumers in activations_consumed(ctx.module, scope, Tag.PROBS, LOSSES_WANTING_LOGITS):
            report_consumed(
                ctx, scope, value, consumers, "softmax probabilities",
                "applies log-softmax itself: softmax runs twice, the gradients shrink and training stalls or converges "
                "to a worse model", "return the logits; apply softmax only for metrics or inference",
            )
        for value, consumers in activations_consumed(ctx.module, scope, Tag.LOGITS, LOSSES_WANTING_LOG_PROBS):
            report_consumed(
                ctx, scope, value, consumers, "raw logits",
                "expects log-probabilities: it only negates the target's score, so the loss is unbounded below and "
                "the logits diverge", "end the forward in `log_softmax`, or train with `CrossEntropyLoss` on the logits",
            )

    def _report_cross_entropy(self, ctx: RuleContext, loss: LossCall, kind: str) -> None:
        origin = loss_origin(ctx.module, loss)
        edits = remove_activation(ctx, loss, origin)
        given = _given(loss)
        if kind == Tag.PROBS:
            message = (
                f"{given} gets softmax probabilities from {origin.description}, but {loss.loss} applies "
                "log-softmax itself: softmax runs twice, the gradients shrink and training stalls or "
                "converges to a worse model"
            )
            severity, help = Severity.ERROR, "pass the logits; apply softmax only for metrics or inference"
            # remove_activation gives edits only when the softmax feeds this loss and nothing else
            fix = ctx.fix("remove the softmax so the loss gets logits", edits or (), safe=True)
        else:
            message = (
                f"{given} gets log-probabilities from {origin.description}; {loss.loss} applies "
                "log-softmax itself, and log-softmax of log-probabilities changes nothing, so computing "
                "them first is redundant (the result is the same)"
            )
            severity, help = Severity.NOTE, "pass the logits and drop the `log_softmax` (harmless, but redundant work)"
            fix = ctx.fix("remove the redundant log_softmax", edits or (), safe=True)
        ctx.report(loss.event.node, message, evidence=loss_evidence(loss, origin), severity=severity, help=help, fix=fix)

    def _report_nll(self, ctx: RuleContext, loss: LossCall, kind: str) -> None:
        origin = loss_origin(ctx.module, loss)
        given = _given(loss)
        if kind == Tag.PROBS:
            consequence = "it minimises `-p` instead of `-log p`, a weak signal that barely penalises confident mistakes"
            fix = ctx.fix(
                "compute log-probabilities instead of probabilities",
                rename_activation(ctx, loss, origin, "log_softmax", "LogSoftmax") or (), safe=True,
            )
        else:
            consequence = "it only negates the target's score, so the loss is unbounded below and the logits diverge"
            fix = None
        message = (
            f"{given} gets {KIND_WORDS[kind]} from {origin.description}, but {loss.loss} expects "
            f"log-probabilities: {consequence}"
        )
        ctx.report(
            loss.event.node, message, evidence=loss_evidence(loss, origin),
            help="apply `log_softmax` before NLL, or use `CrossEntropyLoss` on the raw logits", fix=fix,
        )


def _given(loss: LossCall) -> str:
    return f"`{quoted(loss.chunk, loss.event.node)}`"


SoftmaxBeforeCrossEntropy.MUST_FIRE = (
    Fires(
        """
        import torch.nn as nn
        import torch.nn.functional as F

        criterion = nn.CrossEntropyLoss()
        for x, y in loader:
            logits = model(x)
            loss = criterion(F.softmax(logits, dim=1), y)
            loss.backward()
        """,
        fixed="""
        import torch.nn as nn
        import torch.nn.functional as F

        criterion = nn.CrossEntropyLoss()
        for x, y in loader:
            logits = model(x)
            loss = criterion(logits, y)
            loss.backward()
        """,
        severity=Severity.ERROR,
    ),
    Fires(
        """
        import torch
        import torch.nn as nn

        model = nn.Sequential(
            nn.Linear(784, 256),
            nn.ReLU(),
            nn.Linear(256, 10),
            nn.Softmax(dim=1),
        )
        model = model.to("cuda")
        criterion = nn.CrossEntropyLoss()
        optimizer = torch.optim.Adam(model.parameters())
        for images, labels in train_loader:
            optimizer.zero_grad()
            loss = criterion(model(images.view(-1, 784)), labels)
            loss.backward()
            optimizer.step()
        """,
        fixed="""
        import torch
        import torch.nn as nn

        model = nn.Sequential(
            nn.Linear(784, 256),
            nn.ReLU(),
            nn.Linear(256, 10),
        )
        model = model.to("cuda")
        criterion = nn.CrossEntropyLoss()
        optimizer = torch.optim.Adam(model.parameters())
        for images, labels in train_loader:
            optimizer.zero_grad()
            loss = criterion(model(images.view(-1, 784)), labels)
            loss.backward()
            optimizer.step()
        """,
        severity=Severity.ERROR,
    ),
    Fires(
        """
        import torch.nn as nn
        import torch.nn.functional as F

        class Classifier(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Linear(128, 64)
                self.head = nn.Linear(64, 5)

            def forward(self, x):
                x = F.relu(self.body(x))
                return F.softmax(self.head(x), dim=-1)

        class Trainer:
            def __init__(self, loader):
                self.model = Classifier().cuda()
                self.loader = loader

            def train_epoch(self, optimizer):
                for x, y in self.loader:
                    optimizer.zero_grad()
                    loss = F.cross_entropy(self.model(x), y)
                    loss.backward()
                    optimizer.step()
        """,
        severity=Severity.ERROR,
    ),
    Fires(
        """
        import torch
        import torch.nn as nn

        net = build()
        loss_fn = nn.CrossEntropyLoss(label_smoothing=0.1)
        for batch in loader:
            out = net(batch["x"])
            probs = torch.softmax(out, 1)
            loss = loss_fn(probs, batch["y"])
            loss.backward()
        """,
        fixed="""
        import torch
        import torch.nn as nn

        net = build()
        loss_fn = nn.CrossEntropyLoss(label_smoothing=0.1)
        for batch in loader:
            out = net(batch["x"])
            probs = out
            loss = loss_fn(probs, batch["y"])
            loss.backward()
        """,
        severity=Severity.ERROR,
    ),
    Fires(
        """
        import torch.nn.functional as F

        def step(model, x, y):
            out = model(x)
            probs = out.softmax(-1)
            loss = F.cross_entropy(probs, y)
            acc = (probs.argmax(-1) == y).float().mean()
            return loss, acc
        """,
        severity=Severity.ERROR,
    ),
    Fires(
        """
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(32, 4)

            def forward(self, x):
                return self.fc(x)

        model = Net()
        criterion = nn.NLLLoss()
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward()
        """,
        severity=Severity.ERROR,
    ),
    Fires(
        """
        import torch.nn.functional as F

        for x, y in loader:
            logits = model(x)
            loss = F.nll_loss(F.softmax(logits, dim=1), y)
            loss.backward()
        """,
        fixed="""
        import torch.nn.functional as F

        for x, y in loader:
            logits = model(x)
            loss = F.nll_loss(F.log_softmax(logits, dim=1), y)
            loss.backward()
        """,
        severity=Severity.ERROR,
    ),
    Fires(
        """
        import torch.nn as nn
        import torch.nn.functional as F

        criterion = nn.CrossEntropyLoss()
        for x, y in loader:
            loss = criterion(F.log_softmax(model(x), dim=1), y)
            loss.backward()
        """,
        fixed="""
        import torch.nn as nn
        import torch.nn.functional as F

        criterion = nn.CrossEntropyLoss()
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward()
        """,
        severity=Severity.NOTE,
    ),
    Fires(  # the model arrives as a parameter: its callers say what it is
        """
        import torch
        import torch.nn as nn
        import torch.nn.functional as F

        class CNN(nn.Module):
            def __init__(self):
                super().__init__()
                self.features = nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
                self.fc = nn.Linear(32, 10)

            def forward(self, x):
                return self.fc(self.features(x))

        def train_one_epoch(model, loader, optimizer):
            model.train()
            for images, labels in loader:
                optimizer.zero_grad()
                scores = model(images)
                loss = F.nll_loss(scores, labels)
                loss.backward()
                optimizer.step()

        def main():
            model = CNN().cuda()
            optimizer = torch.optim.AdamW(model.parameters())
            for epoch in range(10):
                train_one_epoch(model, train_loader, optimizer)
        """,
        severity=Severity.ERROR,
    ),
    Fires(  # objects and frameworks: a Lightning GAN whose discriminator head ends in nn.Softmax, reached through a helper
        """
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
        from pytorch_lightning import LightningModule

        class Discriminator(nn.Module):
            def __init__(self, features, n_classes):
                super().__init__()
                self.body = nn.Sequential(nn.Linear(784, features), nn.LeakyReLU(0.2))
                self.adv_layer = nn.Sequential(nn.Linear(features, 1), nn.Sigmoid())
                self.aux_layer = nn.Sequential(nn.Linear(features, n_classes), nn.Softmax(dim=1))

            def forward(self, img):
                out = self.body(img.flatten(1))
                return self.adv_layer(out), self.aux_layer(out)

        class ACGAN(LightningModule):
            def __init__(self, n_classes=10):
                super().__init__()
                self.save_hyperparameters()
                self.discriminator = Discriminator(128, n_classes)

            def auxiliary_loss(self, y_hat, y):
                return F.cross_entropy(y_hat, y)

            def training_step(self, batch, batch_idx):
                imgs, labels = batch
                validity, pred_label = self.discriminator(imgs)
                real = F.binary_cross_entropy(validity, torch.ones_like(validity))
                return real + self.auxiliary_loss(pred_label, labels)
        """,
        severity=Severity.ERROR,
        no_fix=True,  # the probabilities arrive as a parameter: the softmax may serve other callers
    ),
    Fires(  # two files: the model in model.py ends its forward in a softmax
        """
        import torch
        import torch.nn as nn
        from model import Network

        def train(model, optimizer, loader, epochs):
            criterion = nn.CrossEntropyLoss()
            for epoch in range(epochs):
                model.train()
                for sample, target in loader:
                    optimizer.zero_grad()
                    loss = criterion(model(sample), target)
                    loss.backward()
                    optimizer.step()

        model = Network()
        train(model, torch.optim.SGD(model.parameters(), lr=0.01), train_loader, 10)
        """,
        files={"model.py": """
            import torch.nn as nn
            import torch.nn.functional as F

            class Network(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc1 = nn.Sequential(nn.Linear(1152, 500), nn.ReLU())
                    self.fc2 = nn.Linear(500, 6)

                def forward(self, x):
                    out = self.fc2(self.fc1(x.flatten(1)))
                    return F.softmax(out, dim=1)
            """},
        severity=Severity.ERROR,
    ),
    Fires(  # three files: the training function's callers, in main.py, all hand it a model whose forward ends in a softmax
        """
        import torch
        import torch.nn as nn

        def train_epoch(classifier, loader, optimizer, device):
            criterion = nn.CrossEntropyLoss().to(device)
            classifier.train()
            for images, labels in loader:
                images, labels = images.to(device), labels.to(device)
                optimizer.zero_grad()
                class_pred = classifier(images)
                loss = criterion(class_pred, labels)
                loss.backward()
                optimizer.step()
        """,
        files={
            "models.py": """
                import torch.nn as nn
                import torch.nn.functional as F

                class Classifier(nn.Module):
                    def __init__(self, hidden=100, classes=10):
                        super().__init__()
                        self.layers = nn.Sequential(nn.Linear(3 * 28 * 28, hidden), nn.ReLU(), nn.Linear(hidden, classes))

                    def forward(self, x):
                        return F.softmax(self.layers(x.flatten(1)), dim=1)
                """,
            "main.py": """
                import torch
                import torch.nn as nn
                import models
                import train

                def main(args, loader):
                    classifier = models.Classifier().cuda()
                    optimizer = torch.optim.SGD(classifier.parameters(), lr=0.01)
                    for epoch in range(args.epochs):
                        train.train_epoch(classifier, loader, optimizer, "cuda")
                    wide = nn.DataParallel(models.Classifier(hidden=400), device_ids=args.gpus).cuda()
                    train.train_epoch(wide, loader, torch.optim.SGD(wide.parameters(), lr=0.01), "cuda")
                """,
        },
        severity=Severity.ERROR,
    ),
    Fires(  # a federated client's update method is handed a copy of the global model by keyword, from another file
        """
        import torch
        import torch.nn as nn

        class LocalUpdate:
            def __init__(self, args, loader):
                self.args = args
                self.loader = loader
                self.loss_func = nn.CrossEntropyLoss()

            def train(self, net):
                net.train()
                optimizer = torch.optim.SGD(net.parameters(), lr=self.args.lr, momentum=0.5)
                for images, labels in self.loader:
                    net.zero_grad()
                    log_probs = net(images)
                    loss = self.loss_func(log_probs, labels)
                    loss.backward()
                    optimizer.step()
                return net.state_dict()
        """,
        files={
            "nets.py": """
                import torch.nn as nn

                class MLP(nn.Module):
                    def __init__(self, dim_in, dim_hidden, dim_out):
                        super().__init__()
                        self.layer_input = nn.Linear(dim_in, dim_hidden)
                        self.relu = nn.ReLU()
                        self.layer_hidden = nn.Linear(dim_hidden, dim_out)
                        self.softmax = nn.Softmax(dim=1)

                    def forward(self, x):
                        x = self.relu(self.layer_input(x.flatten(1)))
                        return self.softmax(self.layer_hidden(x))
                """,
            "main_fed.py": """
                import copy
                from nets import MLP
                from train import LocalUpdate

                net_glob = MLP(dim_in=784, dim_hidden=200, dim_out=10).to(args.device)
                net_glob.train()
                for round in range(args.rounds):
                    for user in range(args.num_users):
                        local = LocalUpdate(args=args, loader=loaders[user])
                        weights = local.train(net=copy.deepcopy(net_glob).to(args.device))
                    net_glob.load_state_dict(weights)
                """,
        },
        severity=Severity.ERROR,
    ),
    Fires(  # a Sequential filled with add_module, run through `.forward` by a training helper its script hands it to
        """
        import torch
        from torch import optim


        class ConvNet(torch.nn.Module):
            def __init__(self, output_dim):
                super().__init__()
                self.fc = torch.nn.Sequential()
                self.fc.add_module("fc1", torch.nn.Linear(320, 50))
                self.fc.add_module("relu_1", torch.nn.ReLU())
                self.fc.add_module("fc2", torch.nn.Linear(50, output_dim))
                self.fc.add_module("softmax", torch.nn.Softmax(dim=1))

            def forward(self, x):
                return self.fc.forward(x.view(-1, 320))


        def train(model, loss, optimizer, x, y):
            optimizer.zero_grad()
            output = loss.forward(model.forward(x), y)
            output.backward()
            optimizer.step()
            return output.item()


        def main(batches):
            model = ConvNet(output_dim=10)
            loss = torch.nn.CrossEntropyLoss()
            optimizer = optim.SGD(model.parameters(), lr=0.01)
            for x, y in batches:
                train(model, loss, optimizer, x, y)
        """,
        severity=Severity.ERROR,
        at="    output = loss.forward(model.forward(x), y)",
    ),
    Fires(  # the fix belongs where the model ends in a softmax; the training loop of another file feeds it to the loss
        """
        import torch.nn as nn
        import torch.nn.functional as F


        class Classifier(nn.Module):
            def __init__(self, classes=10):
                super().__init__()
                self.classifier = nn.Sequential(nn.Linear(2352, 100), nn.ReLU(), nn.Linear(100, classes))

            def forward(self, x):
                x = self.classifier(x)
                return F.softmax(x, dim=1)
        """,
        files={
            "loop.py": """
                import torch
                import torch.nn as nn


                def fit(encoder, classifier, loader, epochs):
                    criterion = nn.CrossEntropyLoss().cuda()
                    optimizer = torch.optim.SGD(list(encoder.parameters()) + list(classifier.parameters()), lr=0.01)
                    for epoch in range(epochs):
                        for images, labels in loader:
                            optimizer.zero_grad()
                            class_pred = classifier(encoder(images.cuda()))
                            loss = criterion(class_pred, labels.cuda())
                            loss.backward()
                            optimizer.step()
                """,
            "main.py": """
                import loop
                import train
                from encoders import Extractor


                def main(loader):
                    encoder = Extractor().cuda()
                    classifier = train.Classifier().cuda()
                    loop.fit(encoder, classifier, loader, epochs=10)
                """,
        },
        severity=Severity.ERROR,
        at="        return F.softmax(x, dim=1)",
    ),
    Fires(  # a language model of another file returns raw logits; the script builds it at module level, and the
        # training function it calls reads that global and feeds the output to NLL
        """
        import torch.nn as nn


        class WordModel(nn.Module):
            def __init__(self, vocab, width=256):
                super().__init__()
                self.embed = nn.Embedding(vocab, width)
                self.rnn = nn.GRU(width, width)
                self.head = nn.Linear(width, vocab)

            def forward(self, tokens, state):
                hidden, state = self.rnn(self.embed(tokens), state)
                scores = self.head(hidden)
                return scores, state
        """,
        files={
            "main.py": """
                import torch
                import torch.nn as nn
                import train

                vocab = 10000
                model = train.WordModel(vocab).cuda()
                loss_fn = nn.NLLLoss()
                optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)


                def fit_epoch(batches):
                    state = None
                    for tokens, targets in batches:
                        optimizer.zero_grad()
                        scores, state = model(tokens, state)
                        loss = loss_fn(scores.view(-1, vocab), targets.view(-1))
                        loss.backward()
                        optimizer.step()
                        state = state.detach()


                for epoch in range(20):
                    fit_epoch(train_batches)
                """,
        },
        severity=Severity.ERROR,
        at="        scores = self.head(hidden)",
    ),
)

SoftmaxBeforeCrossEntropy.MUST_NOT_FIRE = (
    Quiet(  # distillation in another file: the teacher's softmax output is the target, the student's logits the input
        """
        import torch.nn as nn
        import torch.nn.functional as F


        class Teacher(nn.Module):
            def __init__(self, classes=10):
                super().__init__()
                self.head = nn.Linear(512, classes)

            def forward(self, features):
                return F.softmax(self.head(features) / 4.0, dim=1)
        """,
        files={
            "distill.py": """
                import torch
                import torch.nn as nn
                from train import Teacher


                def distill(student, loader):
                    teacher = Teacher().cuda().eval()
                    criterion = nn.CrossEntropyLoss()
                    optimizer = torch.optim.Adam(student.parameters())
                    for features, _ in loader:
                        with torch.no_grad():
                            soft_targets = teacher(features)
                        loss = criterion(student(features), soft_targets)
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()
                """,
        },
    ),
    Quiet(  # a Sequential built by add_module that ends in LogSoftmax, trained with NLL through `.forward`
        """
        import torch


        def build_model(input_dim, output_dim):
            model = torch.nn.Sequential()
            model.add_module("linear", torch.nn.Linear(input_dim, output_dim))
            model.add_module("log_softmax", torch.nn.LogSoftmax(dim=1))
            return model


        def train(model, loss, optimizer, x, y):
            optimizer.zero_grad()
            output = loss.forward(model.forward(x), y)
            output.backward()
            optimizer.step()


        def main(batches):
            model = build_model(784, 10)
            loss = torch.nn.NLLLoss()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
            for x, y in batches:
                train(model, loss, optimizer, x, y)
        """
    ),
    Quiet(  # probabilities only for metrics; the loss gets logits
        """
        import torch.nn as nn
        import torch.nn.functional as F

        criterion = nn.CrossEntropyLoss()
        for x, y in loader:
            logits = model(x)
            loss = criterion(logits, y)
            probs = F.softmax(logits, dim=1)
            correct = (probs.argmax(1) == y).sum().item()
            loss.backward()
        """
    ),
    Quiet(  # attention softmax inside the model is not its output
        """
        import torch
        import torch.nn as nn
        import torch.nn.functional as F

        class AttentionClassifier(nn.Module):
            def __init__(self, dim, classes):
                super().__init__()
                self.qkv = nn.Linear(dim, 3 * dim)
                self.out = nn.Linear(dim, classes)

            def forward(self, x):
                q, k, v = self.qkv(x).chunk(3, dim=-1)
                attn = F.softmax(q @ k.transpose(-2, -1), dim=-1)
                return self.out((attn @ v).mean(1))

        model = AttentionClassifier(64, 10)
        criterion = nn.CrossEntropyLoss()
        for x, y in loader:
            criterion(model(x), y).backward()
        """
    ),
    Quiet(  # log_softmax then NLL is the textbook pairing
        """
        import torch.nn as nn
        import torch.nn.functional as F

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(32, 4)

            def forward(self, x):
                return F.log_softmax(self.fc(x), dim=1)

        model = Net()
        for x, y in loader:
            F.nll_loss(model(x), y).backward()
        """
    ),
    Quiet(  # distillation: softmax teacher probabilities are the *target*, which cross_entropy accepts
        """
        import torch
        import torch.nn.functional as F

        for x, _ in loader:
            with torch.no_grad():
                soft_targets = F.softmax(teacher(x) / T, dim=1)
            loss = F.cross_entropy(student(x) / T, soft_targets)
            loss.backward()
        """
    ),
    Quiet(  # unknown model output: nothing to judge
        """
        import torch.nn as nn

        model = load_model(cfg)
        criterion = nn.CrossEntropyLoss()
        for x, y in loader:
            criterion(model(x), y).backward()
        """
    ),
    Quiet(  # a project's own loss class of the same name is not torch's
        """
        import torch.nn.functional as F
        from mylib.losses import CrossEntropyLoss

        criterion = CrossEntropyLoss(from_probs=True)
        for x, y in loader:
            criterion(F.softmax(model(x), dim=1), y).backward()
        """
    ),
    Quiet(  # log of probabilities into NLL is log-probabilities
        """
        import torch
        import torch.nn as nn

        model = nn.Sequential(nn.Linear(16, 3), nn.Softmax(dim=1))
        criterion = nn.NLLLoss()
        for x, y in loader:
            probs = model(x)
            loss = criterion(torch.log(probs + 1e-8), y)
            loss.backward()
        """
    ),
    Quiet(  # the Sequential ends in a Linear layer: logits, as cross-entropy wants
        """
        import torch.nn as nn

        model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 3))
        criterion = nn.CrossEntropyLoss()
        for x, y in loader:
            criterion(model(x), y).backward()
        """
    ),
    Quiet(  # callers pass different models: which one reaches the loss is not known
        """
        import torch.nn as nn
        import torch.nn.functional as F

        class LogNet(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(8, 3)

            def forward(self, x):
                return F.log_softmax(self.fc(x), dim=1)

        def fit(model, loader):
            for x, y in loader:
                F.nll_loss(model(x), y).backward()

        fit(LogNet(), loader)
        fit(nn.Linear(8, 3), loader)
        """
    ),
    Quiet(  # the fixed GAN: the auxiliary head gives logits
        """
        import torch.nn as nn
        import torch.nn.functional as F
        from pytorch_lightning import LightningModule

        class Discriminator(nn.Module):
            def __init__(self, features, n_classes):
                super().__init__()
                self.body = nn.Sequential(nn.Linear(784, features), nn.LeakyReLU(0.2))
                self.aux_layer = nn.Sequential(nn.Linear(features, n_classes))

            def forward(self, img):
                out = self.body(img.flatten(1))
                return out.mean(dim=1), self.aux_layer(out)

        class ACGAN(LightningModule):
            def __init__(self, n_classes=10):
                super().__init__()
                self.discriminator = Discriminator(128, n_classes)

            def auxiliary_loss(self, y_hat, y):
                return F.cross_entropy(y_hat, y)

            def training_step(self, batch, batch_idx):
                imgs, labels = batch
                _, pred_label = self.discriminator(imgs)
                return self.auxiliary_loss(pred_label, labels)
        """
    ),
    Quiet(  # a helper called with logits in one place and probabilities in another: which one is meant is unknown
        """
        import torch.nn.functional as F

        def classification_loss(scores, labels):
            return F.cross_entropy(scores, labels)

        def train_step(model, teacher, batch, labels):
            student = classification_loss(model(batch), labels)
            distilled = classification_loss(teacher(batch).softmax(dim=-1), labels)
            return student + distilled
        """
    ),
    Quiet(  # the model's forward gives probabilities only outside training: the training loss gets logits
        """
        import torch
        import torch.nn as nn

        def fit(model, loader, epochs):
            criterion = nn.CrossEntropyLoss()
            optimizer = torch.optim.Adam(model.parameters())
            for _ in range(epochs):
                for x, y in loader:
                    optimizer.zero_grad()
                    criterion(model(x), y).backward()
                    optimizer.step()
        """,
        files={
            "models.py": """
                import torch.nn as nn
                import torch.nn.functional as F

                class Classifier(nn.Module):
                    def __init__(self):
                        super().__init__()
                        self.fc = nn.Linear(128, 10)

                    def forward(self, x):
                        logits = self.fc(x)
                        if not self.training:
                            return F.softmax(logits, dim=1)
                        return logits
                """,
            "main.py": """
                from models import Classifier
                from train import fit

                fit(Classifier().cuda(), loader, epochs=5)
                """,
        },
    ),
    Quiet(  # two scripts hand the trainer different models, one ending in softmax: which one is meant is unknown
        """
        import torch.nn as nn

        class Trainer:
            def __init__(self, loader):
                self.loader = loader
                self.criterion = nn.CrossEntropyLoss()

            def fit(self, model, optimizer):
                for x, y in self.loader:
                    optimizer.zero_grad()
                    self.criterion(model(x), y).backward()
                    optimizer.step()
        """,
        files={
            "models.py": """
                import torch.nn as nn

                def head(classes):
                    return nn.Linear(512, classes)

                class ProbabilityHead(nn.Module):
                    def __init__(self, classes):
                        super().__init__()
                        self.fc = nn.Linear(512, classes)
                        self.softmax = nn.Softmax(dim=-1)

                    def forward(self, x):
                        return self.softmax(self.fc(x))
                """,
            "train_linear.py": """
                import torch
                import torch.nn as nn
                from train import Trainer

                model = nn.Linear(512, 10)
                Trainer(loader).fit(model, torch.optim.SGD(model.parameters(), lr=0.1))
                """,
            "train_probs.py": """
                import torch
                from models import ProbabilityHead
                from train import Trainer

                model = ProbabilityHead(10)
                Trainer(loader).fit(model, torch.optim.SGD(model.parameters(), lr=0.1))
                """,
        },
    ),
    Quiet(  # the fixed language model: its forward ends in log_softmax, which NLL wants, read through the global
        """
        import torch.nn as nn
        import torch.nn.functional as F


        class WordModel(nn.Module):
            def __init__(self, vocab, width=256):
                super().__init__()
                self.embed = nn.Embedding(vocab, width)
                self.rnn = nn.GRU(width, width)
                self.head = nn.Linear(width, vocab)

            def forward(self, tokens, state):
                hidden, state = self.rnn(self.embed(tokens), state)
                scores = self.head(hidden)
                return F.log_softmax(scores, dim=-1), state
        """,
        files={
            "main.py": """
                import torch
                import torch.nn as nn
                import train

                vocab = 10000
                model = train.WordModel(vocab).cuda()
                loss_fn = nn.NLLLoss()
                optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)


                def fit_epoch(batches):
                    state = None
                    for tokens, targets in batches:
                        optimizer.zero_grad()
                        scores, state = model(tokens, state)
                        loss = loss_fn(scores.view(-1, vocab), targets.view(-1))
                        loss.backward()
                        optimizer.step()
                        state = state.detach()


                for epoch in range(20):
                    fit_epoch(train_batches)
                """,
        },
    ),
    Quiet(  # the training function binds the global's name to its own model, which ends in LogSoftmax
        """
        import torch.nn as nn


        class WordModel(nn.Module):
            def __init__(self, vocab, width=256):
                super().__init__()
                self.embed = nn.Embedding(vocab, width)
                self.head = nn.Linear(width, vocab)

            def forward(self, tokens):
                return self.head(self.embed(tokens))
        """,
        files={
            "main.py": """
                import torch
                import torch.nn as nn
                import train

                model = train.WordModel(10000).cuda()
                loss_fn = nn.NLLLoss()


                def fit(batches):
                    model = nn.Sequential(train.WordModel(10000), nn.LogSoftmax(dim=-1)).cuda()
                    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
                    for tokens, targets in batches:
                        optimizer.zero_grad()
                        loss = loss_fn(model(tokens), targets)
                        loss.backward()
                        optimizer.step()


                fit(train_batches)
                """,
        },
    ),
)
