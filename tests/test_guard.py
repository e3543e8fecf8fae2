"""VRAMGuard on the CPU: model states from the live objects, activations from a meta-device forward
that equals a real forward's saved tensors, the model left as it was, and errors only when the run
cannot fit."""

from __future__ import annotations

import math

import pytest
import torch

from trainlint.guard import VRAMGuard, VramRiskError


def _real_saved_bytes(model: torch.nn.Module, *inputs) -> int:
    """What a real forward keeps for the backward (unique storages, parameters excluded), plus its output."""
    saved: dict[int, int] = {}
    parameters = {p.untyped_storage()._cdata for p in model.parameters()}

    def pack(tensor):
        key = tensor.untyped_storage()._cdata
        if key not in parameters:
            saved.setdefault(key, tensor.untyped_storage().nbytes())
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        output = model(*inputs)
    return sum(saved.values()) + output.numel() * output.element_size()


class TinyCNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.BatchNorm2d(16), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        )
        self.head = torch.nn.Linear(16 * 16 * 16, 10)

    def forward(self, x):
        return self.head(self.features(x).flatten(1))


MODELS = {
    "mlp": (lambda: torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 256)), (32, 256)),
    "cnn": (TinyCNN, (8, 3, 32, 32)),
    "transformer": (lambda: torch.nn.TransformerEncoderLayer(128, 4, 512, dropout=0.0, batch_first=True), (4, 64, 128)),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_the_projection_matches_the_live_objects_and_a_real_forward(name):
    build, shape = MODELS[name]
    torch.manual_seed(0)
    model = build()
    optimizer = torch.optim.AdamW(model.parameters())
    x = torch.randn(*shape)
    guard = VRAMGuard(model, optimizer, example_input=x)
    projection = guard.project()
    parameter_bytes = sum(p.numel() * 4 for p in model.parameters())
    assert projection.weights == parameter_bytes + sum(b.numel() * b.element_size() for b in model.buffers())
    assert projection.gradients == parameter_bytes
    assert projection.optimizer == 2 * parameter_bytes  # AdamW: two fp32 states per parameter
    real = _real_saved_bytes(model, x)
    if name == "transformer":
        # On meta tensors SDPA takes its math path, which keeps the attention scores that a fused kernel
        # does not: an upper bound, never an underestimate.
        assert real <= projection.activations <= real * 1.4
    else:
        assert projection.activations == pytest.approx(real, rel=0.05)


def test_frozen_parameters_have_no_gradient_or_optimizer_state():
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.Linear(64, 8))
    model[0].requires_grad_(False)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad])
    projection = VRAMGuard(model, optimizer, example_input=torch.randn(4, 64)).project()
    trainable = (64 * 8 + 8) * 4
    assert projection.gradients == trainable and projection.optimizer == 2 * trainable


def test_the_model_is_left_as_it_was():
    model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.Dropout(0.1), torch.nn.Linear(16, 4)).double().eval()
    before = [(name, p.device, p.dtype, p.data_ptr()) for name, p in model.named_parameters()]
    with VRAMGuard(model, example_input=torch.randn(2, 16, dtype=torch.float64), memory_limit="1GiB"):
        pass
    assert [(name, p.device, p.dtype, p.data_ptr()) for name, p in model.named_parameters()] == before
    assert not model.training


def test_it_raises_only_when_even_the_low_end_does_not_fit():
    model = torch.nn.Linear(1024, 1024)
    optimizer = torch.optim.AdamW(model.parameters())
    x = torch.randn(16, 1024)
    with pytest.raises(VramRiskError) as raised:
        with VRAMGuard(model, optimizer, example_input=x, memory_limit="8MiB"):
            pass
    message = str(raised.value)
    assert "cannot fit" in message and "optimizer state" in message and "Smallest change to try" in message
    with VRAMGuard(model, optimizer, example_input=x, memory_limit="1GiB") as guard:
        pass
    assert guard.projection.low < guard.projection.estimate < guard.projection.high
    just_above_low = guard.projection.low * 1.01
    with VRAMGuard(model, optimizer, example_input=x, memory_limit=int(just_above_low)):
        pass  # tight: not an error by default
    with pytest.raises(VramRiskError):
        with VRAMGuard(model, optimizer, example_input=x, memory_limit=int(just_above_low), strict=True):
            pass


def test_a_forward_that_cannot_run_on_meta_tensors_leaves_activations_unknown():
    class DataDependent(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(8, 8)

        def forward(self, x):
            steps = int(x.abs().sum().item()) % 3 + 1  # needs real data
            for _ in range(steps):
                x = self.fc(x)
            return x

    model = DataDependent()
    guard = VRAMGuard(model, torch.optim.SGD(model.parameters(), lr=0.1), example_input=torch.randn(2, 8))
    projection = guard.project()
    assert projection.activations is None and math.isinf(projection.high)
    assert any("meta tensors" in note for note in projection.notes)
    with VRAMGuard(model, example_input=torch.randn(2, 8), memory_limit="1GiB"):
        pass  # unknown is not an error
    with pytest.raises(VramRiskError):
        with VRAMGuard(model, example_input=torch.randn(2, 8), memory_limit=100):
            pass  # the known terms alone do not fit


def test_shapes_instead_of_an_example_input():
    model = torch.nn.Sequential(torch.nn.Embedding(1000, 64), torch.nn.Linear(64, 1000))
    small = VRAMGuard(model, batch_size=2, seq_len=128).project().activations
    large = VRAMGuard(model, batch_size=4, seq_len=128).project().activations
    assert small > 0 and large == pytest.approx(2 * small, rel=0.01)
    assert VRAMGuard(model).project().activations is None
