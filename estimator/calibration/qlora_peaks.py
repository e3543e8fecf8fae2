"""Whole QLoRA training iterations, replayed through the caching allocator's rules: what peft's
``prepare_model_for_kbit_training`` changes beyond the weights it casts, and where a checkpointed step peaks.

TinyLlama 1.1B's config (random weights, nothing downloaded) in bf16, every linear of its layers a bitsandbytes
``Linear4bit`` (NF4, double quantisation, bf16 compute dtype; weights packed by bitsandbytes' ``quantize_4bit``,
whose ops have fake kernels), peft LoRA adapters (rank 16 on q_proj and v_proj, dropout 0.05), gradient
checkpointing as transformers enables it, AdamW on the adapters, the HF Trainer's step (outputs dropped before the
backward, forward and loss under bf16 autocast), two iterations at 512 tokens and batch 1 and 4, each with and
without ``prepare_model_for_kbit_training`` first (which casts every 16-bit parameter that is not a ``Params4bit``
to fp32: embeddings, norms, LM head), and the same step over the bf16 base unquantised at batch 4. The autocast is
torch's CPU one: its policy differs from CUDA's for softmax, layer norm and pow, which a Llama layer takes on fp32
tensors it casts itself (RMSNorm, transformers' loss) or inside SDPA, so what is kept is what CUDA's would keep.
Recorded under FakeTensorMode and replayed through ``allocator_replay.py``. A 4-bit matmul's forward on CUDA
dequantises the weight inside bitsandbytes' op (the fake kernel allocates only the output), so the replay holds the
backward's dequantised weight only; the estimator counts one. ``tests/test_estimator_replays.py`` compares the
estimator's allocated point with each.

Runs in a calibration venv (torch, transformers, peft, bitsandbytes), never the product's:

    python qlora_peaks.py qlora_peaks.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path

import bitsandbytes
import peft
import torch
import transformers
from torch._subclasses.fake_tensor import FakeTensorMode, unset_fake_temporarily
from transformers.initialization import no_init_weights

sys.path.insert(0, str(Path(__file__).resolve().parent))
import activations  # noqa: E402
from allocator_replay import Recorder, replay  # noqa: E402
from fake_peft import lora_model  # noqa: E402

FIELDS = dict(hidden_size=2048, intermediate_size=5632, num_hidden_layers=22, num_attention_heads=32, num_key_value_heads=4,
              vocab_size=32000, max_position_embeddings=2048, rms_norm_eps=1e-5)
RANK, TARGETS, DROPOUT, SEQ = 16, ["q_proj", "v_proj"], 0.05, 512


def _quantised(model: torch.nn.Module) -> None:
    """Every linear of the decoder layers replaced by a 4-bit one, as transformers' bitsandbytes integration does
    (the LM head stays 16-bit)."""
    with unset_fake_temporarily():  # the double quantisation's code book is computed from real values, once
        bitsandbytes.functional.name2qmap["dynamic"] = bitsandbytes.functional.create_dynamic_map()
    for layer in model.model.layers:
        for name, child in list(layer.named_modules()):
            if not isinstance(child, torch.nn.Linear):
                continue
            parent = layer.get_submodule(name.rpartition(".")[0]) if "." in name else layer
            with unset_fake_temporarily():  # the module's own placeholder weight, replaced below
                quantised = bitsandbytes.nn.Linear4bit(child.in_features, child.out_features, bias=False, device="meta",
                                                       compute_dtype=torch.bfloat16, compress_statistics=True, quant_type="nf4")
            # bitsandbytes' own quantisation (its ops' fake kernels give the packed weight and its statistics); the
            # packed weight is kept as a frozen parameter carrying its quant_state, as Params4bit does (Params4bit
            # itself cannot wrap a fake tensor)
            packed, state = bitsandbytes.functional.quantize_4bit(child.weight.data, blocksize=64, compress_statistics=True,
                                                                  quant_type="nf4")
            quantised.weight = torch.nn.Parameter(packed, requires_grad=False)
            for key, value in dict(quant_state=state, compress_statistics=True, quant_type="nf4", blocksize=64,
                                   quant_storage=torch.uint8, bnb_quantized=True).items():
                setattr(quantised.weight, key, value)
            setattr(parent, name.rpartition(".")[2], quantised)
    model.is_loaded_in_4bit = True


@contextlib.contextmanager
def _autocast_reported():
    """peft asks `torch.is_autocast_enabled()` (no device: CUDA's) whether to cast an adapter's input itself; on a GPU
    under the Trainer's autocast the answer is yes. The per-device question (checkpointing's) keeps its real answer."""
    real = torch.is_autocast_enabled
    torch.is_autocast_enabled = lambda *args: True if not args else real(*args)
    try:
        yield
    finally:
        torch.is_autocast_enabled = real


def _held(model: torch.nn.Module) -> list[torch.Tensor]:
    """What the loaded model holds: parameters, buffers and the 4-bit weights' statistics."""
    tensors = list(model.parameters()) + list(model.buffers())
    for module in model.modules():
        state = getattr(getattr(module, "weight", None), "quant_state", None)
        if state is not None:
            tensors += [state.absmax, state.code] + ([state.offset, state.state2.absmax, state.state2.code] if state.nested else [])
    return [tensor for tensor in tensors if isinstance(tensor, torch.Tensor)]


def run(batch: int, prepared: bool, quantised: bool = True) -> dict:
    config = transformers.AutoConfig.for_model("llama", **FIELDS)
    recorder = Recorder()
    with FakeTensorMode(allow_non_fake_inputs=True), activations._gpu_like_dropout(), activations._not_tracing():
        with no_init_weights():
            model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="sdpa", dtype=torch.bfloat16)
        if quantised:
            _quantised(model)
        if prepared:
            model = peft.prepare_model_for_kbit_training(model)
        else:
            for parameter in model.parameters():
                parameter.requires_grad = False
            model.gradient_checkpointing_enable()
            model.enable_input_require_grads()
        model = lora_model(model, peft.LoraConfig(r=RANK, lora_alpha=2 * RANK, lora_dropout=DROPOUT, target_modules=TARGETS))
        model.train()
        optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
        with recorder:  # from the loaded model on: what it holds, then two iterations
            recorder.track(_held(model))
            for _ in range(2):
                ids = torch.randint(0, config.vocab_size, (batch, SEQ))
                with _autocast_reported(), torch.autocast("cpu", dtype=torch.bfloat16):
                    loss = model(input_ids=ids, labels=ids, use_cache=False).loss
                loss.backward()
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
    peaks = replay(recorder.events)
    return {"model": "tinyllama-1.1b", "batch": batch, "seq": SEQ, "quant": "nf4-dq" if quantised else None,
            "kbit_prepared": prepared,
            "live": peaks.live, "allocated": peaks.allocated, "reserved": peaks.reserved}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    rows = []
    for batch in (1, 4):
        for prepared in (False, True):
            rows.append(run(batch, prepared))
            print(rows[-1], flush=True)
    rows.append(run(4, prepared=False, quantised=False))  # the same checkpointed LoRA step over a bf16 base
    print(rows[-1], flush=True)
    meta = {"torch": torch.__version__, "transformers": transformers.__version__, "peft": peft.__version__,
            "bitsandbytes": bitsandbytes.__version__, "dtype": "bf16", "lora_rank": RANK,
            "lora_targets": TARGETS, "lora_dropout": DROPOUT, "attention": "sdpa", "autocast": "bf16",
            "measured_with": "FakeTensorMode, CPU autocast (bf16), GPU-like dropout masks, allocator_replay.py"}
    args.out.write_text(json.dumps({**meta, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
