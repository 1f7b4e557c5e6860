"""Training agents on their own trajectories: SFT, RL over the agent and sandbox, value and reward models."""

from datalyst.train._convert import adapter_to_gguf
from datalyst.train._data import Example, read_examples
from datalyst.train._policy import LoraOptions, load_policy
from datalyst.train._rl import RLConfig, RLResult, train_rl
from datalyst.train._sft import SFTConfig, SFTResult, train_sft

__all__ = [
    "Example",
    "LoraOptions",
    "RLConfig",
    "RLResult",
    "SFTConfig",
    "SFTResult",
    "adapter_to_gguf",
    "load_policy",
    "read_examples",
    "train_rl",
    "train_sft",
]
