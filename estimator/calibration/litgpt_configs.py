"""LitGPT's model catalog, as far as memory differs from the Hugging Face model: ``data/litgpt_models.json``.

LitGPT builds every model with its own classes (``litgpt/model.py``): a separate ``lm_head`` beside the
token embedding whatever the Hugging Face checkpoint ties (its checkpoint converter copies a tied
embedding into the head; only ``litgpt pretrain --train.tie_embeddings`` ties them), and a vocabulary
padded to ``padded_vocab_size``. This reads both from LitGPT's ``config.py`` (its list ``configs``)
with the Hugging Face id each entry converts (``hf_config``), so that a script naming a LitGPT model
(``LLM.load("phi-2")``, ``Config.from_name("Llama-2-7b-hf")``, ``checkpoints/org/name``) maps to a
catalog architecture. Runs in the calibration venv with a LitGPT source tree (see litgpt_activations.py):

    python litgpt_configs.py --source DIR ../data/litgpt_models.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from litgpt_activations import arguments  # noqa: E402


def main() -> None:
    out, (_, config_module, _, _) = arguments(__doc__)
    models = {}
    for entry in config_module.configs:
        hf = entry.get("hf_config") or {}
        config = config_module.Config(**entry)
        models[entry["name"]] = {
            "hf_id": f"{hf['org']}/{hf['name']}" if hf.get("org") and hf.get("name") else None,
            "padded_vocab_size": config.padded_vocab_size,
        }
    out.write_text(json.dumps({
        "about": "LitGPT model names, the Hugging Face id each converts, and LitGPT's padded vocabulary; "
                 "LitGPT keeps the LM head apart from the embedding for every model (calibration/litgpt_configs.py)",
        "models": dict(sorted(models.items())),
    }, indent=1) + "\n")
    print(len(models), "models")


if __name__ == "__main__":
    main()
