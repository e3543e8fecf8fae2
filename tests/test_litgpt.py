"""LitGPT's own model code, and the allocator terms read from replayed runs: the estimate against the CPU
measurements in estimator/calibration (never against the published rows, which are only a test set)."""

from __future__ import annotations

import json
import statistics
import textwrap
from pathlib import Path

import pytest

from trainlint.analysis.module import ModuleAnalysis
from trainlint.estimator import allocator
from trainlint.estimator.allocator import block_overhead
from trainlint.estimator.architectures import find_architecture, parameter_count, shape
from trainlint.estimator.costmodel import mechanism_estimate
from trainlint.estimator.hardware import resolve_target
from trainlint.estimator.litgpt import architecture_for_litgpt_name, layer_coefficient, litgpt_architecture
from trainlint.estimator.model_configs import architecture_from_config
from trainlint.estimator.plan import Plan
from trainlint.estimator.reading import read_inputs
from trainlint.estimator.script_plan import plan_settings
from trainlint.estimator.units import GIB

CALIBRATION = Path(__file__).resolve().parent.parent / "estimator" / "calibration"
ACTIVATIONS = json.loads((CALIBRATION / "litgpt_activations.json").read_text())
PEAKS = json.loads((CALIBRATION / "litgpt_peaks.json").read_text())
REPLAYS = json.loads((CALIBRATION / "allocator_peaks.json").read_text())


def _stablelm_alpha():
    """Not in the catalog: its config as the published rows give it."""
    rows = json.loads((CALIBRATION / "published_peaks.json").read_text())["rows"]
    config = next(row["plan"]["config"] for row in rows if "stablelm-base-alpha-3b" in row["id"])
    return architecture_from_config(config, "stablelm-base-alpha-3b", "the published row")


def _architecture(name: str):
    return _stablelm_alpha() if name == "stablelm-base-alpha-3b" else find_architecture(name)


@pytest.mark.parametrize("arch_id", sorted(ACTIVATIONS["models"]))
def test_the_layer_accounting_equals_what_litgpts_modules_keep(arch_id):
    measured = ACTIVATIONS["models"][arch_id]
    arch, _ = litgpt_architecture(_architecture(arch_id))
    geometry = shape(arch)
    cases = {
        "lora": dict(trains_base=False, keeps_linear_inputs=False, lora_targets=("q_proj", "v_proj")),
        "full": dict(trains_base=True, keeps_linear_inputs=False, lora_targets=None),
        "qlora-keeping-inputs": dict(trains_base=False, keeps_linear_inputs=True, lora_targets=("q_proj", "v_proj")),
    }
    for case, arguments in cases.items():
        derived = layer_coefficient(arch, geometry, lora_dropout=0.05, lora_rank=8, **arguments)
        assert derived == pytest.approx(measured[case]["layer"], rel=0.005), case


def test_the_estimate_of_a_litgpt_fine_tuning_step_is_within_three_percent_of_its_replayed_peak():
    compared = 0
    for row in PEAKS["rows"]:
        arch = architecture_for_litgpt_name(row["model"]) or (_stablelm_alpha() if row["model"].startswith("stablelm") else None)
        assert arch is not None, row["model"]
        lora = row["lora_rank"] is not None
        plan = Plan(
            model=arch, model_code="litgpt", dtype="bf16", batch_size=row["batch"], seq_len=row["seq"],
            lora_rank=row["lora_rank"], lora_targets=("q_proj", "v_proj"), lora_dropout=0.05 if lora else None,
            quant=row["quantize"], quant_keeps_inputs=True if row["quantize"] else None, grad_accum=1 if lora else 2,
            previous_graph_alive={"fit": True, "first": False}[row["peak_in"]],
        )
        replayed = row["replayed"]["allocated"]
        assert mechanism_estimate(plan).allocated.estimate == pytest.approx(replayed, rel=0.03), row
        compared += 1
    assert compared >= 10


def test_litgpt_keeps_its_own_lm_head_and_pads_the_vocabulary():
    falcon = find_architecture("falcon-40b")
    assert falcon.tied_embeddings
    built, notes = litgpt_architecture(falcon)
    assert parameter_count(built) == parameter_count(falcon) + falcon.vocab * falcon.hidden
    assert any("LM head" in note for note in notes)
    hf = mechanism_estimate(Plan(model=falcon, mode="generate", dtype="bf16", seq_len=10, max_context=60))
    lit = mechanism_estimate(Plan(model=falcon, mode="generate", dtype="bf16", seq_len=10, max_context=60, model_code="litgpt"))
    assert lit.params - hf.params == falcon.vocab * falcon.hidden


def test_a_script_that_loads_a_litgpt_model_is_estimated_as_litgpt_code():
    source = textwrap.dedent(
        """\
        import lightning as L
        from litgpt import LLM

        fabric = L.Fabric(precision="bf16-true")
        llm = LLM.load("tiny-llama-1.1b")
        print(llm.generate("Hello", max_new_tokens=50))
        """
    )
    planned = plan_settings(read_inputs(ModuleAnalysis(source, "generate.py")), {})
    assert planned.settings["model_code"] == "litgpt"
    assert planned.settings["dtype"] == "bf16"
    assert planned.inputs["model_code"][1].startswith("line 5")
    assert architecture_for_litgpt_name(planned.model_name).id == "tinyllama-1.1b"


def test_bitsandbytes_versions_that_kept_the_inputs_are_the_high_end():
    llama = find_architecture("llama-2-7b")
    common = dict(model=llama, dtype="bf16", batch_size=2, seq_len=1024, lora_rank=16, quant="nf4")
    unknown = mechanism_estimate(Plan(**common)).allocated
    today = mechanism_estimate(Plan(**common, quant_keeps_inputs=False)).allocated
    old = mechanism_estimate(Plan(**common, quant_keeps_inputs=True)).allocated
    assert unknown.estimate == pytest.approx(today.estimate)
    assert old.estimate > today.estimate + 1 * GIB  # four linear inputs per layer, 32 layers, 2k tokens
    assert unknown.high >= old.estimate


def test_a_later_step_of_litgpts_loop_holds_the_previous_graphs_kept_inputs_too():
    """bitsandbytes before 0.43.2 keeps a 4-bit linear's input as an attribute of the autograd context:
    the backward does not free it, so it lives while `logits` keeps that graph, into the next forward."""
    llama = find_architecture("llama-3-8b")
    common = dict(model=llama, model_code="litgpt", dtype="bf16", batch_size=2, seq_len=512, lora_rank=32,
                  lora_targets=("q_proj", "v_proj"), lora_dropout=0.05, quant="nf4", grad_accum=4)
    first = mechanism_estimate(Plan(**common, quant_keeps_inputs=True, previous_graph_alive=False))
    later = mechanism_estimate(Plan(**common, quant_keeps_inputs=True))
    today = mechanism_estimate(Plan(**common, quant_keeps_inputs=False))
    one_copy = first.allocated.estimate - today.allocated.estimate
    assert one_copy > 1 * GIB  # 32 layers of 1,024 tokens' linear inputs
    assert later.allocated.estimate - first.allocated.estimate == pytest.approx(one_copy, rel=0.02)
    assert any("previous micro-batch" in note for note in later.assumptions)
    # bitsandbytes 0.43.2 and later keep nothing, so the previous graph holds nothing either
    assert mechanism_estimate(Plan(**common, quant_keeps_inputs=False, previous_graph_alive=True)).allocated == today.allocated
    # nor does a base that is not quantised
    lora = {key: value for key, value in common.items() if key != "quant"}
    assert mechanism_estimate(Plan(**lora, previous_graph_alive=True)).allocated == mechanism_estimate(Plan(**lora, previous_graph_alive=False)).allocated


def test_an_unknown_loop_and_bitsandbytes_version_reach_both_copies_at_the_high_end():
    llama = find_architecture("llama-2-7b")
    common = dict(model=llama, dtype="bf16", batch_size=2, seq_len=1024, lora_rank=16, quant="nf4")
    unknown = mechanism_estimate(Plan(**common)).allocated
    both = mechanism_estimate(Plan(**common, quant_keeps_inputs=True, previous_graph_alive=True)).allocated
    assert unknown.estimate == mechanism_estimate(Plan(**common, quant_keeps_inputs=False)).allocated.estimate
    assert unknown.high >= both.estimate


def test_the_blas_workspace_follows_the_gpu_and_the_threads_that_run_matmuls():
    h100, a100 = resolve_target("h100-sxm", 1).gpu, resolve_target("a100-80gb", 1).gpu
    assert h100.blas_workspace_bytes == 32 * 2**20
    assert a100.blas_workspace_bytes == 4096 * 1024 * 2 + 16 * 1024 * 8
    plan = Plan(model=find_architecture("gpt2"), seq_len=512)
    training = mechanism_estimate(plan, workspace_bytes=h100.blas_workspace_bytes).breakdown.cublas_workspace
    inference = mechanism_estimate(Plan(model=plan.model, seq_len=512, mode="infer"), workspace_bytes=h100.blas_workspace_bytes)
    assert training.estimate == 2 * h100.blas_workspace_bytes  # the forward's thread and autograd's
    assert inference.breakdown.cublas_workspace.estimate == h100.blas_workspace_bytes
    assert training.low == 0.0  # cuBLAS's own allocation, outside max_memory_allocated: on the device all the same
    result = mechanism_estimate(plan, workspace_bytes=h100.blas_workspace_bytes)
    assert result.process.low - result.reserved.low == pytest.approx(0.14 * GIB + training.high)


def test_blocks_of_ten_mebibytes_and_more_take_their_whole_segment_when_less_than_one_is_left():
    mib = 2**20
    assert block_overhead(21.5 * mib) == pytest.approx(0.5 * mib)  # a 22 MiB segment, not split
    assert block_overhead(16.31 * mib) < 512  # 18 MiB segment, 1.69 MiB left: split
    assert block_overhead(100) == 412  # blocks are multiples of 512 bytes
    assert block_overhead(8 * mib) == 0


def test_the_fragmentation_interval_is_read_from_the_replayed_runs():
    ratios = [row["reserved"] / row["allocated"] - 1 for row in REPLAYS["rows"]]
    ratios += [row["replayed"]["reserved"] / row["replayed"]["allocated"] - 1 for row in PEAKS["rows"]]
    fixed = [row["reserved"] / row["allocated"] - 1 for row in REPLAYS["rows"] if isinstance(row["seq"], int)]
    fixed += [row["replayed"]["reserved"] / row["replayed"]["allocated"] - 1 for row in PEAKS["rows"]]
    low, expected, high = allocator.FRAGMENTATION
    assert low == pytest.approx(min(fixed), abs=0.001)
    assert expected == pytest.approx(statistics.median(ratios), abs=0.001)
    assert high == pytest.approx(max(ratios), abs=0.001)
    over_live = [row["allocated"] / row["live"] - 1 for row in REPLAYS["rows"]]
    over_live += [row["replayed"]["allocated"] / row["replayed"]["live"] - 1 for row in PEAKS["rows"]]
    assert allocator.BLOCKS_OVER_LIVE == pytest.approx(max(over_live), abs=0.0001)


def test_litgpts_loops_free_their_gradients_and_another_loop_of_unknown_torch_may_not():
    """LitGPT requires torch 2 or later, whose zero_grad frees the gradients: its full fine-tuning keeps no gradients
    through the forward at either end; the same run in code of unknown torch keeps them at the high end."""
    tiny = find_architecture("tinyllama-1.1b")
    common = dict(model=tiny, dtype="bf16", batch_size=1, seq_len=512, lengths_vary=False, lazy_module_loading=True)
    litgpt = mechanism_estimate(Plan(model_code="litgpt", **common))
    assert litgpt.allocated == mechanism_estimate(Plan(model_code="litgpt", zero_grad_frees=True, **common)).allocated
    unknown, freed = mechanism_estimate(Plan(**common)), mechanism_estimate(Plan(zero_grad_frees=True, **common))
    gradients = unknown.breakdown.gradients.high
    assert unknown.breakdown.forward_backward().high == pytest.approx(freed.breakdown.forward_backward().high + gradients)
