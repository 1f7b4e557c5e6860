"""The agent: dialects, the ReAct loop over a sandbox, trajectories and the rollout engine."""

from datalyst.agent._dialect import ActionKind, Dialect, PromptContext, Step
from datalyst.agent._trajectory import SCHEMA_VERSION, Termination, Trajectory, Turn

__all__ = ["SCHEMA_VERSION", "ActionKind", "Dialect", "PromptContext", "Step", "Termination", "Trajectory", "Turn"]
