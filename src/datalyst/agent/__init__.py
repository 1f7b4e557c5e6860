"""The agent: dialects, the ReAct loop over a sandbox, trajectories, exports and the rollout engine."""

from datalyst.agent._dialect import ActionKind, Dialect, PromptContext, Step
from datalyst.agent._dialects import DIALECTS, get_dialect
from datalyst.agent._export import TrainingMessage, to_html, to_messages, to_notebook
from datalyst.agent._loop import Agent, AgentConfig, build_context
from datalyst.agent._rollout import RolloutSummary, finished_ids, rollout
from datalyst.agent._trajectory import SCHEMA_VERSION, Termination, Trajectory, Turn

__all__ = [
    "DIALECTS",
    "SCHEMA_VERSION",
    "ActionKind",
    "Agent",
    "AgentConfig",
    "Dialect",
    "PromptContext",
    "RolloutSummary",
    "Step",
    "Termination",
    "TrainingMessage",
    "Trajectory",
    "Turn",
    "build_context",
    "finished_ids",
    "get_dialect",
    "rollout",
    "to_html",
    "to_messages",
    "to_notebook",
]
