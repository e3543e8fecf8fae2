"""The run cannot fit on the target GPU: even the optimistic end of the memory estimate is too big.

With a target GPU configured (`target-gpu` in `[tool.trainlint]`, `--target-gpu`, or the editor's
`targetGpu`), trainlint reads the script's model, batch size, sequence length, precision,
optimizer, adapters and sharding, estimates the per-GPU peak, and reports the model line when
the low end of the estimate's interval already exceeds what one device can allocate. The run
would die with CUDA out-of-memory after the instance is booted, the data downloaded and the
model loaded. Estimates that fit only at the point estimate, or whose model is unknown, are
never reported: the interval is honest about what it does not know.

How to fix: the message names the largest memory term and the cheapest change that makes it
fit (checkpointing, a smaller micro-batch with accumulation, 8-bit optimizer state, adapters,
sharding, or a bigger GPU); `trainlint estimate SCRIPT --gpu NAME` shows the whole breakdown.
"""

from __future__ import annotations

from trainlint.rules import Fires, Quiet, Rule, RuleContext, Severity

from .units import gib


class ProjectedOom(Rule):
    code = "TL601"
    name = "projected-oom"
    severity = Severity.ERROR

    def check(self, ctx: RuleContext) -> None:
        gpu = ctx.settings.target_gpu if ctx.settings is not None else None
        if not gpu:
            return
        # Only the statement the model is read from can be reported: every other statement's (empty)
        # result is kept while the model is read from the same statement, not recomputed at each key.
        if ctx.module.module_fact("TL601 model statement", _model_statement) != ctx.chunk.index:
            return
        read = ctx.module.module_wide("TL601 inputs", _inputs)
        model = read.model or read.local_model_class
        if model is None or model.node is None or model.chunk is not ctx.chunk:
            return
        assert model.node is not None, "a value found in this statement's code has its node"
        # keyed by the model comment too: the trees' inputs and a report made from them are kept by an edit
        # that changes no tree, which may change a comment on a line that stays broken
        comment = read.model_comment and (read.model_comment.value, read.model_comment.line, read.model_comment.code)
        report = ctx.module.module_wide(f"TL601 report {gpu} with the comment {comment}", lambda module: _report(module, read, gpu))
        if report is None or report.verdict != "oom":
            return
        result = report.result
        largest, value = max(result.breakdown.items(), key=lambda item: item[1].estimate)
        usable = report.target.usable_bytes_per_device
        best = next((remedy for remedy in report.remedies if remedy.fits), None)
        advice = f"; the cheapest change that fits: {best.change} ({gib(best.result.needed.estimate)} GiB)" if best else ""
        ctx.report(
            model.node,
            f"`{model.value}` needs {gib(result.needed.low)}–{gib(result.needed.high)} GiB per GPU as configured "
            f"(estimate {gib(result.needed.estimate)} GiB; largest term: {largest.replace('_', ' ')} "
            f"{gib(value.estimate)} GiB), and {report.target.gpu.name} can allocate {gib(usable)} GiB: it does not fit "
            f"even at the low end{advice}",
            evidence=[
                ((found.chunk, found.node), f"{name.replace('_', ' ')}: {found.value}")
                for name, found in read.found().items() if found.node is not None and found.chunk is not None
            ],
            chunk=model.chunk,
            help=f"run `trainlint estimate {ctx.module.path} --gpu {gpu}` for the breakdown and every remedy",
        )


def _inputs(module):
    """The script's inputs: the trees' (kept while no tree changes), with the text's model comment."""
    from .reading import read_tree_inputs
    from .script_inputs import with_model_comment

    return with_model_comment(module.module_wide("TL601 tree inputs", read_tree_inputs), module.text)


def _model_statement(module) -> int | None:
    """The index of the statement of this file the script's model is read from (None: none, or another file's):
    read off the trees alone, so the value is kept by an edit that changes none."""
    from .reading import read_tree_inputs

    read = module.module_wide("TL601 tree inputs", read_tree_inputs)
    model = read.model or read.local_model_class
    if model is None or model.node is None or model.chunk is None:
        return None
    index = model.chunk.index
    return index if index < len(module.chunks) and module.chunks[index] is model.chunk else None


def _report(module, read, gpu: str):
    from .custom_models import resolve_model
    from .hardware import UnknownTarget, resolve_target
    from .plan import CannotEstimate, Plan
    from .report import build
    from .script_plan import plan_settings

    try:
        target = resolve_target(gpu)
    except UnknownTarget:
        return None
    planned = plan_settings(read, {})
    architecture, _ = resolve_model(module, read, planned)
    if architecture is None:
        return None
    try:
        return build(Plan(model=architecture, gpus=target.count, **planned.settings), target, planned.inputs, planned.notes)
    except CannotEstimate:
        return None


_FULL_FINE_TUNE = """
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained("{model}", torch_dtype=torch.bfloat16)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    for batch in loader:
        loss = model(**batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    """

ProjectedOom.MUST_FIRE = (
    Fires(_FULL_FINE_TUNE.format(model="meta-llama/Meta-Llama-3-8B"), settings={"target_gpu": "t4"}),
    Fires(_FULL_FINE_TUNE.format(model="mistralai/Mistral-7B-v0.1"), settings={"target_gpu": "rtx-4090"}),
    Fires(_FULL_FINE_TUNE.format(model="meta-llama/Llama-2-13b-hf"), settings={"target_gpu": "a100-40gb"}),
    Fires(
        """
        from transformers import AutoModelForCausalLM, TrainingArguments

        model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-7B")
        args = TrainingArguments(output_dir="out", per_device_train_batch_size=8, bf16=True)
        """,
        settings={"target_gpu": "l4"},
    ),
    Fires(
        """
        import torch
        from torchvision import models

        model = models.resnet50()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        loader = torch.utils.data.DataLoader(train_set, batch_size=4096)
        for x, y in loader:
            torch.nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
        """,
        settings={"target_gpu": "t4"},
    ),
    Fires(
        """
        from transformers import AutoModelForCausalLM

        MODEL = "meta-llama/Meta-Llama-3-70B"
        model = AutoModelForCausalLM.from_pretrained(MODEL)
        outputs = model.generate(input_ids, max_new_tokens=256)
        """,
        settings={"target_gpu": "a100-80gb"},
    ),
    Fires(
        """
        import torch
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self, width=50_000):
                super().__init__()
                self.fc1 = nn.Linear(width, width)
                self.fc2 = nn.Linear(width, 10)

        model = Net()
        optimizer = torch.optim.Adam(model.parameters())
        for x, y in loader:
            torch.nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
        """,
        settings={"target_gpu": "t4"},
    ),
)

ProjectedOom.MUST_NOT_FIRE = (
    Quiet(_FULL_FINE_TUNE.format(model="meta-llama/Meta-Llama-3-8B")),  # no target GPU configured
    Quiet(_FULL_FINE_TUNE.format(model="gpt2"), settings={"target_gpu": "h100-sxm"}),
    Quiet(_FULL_FINE_TUNE.format(model="some-org/unknown-model-7b"), settings={"target_gpu": "t4"}),
    Quiet(
        """
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self, features):
                super().__init__()
                self.fc = nn.Linear(features, 10 ** 4)

        model = Net(dataset.feature_count())
        """,
        settings={"target_gpu": "t4"},
    ),
    Quiet(
        """
        from transformers import AutoModelForCausalLM, BitsAndBytesConfig
        from peft import LoraConfig

        model = AutoModelForCausalLM.from_pretrained(
            "meta-llama/Meta-Llama-3-8B", quantization_config=BitsAndBytesConfig(load_in_4bit=True)
        )
        model.gradient_checkpointing_enable()
        lora = LoraConfig(r=16, target_modules=["q_proj", "v_proj"])
        loader = DataLoader(train_set, batch_size=1)
        max_seq_length = 512
        for batch in loader:
            model(**batch).loss.backward()
        """,
        settings={"target_gpu": "rtx-4090"},
    ),
    Quiet(_FULL_FINE_TUNE.format(model="meta-llama/Meta-Llama-3-8B"), settings={"target_gpu": "no-such-gpu"}),
)
