"""Training agents on their own trajectories: SFT, RL over the agent and sandbox, value and reward models."""

from datalyst.train._convert import adapter_to_gguf, lora_from_gguf
from datalyst.train._data import read_examples
from datalyst.train._hrm import HRMConfig, load_hrm, train_hrm
from datalyst.train._package import package_adapter
from datalyst.train._policy import LoraOptions, load_policy
from datalyst.train._rl import RLConfig, train_rl
from datalyst.train._sft import SFTConfig, train_sft
from datalyst.train._value import (
    ScorerResult,
    ValueConfig,
    ValueExample,
    ValueModel,
    check_value,
    held_out_examples,
    load_value_model,
    monte_carlo_values,
    read_sources,
    read_value_examples,
    state_messages,
    train_value,
    with_outcomes,
    write_value_examples,
)

__all__ = [
    "HRMConfig",
    "LoraOptions",
    "RLConfig",
    "SFTConfig",
    "ScorerResult",
    "ValueConfig",
    "ValueExample",
    "ValueModel",
    "adapter_to_gguf",
    "check_value",
    "held_out_examples",
    "load_hrm",
    "load_policy",
    "load_value_model",
    "lora_from_gguf",
    "monte_carlo_values",
    "package_adapter",
    "read_examples",
    "read_sources",
    "read_value_examples",
    "state_messages",
    "train_hrm",
    "train_rl",
    "train_sft",
    "train_value",
    "with_outcomes",
    "write_value_examples",
]
