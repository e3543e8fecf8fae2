"""The batch size and the precision of a script are those of its training loop: the loader the loop
with the backward iterates, and the autocast around the training forward, not a sampling or
validation loader or a validation function's autocast."""

from __future__ import annotations

import json
import subprocess
import textwrap

from cli_process import TRAINLINT

from trainlint.analysis.module import ModuleAnalysis
from trainlint.estimator.reading import read_inputs

# The shape of diffusers' DreamBooth LoRA SDXL script: class images sampled in batches of
# --sample_batch_size before training, validation images generated under an autocast, and the
# training loop over the loader of --train_batch_size, under the Accelerator's mixed precision.
DREAMBOOTH = textwrap.dedent(
    """\
    import argparse
    from contextlib import nullcontext

    import torch
    from accelerate import Accelerator
    from diffusers import StableDiffusionXLPipeline, UNet2DConditionModel
    from torch.utils.data import DataLoader, Dataset


    def log_validation(pipeline, args, accelerator, pipeline_args):
        pipeline = pipeline.to(accelerator.device)
        autocast_ctx = torch.autocast(accelerator.device.type) if args.validation_prompt else nullcontext()
        with autocast_ctx:
            images = [pipeline(**pipeline_args).images[0] for _ in range(args.num_validation_images)]
        return images


    class PromptDataset(Dataset):
        def __init__(self, prompt, num_samples):
            self.prompt = prompt
            self.num_samples = num_samples

        def __len__(self):
            return self.num_samples

        def __getitem__(self, index):
            return {"prompt": self.prompt, "index": index}


    def parse_args():
        parser = argparse.ArgumentParser()
        parser.add_argument("--pretrained_model_name_or_path", type=str, default=None, required=True)
        parser.add_argument("--resolution", type=int, default=1024)
        parser.add_argument("--train_batch_size", type=int, default=4)
        parser.add_argument("--sample_batch_size", type=int, default=4)
        parser.add_argument("--num_class_images", type=int, default=100)
        parser.add_argument("--mixed_precision", type=str, default=None, choices=["no", "fp16", "bf16"])
        parser.add_argument("--validation_prompt", type=str, default=None)
        parser.add_argument("--num_validation_images", type=int, default=4)
        return parser.parse_args()


    def main(args):
        accelerator = Accelerator(mixed_precision=args.mixed_precision)
        pipeline = StableDiffusionXLPipeline.from_pretrained(args.pretrained_model_name_or_path)
        sample_dataset = PromptDataset("a photo of a dog", args.num_class_images)
        sample_dataloader = torch.utils.data.DataLoader(sample_dataset, batch_size=args.sample_batch_size)
        sample_dataloader = accelerator.prepare(sample_dataloader)
        for example in sample_dataloader:
            images = pipeline(example["prompt"]).images
            for image in images:
                image.save(f"{example['index']}.jpg")
        del pipeline

        unet = UNet2DConditionModel.from_pretrained(args.pretrained_model_name_or_path, subfolder="unet")
        optimizer = torch.optim.AdamW(unet.parameters(), lr=1e-4)
        train_dataset = PromptDataset("a photo of sks dog", 5)
        train_dataloader = torch.utils.data.DataLoader(train_dataset, batch_size=args.train_batch_size, shuffle=True)
        unet, optimizer, train_dataloader = accelerator.prepare(unet, optimizer, train_dataloader)
        for epoch in range(10):
            unet.train()
            for step, batch in enumerate(train_dataloader):
                with accelerator.accumulate(unet):
                    model_pred = unet(batch["pixel_values"], step, batch["prompt"]).sample
                    loss = torch.nn.functional.mse_loss(model_pred.float(), batch["pixel_values"].float())
                    accelerator.backward(loss)
                    optimizer.step()
                    optimizer.zero_grad()
            if args.validation_prompt is not None:
                log_validation(pipeline, args, accelerator, {"prompt": args.validation_prompt})


    if __name__ == "__main__":
        main(parse_args())
    """
)


def _found(text: str):
    return read_inputs(ModuleAnalysis(text, "train.py")).found()


def _line_of(text: str, fragment: str) -> int:
    return next(number for number, line in enumerate(text.splitlines(), start=1) if fragment in line)


def test_the_batch_size_is_the_training_loaders_whatever_the_sampling_loader_takes():
    for sample in (4, 1):
        script = DREAMBOOTH.replace('"--sample_batch_size", type=int, default=4', f'"--sample_batch_size", type=int, default={sample}')
        found = _found(script)
        assert found["batch_size"].value == 4, sample
        assert found["batch_size"].line == _line_of(script, "train_dataloader = torch.utils.data.DataLoader(")
    smaller = _found(DREAMBOOTH.replace('"--train_batch_size", type=int, default=4', '"--train_batch_size", type=int, default=2'))
    assert smaller["batch_size"].value == 2


def test_a_validation_functions_autocast_is_not_the_training_precision():
    read = read_inputs(ModuleAnalysis(DREAMBOOTH, "train.py"))
    assert read.dtype is None  # mixed precision comes from accelerate's own configuration: unknown here
    line = _line_of(DREAMBOOTH, "accelerator = Accelerator(")
    assert any(note.startswith(f"the Accelerator at line {line} takes its mixed precision from accelerate's") for note in read.notes)
    stated = DREAMBOOTH.replace('"--mixed_precision", type=str, default=None', '"--mixed_precision", type=str, default="bf16"')
    found = _found(stated)
    assert found["dtype"].value == "amp-bf16"
    assert found["dtype"].line == _line_of(stated, "accelerator = Accelerator(")
    assert _found(stated.replace('default="bf16"', 'default="no"'))["dtype"].value == "fp32"


def test_an_autocast_around_the_training_forward_is_read():
    script = textwrap.dedent(
        """\
        import torch
        from torch.utils.data import DataLoader

        def evaluate(model, loader):
            with torch.no_grad(), torch.autocast("cuda", dtype=torch.float16):
                return sum(model(x).sum() for x, _ in loader)

        def train(model, optimizer, loader):
            for x, y in loader:
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    loss = torch.nn.functional.cross_entropy(model(x), y)
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()

        model = torch.nn.Linear(4, 2)
        optimizer = torch.optim.AdamW(model.parameters())
        eval_loader = DataLoader(eval_set, batch_size=256)
        train_loader = DataLoader(train_set, batch_size=16, shuffle=True)
        evaluate(model, eval_loader)
        train(model, optimizer, train_loader)
        """
    )
    found = _found(script)
    assert found["dtype"].value == "amp-bf16" and found["dtype"].line == 10
    assert found["batch_size"].value == 16 and found["batch_size"].line == 19


def test_a_training_loop_wrapped_in_autocast_and_a_step_in_a_helper():
    script = textwrap.dedent(
        """\
        import torch
        from torch.utils.data import DataLoader

        def step(model, optimizer, batch):
            loss = model(batch).mean()
            loss.backward()
            optimizer.step()

        def validate(model):
            with torch.autocast("cuda", dtype=torch.float16):
                return model(torch.ones(1, 4))

        model = torch.nn.Linear(4, 2)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        probe_loader = DataLoader(probe_set, batch_size=512)
        loader = DataLoader(train_set, batch_size=8)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            for batch in loader:
                step(model, optimizer, batch)
        for batch in probe_loader:
            print(model(batch).shape)
        validate(model)
        """
    )
    found = _found(script)
    assert found["dtype"].value == "amp-bf16" and found["dtype"].line == 17
    assert found["batch_size"].value == 8 and found["batch_size"].line == 16


def test_without_a_training_loop_the_first_loader_and_autocast_still_count():
    script = textwrap.dedent(
        """\
        import torch
        from torch.utils.data import DataLoader

        loader = DataLoader(data, batch_size=32)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            outputs = [model(x) for x in loader]
        """
    )
    found = _found(script)
    assert found["batch_size"].value == 32 and found["dtype"].value == "amp-bf16"


def test_the_dreambooth_estimate_does_not_move_with_the_sampling_batch(tmp_path):
    peaks = []
    for sample in (4, 1):
        script = tmp_path / f"train_{sample}.py"
        script.write_text(
            DREAMBOOTH.replace('"--sample_batch_size", type=int, default=4', f'"--sample_batch_size", type=int, default={sample}'),
            encoding="utf-8",
        )
        result = subprocess.run(
            [*TRAINLINT, "estimate", str(script), "--model", "stabilityai/stable-diffusion-xl-base-1.0",
             "--gpu", "a100-80gb", "--format", "json"],
            capture_output=True, text=True, check=False,
        )
        assert result.returncode in (0, 1), result.stderr
        report = json.loads(result.stdout)
        assert report["inputs"]["batch_size"]["source"].startswith(f"line {_line_of(DREAMBOOTH, 'train_dataloader = torch')}:")
        peaks.append(report["peak"]["process"]["estimate"])
    assert peaks[0] == peaks[1]


# A trainer class whose step deletes the model's output before the backward, keeping only the loss: the
# loss over the vocabulary then holds its own tensors (12 bytes per logit), not the logits beside them.
STEP_DROPS_OUTPUT = textwrap.dedent(
    """\
    import torch
    import torch.nn.functional as F
    from torch.utils.data import DataLoader
    from transformers import AutoModelForCausalLM


    def cross_entropy_loss(pred, labels):
        return F.cross_entropy(pred.flatten(0, 1).float(), labels.flatten(0, 1))


    class Trainer:
        def __init__(self, model, optimizer, loader):
            self.model = model
            self.optimizer = optimizer
            self.loader = loader

        def train_step(self, inputs, labels):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                pred = self.model(inputs).logits
                loss = cross_entropy_loss(pred, labels)
            # free the logits before the backward
            del pred
            loss.backward()
            self.optimizer.step()
            self.optimizer.zero_grad()
            return loss

        def train(self):
            for inputs, labels in self.loader:
                self.train_step(inputs, labels)


    model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    Trainer(model, optimizer, DataLoader(dataset, batch_size=2)).train()
    """
)


def test_a_step_that_deletes_the_models_output_before_the_backward_frees_the_logits():
    found = _found(STEP_DROPS_OUTPUT)
    assert found["outputs_freed"].value is True
    assert found["outputs_freed"].line == _line_of(STEP_DROPS_OUTPUT, "del pred")


def test_an_output_still_bound_elsewhere_or_deleted_after_the_backward_is_not_freed():
    kept_alias = STEP_DROPS_OUTPUT.replace(
        "            loss = cross_entropy_loss(pred, labels)\n",
        "            loss = cross_entropy_loss(pred, labels)\n            logged = pred[:, -1]\n",
    )
    after_backward = STEP_DROPS_OUTPUT.replace("        del pred\n        loss.backward()\n", "        loss.backward()\n        del pred\n")
    only_sometimes = STEP_DROPS_OUTPUT.replace("        del pred\n", "        if labels is None:\n            del pred\n")
    stored = STEP_DROPS_OUTPUT.replace("        del pred\n", "        self.history.append(pred)\n        del pred\n")
    for script in (kept_alias, after_backward, only_sometimes, stored):
        assert script != STEP_DROPS_OUTPUT
        assert "outputs_freed" not in _found(script)


def test_freed_outputs_take_the_loss_down_to_its_own_tensors(tmp_path):
    """The loss's replay (calibration/loss_peaks.py): 11.97 bytes per logit with the outputs dropped, 15.96 held."""
    dropped, held = tmp_path / "dropped.py", tmp_path / "held.py"
    dropped.write_text(STEP_DROPS_OUTPUT, encoding="utf-8")
    held.write_text(STEP_DROPS_OUTPUT.replace("        del pred\n", ""), encoding="utf-8")

    def logits_bytes(script, *flags):
        run = subprocess.run([*TRAINLINT, "estimate", str(script), "--seq-len", "4096", "--gpu", "h100-sxm", "--format", "json", *flags],
                             capture_output=True, text=True, check=False)
        return json.loads(run.stdout)["breakdown"]["logits"]

    logits = 2 * 4096 * 128256  # batch, tokens, Llama 3's vocabulary
    assert logits_bytes(dropped) == 12 * logits
    assert logits_bytes(held) == 16 * logits
    assert logits_bytes(held, "--outputs-freed") == 12 * logits


def test_a_loss_helper_that_deletes_the_output_before_returning_the_loss_frees_it():
    """torchtune's recipes: `_loss_step` runs the model, reshapes its output, takes the loss, deletes the output and
    returns the loss, which the training loop backwards."""
    script = textwrap.dedent(
        """\
        import torch
        from torch.utils.data import DataLoader
        from transformers import AutoModelForCausalLM


        class Recipe:
            def __init__(self, model, loss_fn, optimizer):
                self._model, self._loss_fn, self._optimizer = model, loss_fn, optimizer

            def _loss_step(self, batch):
                labels = batch.pop("labels")
                outputs = self._model(**batch).logits
                labels = labels.reshape(-1)
                outputs = outputs.reshape(-1, outputs.size(-1))
                loss = self._loss_fn(outputs, labels)
                # free outputs otherwise it peaks backward memory
                del outputs
                return loss

            def train(self, loader):
                for batch in loader:
                    current_loss = self._loss_step(batch)
                    current_loss.backward()
                    self._optimizer.step()
                    self._optimizer.zero_grad(set_to_none=True)


        model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")
        Recipe(model, torch.nn.CrossEntropyLoss(), torch.optim.AdamW(model.parameters())).train(DataLoader(data, batch_size=4))
        """
    )
    found = _found(script)
    assert found["outputs_freed"].value is True
    assert found["outputs_freed"].line == _line_of(script, "del outputs")
    logged = script.replace("        del outputs\n", "        self.last = outputs\n        del outputs\n")
    assert "outputs_freed" not in _found(logged)
