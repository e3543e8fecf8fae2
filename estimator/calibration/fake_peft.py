"""peft's adapters on a model of fake tensors: ``get_peft_model`` moves each new adapter to its base layer's device
(``Module.to`` and ``_move_adapter_to_device_of_base_layer``), which a fake parameter cannot do and which changes
nothing here, where every module is on the CPU already. Shared by the calibration scripts that wrap a model."""

from __future__ import annotations

import peft
import torch


def lora_model(model: torch.nn.Module, config: peft.LoraConfig) -> torch.nn.Module:
    """``peft.get_peft_model(model, config)`` with both moves left out."""
    tuner = peft.tuners.tuners_utils.BaseTunerLayer
    move, move_adapter = torch.nn.Module.to, tuner._move_adapter_to_device_of_base_layer
    torch.nn.Module.to = lambda self, *args, **kwargs: self
    tuner._move_adapter_to_device_of_base_layer = lambda self, *args, **kwargs: None
    try:
        return peft.get_peft_model(model, config)
    finally:
        torch.nn.Module.to, tuner._move_adapter_to_device_of_base_layer = move, move_adapter
