"""datalyst's agent and sandbox as a verl agent loop, registered as ``datalyst_agent``, and its reward function.

Point verl at this module (it imports verl, so only verl's own processes import it; ``datalyst.train`` does not):

- the agent loop: an entry ``name: datalyst_agent``, ``_target_: datalyst.train.verl_agent_loop.DatalystAgentLoop``
  in the file ``actor_rollout_ref.rollout.agent.agent_loop_config_path`` names (``configs/verl/`` has one);
  optional keys: ``agent`` (``AgentConfig`` fields; the dialect is each row's) and ``mask_void_runs``;
- the reward: ``reward.custom_reward_function.path=pkg://datalyst.train.verl_agent_loop`` and
  ``name=compute_score``.

The rows are ``datalyst curate export --format verl``'s; the logic lives in ``datalyst.train._verl``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from datalyst.errors import ConfigError

try:
    from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopOutput, register
except ImportError as exc:  # ModuleNotFoundError, or a verl whose own dependencies are missing
    raise ConfigError(
        f"datalyst.train.verl_agent_loop runs inside verl, which does not import here ({exc}); pip install verl"
    ) from exc

from datalyst.llm import HFTokenizer
from datalyst.train._verl import agent_config, compute_score, rollout_row

__all__ = ["DatalystAgentLoop", "compute_score"]


@register("datalyst_agent")
class DatalystAgentLoop(AgentLoopBase):
    """Runs one exported row with datalyst's step-wise agent; verl's server manager writes every turn.

    ``agent``: ``AgentConfig`` settings (``max_turns``, ``sampling.max_tokens`` per turn, ``require_isolation``...);
    temperature and top-p are verl's rollout settings. ``mask_void_runs``: a run with a void turn trains nothing.
    """

    def __init__(self, *args: Any, agent: Mapping[str, Any] | None = None, mask_void_runs: bool = True,
                 **kwargs: Any) -> None:  # fmt: skip
        from omegaconf import OmegaConf  # verl's config library: hydra hands nested settings over in its containers

        super().__init__(*args, **kwargs)
        settings = OmegaConf.to_container(agent, resolve=True) if OmegaConf.is_config(agent) else dict(agent or {})
        self.agent_config = agent_config(settings)
        self.mask_void_runs = mask_void_runs
        self.chat_tokenizer = HFTokenizer(self.tokenizer)

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        rollout = await rollout_row(
            self.server_manager,
            self.chat_tokenizer,
            sampling_params,
            prompt=kwargs["raw_prompt"],
            extra_info=kwargs["extra_info"],
            ground_truth=kwargs["reward_model"]["ground_truth"],
            config=self.agent_config,
            prompt_length=self.rollout_config.prompt_length,
            response_length=self.rollout_config.response_length,
            mask_void_runs=self.mask_void_runs,
        )
        return AgentLoopOutput(**rollout.model_dump(exclude={"trajectory"}))
