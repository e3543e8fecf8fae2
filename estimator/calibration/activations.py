"""Measures the activations a transformer layer keeps for the backward, per architecture.

Runs in the calibration venv (torch + transformers), never the product's:

    /work/calib-venv/bin/python estimator/calibration/activations.py \\
        estimator/calibration/activation_measurements.json estimator/data/activation_coefficients.json

Method (see ACTIVATIONS.md for the reasoning):

- Each model is built from the catalog's fields (``param_counts._decoder_config`` and friends), with
  ``LAYERS`` layers instead of the full depth (what one layer keeps does not depend on how many
  follow it), bf16 parameters, training mode, every dropout probability set to 0 (one extra run with
  0.1 for the families that have dropout).
- Everything runs under ``FakeTensorMode`` with CPU-device fake tensors: shapes and dtypes, no
  storage, no arithmetic. Not the meta device: on meta, ``scaled_dot_product_attention`` takes the
  math path (it materialises the s x s probabilities, in fp32), so SDPA would look like eager. A
  CPU-device fake tensor dispatches SDPA the way a CPU does, to the fused flash kernel, which keeps
  q, k, v, the output and the fp32 log-sum-exp, as the CUDA flash kernel does.
- One forward (with the loss) runs under ``torch.autograd.graph.saved_tensors_hooks``. Every saved
  tensor's *storage* is counted once: the key is the address of its StorageImpl
  (``untyped_storage()._cdata``), which every view of a storage shares; the pack hook keeps the
  tensor alive, so an address cannot be reused within a run. A storage counts its full
  ``nbytes()`` (a saved view keeps its whole base alive). Parameters' storages are excluded.
- Each storage is attributed to the part of the model that saved it first: "embed" (before the
  first layer starts), "layerN" (between that layer's forward pre-hook and hook), or "head" (after
  the last layer: final norm, LM head or classifier, loss). A layer's input is the previous layer's
  output (or the embeddings' output), first saved by the layer's own input norm, so it counts in
  the layer, as in Korthikanti et al. The fitted layer is the second one (layer 0 also first-saves
  tensors computed once per forward and shared by all layers: RoPE cos/sin, masks).
- Dropout: on CPU and meta, ``F.dropout`` multiplies by a bf16 noise tensor (2 bytes per element
  kept); CUDA's fused kernel keeps a 1-byte bool mask. ``F.dropout`` is routed to
  ``torch.native_dropout`` (which keeps the bool mask) so the count matches a GPU.
- Fit: per architecture and attention implementation, bytes(layer) / (s*b*h) against heads*s/h by
  least squares: SDPA gives the intercept only (``linear``), eager the intercept and slope
  (``linear``, ``scores``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
import transformers
from torch._subclasses.fake_tensor import FakeTensorMode
from transformers import masking_utils
from transformers.initialization import no_init_weights
from transformers.utils import import_utils

sys.path.insert(0, str(Path(__file__).resolve().parent))
from param_counts import DEFAULT_CATALOG, _decoder_config  # noqa: E402

LAYERS = 3
FIT_LAYER = 1
# (batch, seq) pairs; ViTs take their sequence from the image size instead.
SHAPES = ((1, 128), (1, 1024), (2, 128), (2, 256), (2, 512), (4, 256))
VIT_IMAGES = ((1, 224), (2, 224), (2, 320), (2, 448), (4, 224))
# Eager attention is fitted on batch >= 2 only: at batch 1, matmul's reshape of a (1, heads, s, d) view
# stays a view, so a fused-QKV value (Pythia, Phi-3) or an MQA key/value expanded by repeat_kv (Gemma)
# is saved as a view of a differently sized storage; from batch 2 on it is a copy. The batch-1
# offset is reported as eager_batch1_offset.
EAGER_MIN_BATCH = 2

ARCHITECTURES = (
    "gpt2", "gpt2-medium", "pythia-410m", "llama-3.2-1b", "llama-3-8b", "tinyllama-1.1b", "smollm2-135m",
    "mistral-7b-v0.1", "qwen2.5-0.5b", "qwen2.5-7b", "qwen3-0.6b", "phi-3-mini-4k", "gemma-2-2b", "gemma-2b",
    "gemma-3-1b", "phi-2", "bert-base-uncased", "roberta-base", "distilbert-base-uncased", "vit-base-patch16-224",
    "mixtral-8x7b", "qwen3-30b-a3b",
)
DROPOUT_FAMILIES = {"gpt2", "bert", "roberta", "distilbert", "vit", "phi3"}
DROPOUT_P = 0.1


def _set_dropout(config, p: float) -> None:
    """Every float field named like a dropout probability (GPT-2's *_pdrop, BERT's *_dropout_prob...)."""
    for name, value in list(config.to_dict().items()):
        if isinstance(value, float) and ("dropout" in name or "pdrop" in name):
            setattr(config, name, p)


def _config(a: dict, layers: int, dropout: float, image_size: int | None):
    a = {**a, "layers": layers}
    family = a["family"]
    if a["kind"] == "decoder":
        config = _decoder_config(a)
    elif family in ("bert", "roberta"):
        config = transformers.CONFIG_MAPPING[family](
            vocab_size=a["vocab"], hidden_size=a["hidden"], num_hidden_layers=layers,
            num_attention_heads=a["heads"], intermediate_size=a["intermediate"],
            max_position_embeddings=a["learned_positions"], type_vocab_size=a["token_types"],
        )
    elif family == "distilbert":
        config = transformers.DistilBertConfig(
            vocab_size=a["vocab"], dim=a["hidden"], n_layers=layers, n_heads=a["heads"],
            hidden_dim=a["intermediate"], max_position_embeddings=a["learned_positions"],
        )
    elif family == "vit":
        config = transformers.ViTConfig(
            hidden_size=a["hidden"], num_hidden_layers=layers, num_attention_heads=a["heads"],
            intermediate_size=a["intermediate"], image_size=image_size, patch_size=a["patch_size"],
            num_labels=a["num_labels"],
        )
    else:
        raise KeyError(family)
    if family == "gpt2":
        config.n_positions = max(config.n_positions, 1024)
    if getattr(config, "max_position_embeddings", None) is not None and family not in ("vit",):
        config.max_position_embeddings = max(config.max_position_embeddings, 1024)
    _set_dropout(config, dropout)
    return config


def _model(a: dict, config, attention: str) -> torch.nn.Module:
    family, kind = a["family"], a["kind"]
    kwargs = {"attn_implementation": attention, "dtype": torch.bfloat16}
    if kind == "decoder":
        return transformers.AutoModelForCausalLM.from_config(config, **kwargs)
    if family in ("bert", "roberta"):
        return transformers.AutoModelForMaskedLM.from_config(config, **kwargs)
    if family == "distilbert":
        return transformers.DistilBertForMaskedLM._from_config(config, **kwargs)
    if family == "vit":
        return transformers.ViTForImageClassification._from_config(config, **kwargs)
    raise KeyError(family)


def _layer_list(model: torch.nn.Module, layers: int) -> torch.nn.ModuleList:
    lists = [m for m in model.modules() if isinstance(m, torch.nn.ModuleList) and len(m) == layers]
    if len(lists) != 1:
        raise RuntimeError(f"expected one ModuleList of {layers} layers, found {len(lists)}")
    return lists[0]


@contextlib.contextmanager
def _not_tracing():
    """transformers treats a FakeTensor as a sign of tracing (torch.compile/export) and then always builds
    an explicit s x s mask for SDPA (no `is_causal`, no `enable_gqa`), which a real run does not. Tell it
    that fake tensors are not tracing, so the masks and SDPA arguments are those of an eager GPU run.
    The packed-sequence check then reads position ids; ours are a plain arange (not packed): None."""
    original = import_utils.is_fake_tensor, masking_utils.find_packed_sequence_indices
    import_utils.is_fake_tensor = lambda tensor: False
    masking_utils.find_packed_sequence_indices = lambda position_ids: None
    try:
        yield
    finally:
        import_utils.is_fake_tensor, masking_utils.find_packed_sequence_indices = original


@contextlib.contextmanager
def _gpu_like_dropout():
    """Route F.dropout to native_dropout, which keeps a 1-byte mask as CUDA's fused kernel does."""
    original = F.dropout

    def dropout(input, p=0.5, training=True, inplace=False):
        if not training or p == 0.0:
            return input
        return torch.native_dropout(input, p, True)[0]

    F.dropout = dropout
    try:
        yield
    finally:
        F.dropout = original


class SavedByRegion:
    """Saved-tensor hooks over one forward: each saved storage counted once (its full ``nbytes()``), by the
    part of the model that saved it first: "embed" before the first layer, "layerN" inside layer N,
    "between" after a layer, "head" after the last. Parameters' and buffers' storages are not counted;
    the saved tensors are kept alive, so an address is not reused within the run."""

    def __init__(self, model: torch.nn.Module, layers) -> None:
        self._excluded = {p.untyped_storage()._cdata for p in model.parameters()}
        self._excluded |= {b.untyped_storage()._cdata for b in model.buffers()}
        self._region = "embed"
        self._first: dict[int, str] = {}
        self._sizes: dict[int, int] = {}
        self._keep: list[torch.Tensor] = []
        last = len(layers) - 1
        for index, layer in enumerate(layers):
            layer.register_forward_pre_hook(lambda module, args, index=index: self._enter(f"layer{index}"))
            layer.register_forward_hook(
                lambda module, args, output, index=index: self._enter("head" if index == last else "between"))
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, lambda tensor: tensor)

    def _enter(self, region: str) -> None:
        self._region = region

    def _pack(self, tensor: torch.Tensor) -> torch.Tensor:
        self._keep.append(tensor)
        storage = tensor.untyped_storage()
        key = storage._cdata
        if key not in self._excluded and key not in self._first:
            self._first[key] = self._region
            self._sizes[key] = storage.nbytes()
        return tensor

    def __enter__(self) -> SavedByRegion:
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._hooks.__exit__(*exc)

    def regions(self) -> dict[str, int]:
        totals: dict[str, int] = {}
        for key, region in self._first.items():
            totals[region] = totals.get(region, 0) + self._sizes[key]
        return totals


def measure(
    a: dict, attention: str, batch: int, seq: int, dropout: float,
    image_size: int | None = None, use_cache: bool = False, transform=None,
) -> dict:
    """Bytes of unique saved storages, by region, for one forward + loss. ``transform``: applied to the
    built model (freezing it, adding adapters) before the forward."""
    with FakeTensorMode(allow_non_fake_inputs=False), _gpu_like_dropout(), _not_tracing():
        config = _config(a, LAYERS, dropout, image_size)
        with no_init_weights():  # initial values do not matter, and ViT's trunc_normal_ reads data
            model = _model(a, config, attention)
            if transform is not None:
                model = transform(model)
        model.train()
        saved = SavedByRegion(model, _layer_list(model, LAYERS))
        if a["family"] == "vit":
            pixels = torch.randn(batch, 3, image_size, image_size, dtype=torch.bfloat16)
            labels = torch.randint(0, a["num_labels"], (batch,))
            inputs = {"pixel_values": pixels, "labels": labels}
            seq = (image_size // a["patch_size"]) ** 2 + 1
        else:
            ids = torch.randint(0, a["vocab"], (batch, seq))
            inputs = {"input_ids": ids, "labels": ids}
            if a["kind"] == "decoder":
                inputs["use_cache"] = use_cache
        with saved:
            output = model(**inputs)
        assert output.loss.requires_grad
    return {
        "attention": attention, "batch": batch, "seq": seq, "dropout": dropout, "image_size": image_size,
        "use_cache": use_cache, "regions": saved.regions(),
    }


def _sweep(a: dict, attention: str, dropout: float, use_cache: bool = False) -> list[dict]:
    if a["family"] == "vit":
        return [measure(a, attention, batch, 0, dropout, image_size=size) for batch, size in VIT_IMAGES]
    return [measure(a, attention, batch, seq, dropout, use_cache=use_cache) for batch, seq in SHAPES]


def _per_token(row: dict, hidden: int) -> float:
    return row["regions"][f"layer{FIT_LAYER}"] / (row["seq"] * row["batch"] * hidden)


def _fit(rows: list[dict], hidden: int, heads: int, with_scores: bool) -> dict:
    xs = [heads * r["seq"] / hidden for r in rows]
    ys = [_per_token(r, hidden) for r in rows]
    if not with_scores:
        c = sum(ys) / len(ys)
        return {"linear": round(c, 4), "max_residual": round(max(abs(y - c) for y in ys), 4)}
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    intercept = my - slope * mx
    residual = max(abs(y - intercept - slope * x) for x, y in zip(xs, ys))
    return {"linear": round(intercept, 4), "scores": round(slope, 4), "max_residual": round(residual, 4)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("raw_out", type=Path)
    parser.add_argument("coefficients_out", type=Path)
    parser.add_argument("--catalog", type=Path, default=DEFAULT_CATALOG)
    parser.add_argument("--only", nargs="*", help="architecture ids (default: the built-in list)")
    args = parser.parse_args()
    catalog = {a["id"]: a for a in json.loads(args.catalog.read_text())}
    raw: dict[str, dict] = {}
    coefficients: dict[str, dict] = {}
    failures: dict[str, str] = {}
    for arch_id in args.only or ARCHITECTURES:
        a = catalog[arch_id]
        rows: list[dict] = []
        unsupported: list[str] = []
        try:
            for attention in ("sdpa", "eager"):
                try:
                    rows += _sweep(a, attention, 0.0)
                except ValueError as error:  # transformers refuses the implementation for this model
                    if "does not support an attention implementation" not in str(error):
                        raise
                    unsupported.append(attention)
            if a["kind"] == "decoder" and "sdpa" not in unsupported:
                rows += _sweep(a, "sdpa", 0.0, use_cache=True)
            if a["family"] in DROPOUT_FAMILIES:
                rows += _sweep(a, "eager", DROPOUT_P)
        except Exception as error:  # noqa: BLE001 - report and go on
            failures[arch_id] = f"{type(error).__name__}: {error}"[:500]
            print(f"{arch_id:28} FAILED {failures[arch_id]}", flush=True)
            continue
        hidden, heads = a["hidden"], a["heads"]

        def pick(attention: str, p: float, use_cache: bool = False, rows=rows) -> list[dict]:
            return [r for r in rows
                    if r["attention"] == attention and r["dropout"] == p and r["use_cache"] == use_cache]

        entry: dict = {
            "family": a["family"],
            "gated": bool(a.get("gated_mlp", True)) and a["kind"] == "decoder",
            "attention": {},
            "fit_max_residual": {},
        }
        if unsupported:
            entry["unsupported_attention"] = unsupported
        if pick("sdpa", 0.0):
            sdpa = _fit(pick("sdpa", 0.0), hidden, heads, with_scores=False)
            entry["attention"]["sdpa"] = {"linear": sdpa["linear"]}
            entry["fit_max_residual"]["sdpa"] = sdpa["max_residual"]
        eager_rows = pick("eager", 0.0)
        eager = _fit([r for r in eager_rows if r["batch"] >= EAGER_MIN_BATCH], hidden, heads, with_scores=True)
        entry["eager_batch1_offset"] = round(max(
            (_per_token(r, hidden) - eager["linear"] - eager["scores"] * heads * r["seq"] / hidden for r in eager_rows
             if r["batch"] == 1), key=abs), 4)
        entry["attention"]["eager"] = {"linear": eager["linear"], "scores": eager["scores"]}
        entry["fit_max_residual"]["eager"] = eager["max_residual"]
        if pick("sdpa", 0.0, use_cache=True):
            cached = _fit(pick("sdpa", 0.0, use_cache=True), hidden, heads, with_scores=False)
            entry["sdpa_use_cache_linear"] = cached["linear"]
        if pick("eager", DROPOUT_P):
            dropped = _fit([r for r in pick("eager", DROPOUT_P) if r["batch"] >= EAGER_MIN_BATCH], hidden, heads, True)
            entry["dropout_linear"] = dropped["linear"]
            entry["dropout_scores"] = dropped["scores"]
            entry["dropout_p"] = DROPOUT_P
        # Outside the layers, per token at the smallest shape: embeddings (their output is counted
        # in layer 0) and the head (final norm, LM head or classifier, loss).
        first = (pick("sdpa", 0.0) or pick("eager", 0.0))[0]
        tokens = first["batch"] * first["seq"]
        entry["outside_bytes_per_token"] = {
            "embed": round(first["regions"].get("embed", 0) / tokens, 2),
            "head": round(first["regions"].get("head", 0) / tokens, 2),
        }
        layer_bytes = [first["regions"].get(f"layer{i}", 0) for i in range(LAYERS)]
        entry["layers_measured"] = LAYERS
        entry["layer0_extra_bytes_per_token"] = round((layer_bytes[0] - layer_bytes[FIT_LAYER]) / tokens, 2)
        entry["measured_with"] = (
            f"FakeTensorMode (CPU-device fakes), {LAYERS} layers, bf16 params, train mode, use_cache=False, "
            "saved_tensors_hooks, unique storages by StorageImpl address, parameters excluded, "
            "dropout via native_dropout (1-byte mask)"
        )
        entry["torch"] = torch.__version__
        entry["transformers"] = transformers.__version__
        coefficients[arch_id] = entry
        raw[arch_id] = {"hidden": hidden, "heads": heads, "intermediate": a["intermediate"], "rows": rows}
        sdpa_text = f"{entry['attention']['sdpa']['linear']:8.3f}" if "sdpa" in entry["attention"] else "       -"
        print(f"{arch_id:28} sdpa {sdpa_text}  eager {eager['linear']:8.3f} + {eager['scores']:6.3f}*a*s/h"
              + (f"  dropout {entry['dropout_linear']:8.3f} + {entry['dropout_scores']:6.3f}"
                 if "dropout_linear" in entry else ""),
              flush=True)
    meta = {"torch": torch.__version__, "transformers": transformers.__version__,
            "layers": LAYERS, "fit_layer": FIT_LAYER}
    args.raw_out.write_text(json.dumps({**meta, "failures": failures, "measurements": raw}, indent=1) + "\n")
    args.coefficients_out.write_text(json.dumps(coefficients, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
