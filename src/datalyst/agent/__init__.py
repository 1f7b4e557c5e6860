"""The agent: dialects, the step-wise agent over a sandbox, trajectories, training examples, exports, rollouts."""

from datalyst.agent._agent import (
    ANALYST_OPTIONS,
    Agent,
    AgentConfig,
    AgentState,
    Guidance,
    analyst_config,
    recorded_calls,
)
from datalyst.agent._dialect import ActionKind, Dialect, PromptContext, Step
from datalyst.agent._dialects import DIALECTS, PROGRAM, get_dialect
from datalyst.agent._export import TrainingMessage, to_html, to_messages, to_notebook
from datalyst.agent._outcome import (
    ANSWER_FORMAT,
    FORM_PROBLEMS,
    NO_ANSWER,
    NO_FIGURE,
    UNPARSABLE_TURN,
    VOID_TURN,
    Outcome,
    Status,
    ajudge_trajectory,
    answer_format_problem,
    form_problem,
)
from datalyst.agent._rollout import RolloutSummary, rollout, rollout_groups
from datalyst.agent._store import finished_ids, read_trajectories
from datalyst.agent._training import TrainingExample, training_example
from datalyst.agent._trajectory import SCHEMA_VERSION, Termination, Trajectory, Turn, cell_key, trajectory_id

__all__ = [
    "ANALYST_OPTIONS",
    "ANSWER_FORMAT",
    "DIALECTS",
    "FORM_PROBLEMS",
    "NO_ANSWER",
    "NO_FIGURE",
    "PROGRAM",
    "SCHEMA_VERSION",
    "UNPARSABLE_TURN",
    "VOID_TURN",
    "ActionKind",
    "Agent",
    "AgentConfig",
    "AgentState",
    "Dialect",
    "Guidance",
    "Outcome",
    "PromptContext",
    "RolloutSummary",
    "Status",
    "Step",
    "Termination",
    "TrainingExample",
    "TrainingMessage",
    "Trajectory",
    "Turn",
    "ajudge_trajectory",
    "analyst_config",
    "answer_format_problem",
    "cell_key",
    "finished_ids",
    "form_problem",
    "get_dialect",
    "read_trajectories",
    "recorded_calls",
    "rollout",
    "rollout_groups",
    "to_html",
    "to_messages",
    "to_notebook",
    "training_example",
    "trajectory_id",
]
