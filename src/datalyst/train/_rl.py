"""RL over the agent and its sandbox: GRPO, DAPO, and DataMind's ``gamma * L_SFT + (1 - gamma) * L_DAPO``.

Each step draws tasks with verified answers (seeded by the step), lets the agent solve each one
``group_size`` times with the current policy (``_rollouts``), rewards every run (DataMind's Eq. 8, plus
Datarus's tag reward on a cosine curriculum when asked) and takes ``mini_batches`` optimizer steps over
the groups, the first on-policy and the next ones clipped against the log-probabilities the runs had
before the step. Environment tokens carry no loss (the training example's mask), runs with a void turn
none at all. DAPO keeps only groups that are neither all right nor all wrong and rolls out further tasks
to fill the step; with ``dapo+sft`` the dropped groups still teach through their task's expert trajectory.

Losses are accumulated one sequence at a time, each weighted so that the sum equals the batch formula of
``_losses`` (DAPO: tokens over all tokens; GRPO: a mean per sequence over sequences; SFT: tokens over all
SFT tokens): a CPU holds the activations of one trajectory, not of a whole batch. The policy runs with
dropout off throughout, so the first update's ratio is exactly 1.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict

from datalyst.agent import Agent, AgentConfig, Trajectory, get_dialect, training_example
from datalyst.curate import RunFolder, read_curated
from datalyst.errors import ConfigError
from datalyst.files import write_atomic
from datalyst.llm import ChatModel, ChatTokenizer, ModelKind, SamplingParams, load_model, resolve_spec
from datalyst.tasks import Task, read_tasks
from datalyst.train._checkpoints import finish_run, resume, save_checkpoint, start_run
from datalyst.train._data import Example, to_example
from datalyst.train._hrm import load_hrm
from datalyst.train._log import StepLog, append_log, plot_curve, read_log
from datalyst.train._logprobs import token_logprobs
from datalyst.train._policy import LoraOptions, load_policy, save_weights, trainable_parameters
from datalyst.train._rewards import L_MAX, L_MIN, curriculum_reward, datamind_reward, tag_reward
from datalyst.train._rollouts import Collected, Scored, collect, informative
from datalyst.train._runtime import Runtime, release_memory, start_runtime
from datalyst.train._schedules import sft_weight, structure_weight
from datalyst.train._sft import collate

Algorithm = Literal["grpo", "dapo", "dapo+sft"]


class TrajectoryScorer(Protocol):
    """What RL needs of a reward model: a score in [-1, 1] for a whole run (``load_hrm`` gives one)."""

    def score(self, trajectory: Trajectory) -> float: ...


RolloutModel = Callable[[Any, int], ChatModel]
"""Given the policy and the step, the chat model the agent samples with (closed after the step's rollouts
unless it is the policy itself)."""


class RLConfig(BaseModel):
    """Everything that decides an RL run (saved as ``config.json``; a resumed run must match it)."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    tasks: list[str]
    """Task files (JSONL); tasks with a verified answer are used."""
    model: str = "embedded:small"
    """Base model spec (embedded:, gguf: or hf:)."""
    adapter: str | None = None
    """A trained adapter to start from (an SFT run's adapter folder or a GGUF adapter file); else fresh LoRA layers."""
    expert: str | None = None
    """A curation run whose kept trajectories feed the SFT term (``dapo+sft``)."""
    exclude: list[str] = []
    """Files of trajectory or task ids (one per line) whose tasks are held out, e.g. an SFT run's ``examples.txt``;
    repeat."""
    algo: Algorithm = "dapo+sft"
    """grpo, dapo or dapo+sft (DataMind's mix)."""
    dialect: str = "jupiter"
    """Turn format of the runs: datamind, jupiter or datarus."""
    steps: int = 8
    """RL steps, each a round of runs, rewards and updates."""
    prompts: int = 4
    """Task groups per step (DataMind: 16)."""
    group_size: int = 4
    """Runs per task (G)."""
    oversample: int = 2
    """With DAPO, at most ``prompts * oversample`` tasks are rolled out to fill a step with ``prompts``
    informative groups."""
    mini_batches: int = 2
    """Optimizer steps per RL step."""
    lr: float = 1e-5
    """Learning rate (constant). DataMind uses 1e-6 for all weights of 7B-14B models; LoRA on a small model moves
    slower per step."""
    epsilon: float = 0.2
    """The ratio's lower clip bound (1 - epsilon)."""
    epsilon_high: float = 0.28
    """The ratio's upper clip bound (1 + epsilon_high; DAPO's clip-higher)."""
    temperature: float = 0.7
    """Sampling temperature of the runs."""
    top_p: float = 1.0
    """Nucleus sampling's top-p of the runs."""
    max_turns: int = 6
    """Turns a run may take."""
    max_tokens: int = 768
    """Tokens per model turn."""
    l_min: int = L_MIN
    """Eq. 8's length bounds, in agent tokens: a right run earns 1 up to l_min, down to 0.5 at l_max."""
    l_max: int = L_MAX
    """Eq. 8's upper length bound (see l_min)."""
    hrm: str | None = None
    """A trained hierarchical reward model (``datalyst train hrm``) whose trajectory score joins the answer reward."""
    hrm_weight: float = 0.5
    """Weight of the reward model's score."""
    structure: bool = False
    """Add Datarus's tag reward (datarus dialect), weighted from 1 down to 0.1 over the run."""
    engine: Literal["auto", "llamacpp", "transformers"] = "auto"
    """What samples the runs: llama.cpp on the base GGUF with the policy's adapter converted each step (``auto``
    for ``embedded:``/``gguf:`` bases; several times faster on a CPU), or the trained transformers model itself."""
    concurrency: int = 4
    """Runs at once."""
    seed: int = 0
    """Seed of the tasks drawn, of sampling and of the new LoRA layers."""
    precision: Literal["auto", "bf16", "fp32"] = "auto"
    """auto (bf16 where the hardware has it), bf16 or fp32."""
    max_grad_norm: float = 1.0
    """Gradients are clipped to this norm."""


class RLResult(BaseModel):
    out: Path
    adapter: Path
    steps: int
    mean_reward: float
    seconds: float


def train_rl(
    config: RLConfig, out: str | Path, *, rollout_model: RolloutModel | None = None, progress: bool = True
) -> RLResult:
    """Run (or resume) RL as ``config`` says, writing into ``out`` (``config.json``, ``log.jsonl``, checkpoints,
    ``rollouts/step-NNNN.jsonl``, then ``adapter/``, ``reward.png`` and ``train.manifest.json``)."""
    out = Path(out)
    if config.structure and config.dialect != "datarus":
        raise ConfigError("the tag reward (--structure) scores the datarus dialect's tags; use --dialect datarus")
    get_dialect(config.dialect)
    tasks = rl_tasks(config)  # before the model loads: a task file with nothing to learn from ends at once
    experts = expert_trajectories(config.expert) if config.algo == "dapo+sft" else {}
    start_run(out, config)
    runtime = start_runtime(config.precision, seed=config.seed)
    policy = load_policy(config.model, lora=LoraOptions(dropout=0.0), adapter=config.adapter)
    hrm = load_hrm(config.hrm) if config.hrm else None
    parameters = trainable_parameters(policy.model)
    optimizer = runtime.torch.optim.AdamW(parameters.values(), lr=config.lr, weight_decay=0.0)
    scheduler = runtime.torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)  # constant, as DataMind
    model, optimizer = runtime.prepare(policy.model, optimizer)
    policy.device = runtime.device  # where prepare put the weights: generation must feed them there
    model.eval()  # no dropout: old and new log-probabilities agree until the weights move
    start = resume(out, parameters, optimizer, scheduler, runtime)
    sampler = rollout_model or _engine(config, out)
    with runtime.progress(config.steps, start, enabled=progress) as advance:
        for step in range(start, config.steps):
            began = time.perf_counter()
            drawn = random.Random(f"{config.seed}:{step}").sample(
                tasks, min(len(tasks), config.prompts * config.oversample)
            )
            collected = asyncio.run(_roll_out(sampler(policy, step), policy, drawn, config, step))
            rewards = [[reward(run, config, step, hrm) for run in group] for group in collected.groups]
            gamma = sft_weight(step, config.steps) if config.algo == "dapo+sft" else 0.0
            figures = rl_update(model, collected, rewards, experts, policy.chat_tokenizer, runtime, optimizer,
                                config=config, gamma=gamma)  # fmt: skip
            figures |= _rollout_figures(collected, rewards)
            entry = StepLog(step=step + 1, loss=figures.pop("loss"), lr=config.lr, tokens=int(figures.pop("tokens")),
                            seconds=time.perf_counter() - began, figures=figures)  # fmt: skip
            if runtime.is_main:
                append_log(out / "log.jsonl", entry)
                write_rollouts(out / "rollouts" / f"step-{step + 1:04d}.jsonl", collected, rewards)
            save_checkpoint(out, step + 1, parameters, optimizer, scheduler, runtime)
            advance(reward=figures["reward/mean"], right=figures["correct/mean"])
    log = read_log(out / "log.jsonl")
    adapter = out / "adapter"
    if runtime.is_main:
        save_weights(runtime.unwrap(policy.model), policy.tokenizer, adapter, base=config.model)
        plot_curve(
            log, out / "reward.png", key="reward/mean", title=f"{config.algo} from {config.adapter or config.model}"
        )
    result = RLResult(out=out, adapter=adapter, steps=len(log), seconds=sum(e.seconds for e in log),
                      mean_reward=sum(e.figures["reward/mean"] for e in log) / len(log))  # fmt: skip
    if runtime.is_main:
        finish_run(out, config, result)
    return result


async def _roll_out(model: ChatModel, policy: Any, tasks: list[Task], config: RLConfig, step: int) -> Collected:
    """The step's groups, sampled by ``model`` (closed afterwards unless it is the policy)."""
    sampling = SamplingParams(temperature=config.temperature, top_p=config.top_p, max_tokens=config.max_tokens,
                              seed=config.seed * 1_000_003 + step)  # fmt: skip
    agent = Agent(model, AgentConfig(dialect=config.dialect, sampling=sampling, max_turns=config.max_turns))
    try:
        return await collect(tasks, agent, group_size=config.group_size, wanted=config.prompts,
                             dynamic=config.algo != "grpo", concurrency=config.concurrency)  # fmt: skip
    finally:
        if model is not policy:
            await model.aclose()


def write_rollouts(path: Path, collected: Collected, rewards: Sequence[Sequence[float]]) -> None:
    """Every run of the step (dropped groups' too), one JSON record a line: its group, its reward, its length in
    agent tokens, then the run and its outcome."""
    rows = [
        json.dumps({"group": index, "reward": value, "length": run.length} | run.model_dump(mode="json"))
        for index, (group, values) in enumerate(zip(collected.groups, rewards, strict=True))
        for run, value in zip(group, values, strict=True)
    ]
    write_atomic(path, "".join(row + "\n" for row in rows))


def _engine(config: RLConfig, out: Path) -> RolloutModel:
    """The sampler ``config.engine`` names: the policy itself, or llama.cpp running its adapter of this step."""
    gguf_base = resolve_spec(config.model).kind in (ModelKind.EMBEDDED, ModelKind.GGUF)
    if config.engine == "transformers" or (config.engine == "auto" and not gguf_base):
        return lambda policy, _step: policy
    if not gguf_base:
        raise ConfigError(f"the llamacpp engine runs GGUF bases (embedded:, gguf:), not {config.model}")
    folder = out / "rollout-adapter"

    def llama_cpp(policy: Any, _step: int) -> ChatModel:
        save_weights(policy.model, policy.tokenizer, folder, base=config.model)  # the adapter of this step
        return load_model(config.model, adapter=str(folder), parallel=config.concurrency)

    return llama_cpp


def reward(run: Scored, config: RLConfig, step: int, hrm: TrajectoryScorer | None = None) -> float:
    """Eq. 8 of the run, plus ``hrm_weight`` times the reward model's score of it when there is one; with
    ``structure``, this semantic reward is blended with the tag reward of the agent's turns by the curriculum."""
    semantic = datamind_reward(correct=run.correct, well_formed=run.well_formed, length=run.length,
                               l_min=config.l_min, l_max=config.l_max)  # fmt: skip
    if hrm is not None:
        semantic += config.hrm_weight * hrm.score(run.trajectory)
    if not config.structure:
        return semantic
    structural = tag_reward("".join(turn.text for turn in run.trajectory.turns))
    return curriculum_reward(structural, semantic, structure_weight(step, config.steps))


def rl_update(
    model: Any,
    collected: Collected,
    rewards: Sequence[Sequence[float]],
    experts: dict[str, Trajectory],
    tokenizer: ChatTokenizer,
    runtime: Runtime,
    optimizer: Any,
    *,
    config: RLConfig,
    gamma: float,
) -> dict[str, float]:
    """The step's optimizer updates over ``collected``; the figures to log (loss, clip ratios, tokens)."""
    from datalyst.train._losses import group_advantages

    torch = runtime.torch
    algo: Literal["grpo", "dapo"] = "grpo" if config.algo == "grpo" else "dapo"
    sequences: list[list[tuple[Example, float]]] = []  # per group: the runs that carry a policy loss
    for group, group_rewards in zip(collected.groups, rewards, strict=True):
        advantages = group_advantages(torch.tensor(group_rewards, dtype=torch.float32), len(group)).tolist()
        trains = config.algo == "grpo" or informative(group)
        sequences.append([
            (to_example(training_example(run.trajectory, tokenizer, failed_turns=True)), advantage)
            for run, advantage in zip(group, advantages, strict=True)
            if trains and not run.void
        ])  # fmt: skip
    with torch.no_grad(), runtime.autocast():
        old = {id(example): _logprobs(model, example, runtime) for group in sequences for example, _ in group}
    figures: dict[str, list[float]] = {"loss": [], "clip_ratio/low": [], "clip_ratio/high": [], "tokens": []}
    for part in range(config.mini_batches):
        indices = range(part, len(sequences), config.mini_batches)
        policy_runs = [(example, advantage, old[id(example)]) for i in indices for example, advantage in sequences[i]]
        tasks = [collected.groups[i][0].trajectory.task.id for i in indices]
        drawn = [experts[task] for task in tasks if task in experts] if gamma > 0 else []
        sft_runs = [to_example(training_example(trajectory, tokenizer)) for trajectory in drawn]
        if not policy_runs and not sft_runs:
            continue
        loss, stats = accumulate(model, policy_runs, sft_runs, runtime, algo=algo, gamma=gamma,
                                 epsilon=config.epsilon, epsilon_high=config.epsilon_high)  # fmt: skip
        runtime.clip_and_step(model, optimizer, config.max_grad_norm)
        figures["loss"].append(loss)
        figures["clip_ratio/low"] += stats["clip_ratio/low"]
        figures["clip_ratio/high"] += stats["clip_ratio/high"]
        figures["tokens"].append(
            sum(len(run[0].input_ids) for run in policy_runs) + sum(len(e.input_ids) for e in sft_runs)
        )
    summary = {name: sum(values) / len(values) if values else 0.0 for name, values in figures.items()}
    return summary | {"tokens": sum(figures["tokens"]), "gamma": gamma}


def accumulate(
    model: Any,
    policy_runs: Sequence[tuple[Example, float, Any]],
    sft_runs: Sequence[Example],
    runtime: Runtime,
    *,
    algo: Literal["grpo", "dapo"],
    gamma: float,
    epsilon: float,
    epsilon_high: float,
) -> tuple[float, dict[str, list[float]]]:
    """Backpropagate ``gamma * L_SFT + (1 - gamma) * L_policy`` over one mini-batch, one sequence at a time.

    ``policy_runs`` are (example, advantage, old log-probabilities of its trained tokens); ``sft_runs`` the
    expert examples. Each sequence's loss is weighted so the gradients sum to those of the batch formulas in
    ``_losses`` (``mixed_loss`` for dapo with an SFT term). Returns the loss value and each run's clip ratios.
    """
    from datalyst.train._losses import policy_loss, sft_loss

    torch = runtime.torch
    policy_tokens = sum(len(old) for _, _, old in policy_runs)
    sft_tokens = sum(example.trained_tokens for example in sft_runs)
    total = 0.0
    stats: dict[str, list[float]] = {"clip_ratio/low": [], "clip_ratio/high": []}
    for example, advantage, old in [*policy_runs, *((example, 0.0, None) for example in sft_runs)]:
        with runtime.autocast():
            logprobs = _logprobs(model, example, runtime)[None]
        if old is None:  # an expert run: the SFT term
            weight = gamma * logprobs.shape[1] / sft_tokens
            loss = sft_loss(logprobs, torch.ones_like(logprobs))
        else:
            loss, clipped = policy_loss(logprobs, old[None], torch.tensor([advantage]), torch.ones_like(logprobs),
                                        algo=algo, epsilon=epsilon, epsilon_high=epsilon_high)  # fmt: skip
            weight = (1 - gamma) * (logprobs.shape[1] / policy_tokens if algo == "dapo" else 1 / len(policy_runs))
            for name, value in clipped.items():
                stats[name].append(value)
        runtime.backward(weight * loss)
        release_memory()
        total += weight * loss.item()
    return total, stats


def rl_tasks(config: RLConfig) -> list[Task]:
    """The tasks of ``config.tasks`` whose answers a judge checks and that ``config.exclude`` does not hold out."""
    held_out = {line.split("#")[0] for path in config.exclude for line in Path(path).read_text().split()}
    tasks = [task for path in config.tasks for task in read_tasks(path)]
    usable = [task for task in tasks if task.checkable() and task.id not in held_out]
    if not usable:
        raise ConfigError(f"none of the {len(tasks)} tasks has a verified answer outside the excluded ones")
    return usable


def expert_trajectories(run: str | None) -> dict[str, Trajectory]:
    """The first kept trajectory of each task in curation run ``run``, by task id (tokenized when drawn)."""
    if run is None:
        raise ConfigError("dapo+sft needs expert trajectories for its SFT term; give a curation run with --expert")
    experts: dict[str, Trajectory] = {}
    for record in read_curated(RunFolder(Path(run))):
        experts.setdefault(record.trajectory.task.id, record.trajectory)
    return experts


def _logprobs(model: Any, example: Example, runtime: Runtime) -> Any:
    return token_logprobs(model, *collate([example], pad_id=0, torch=runtime.torch))  # one row: no padding


def _rollout_figures(collected: Collected, rewards: Sequence[Sequence[float]]) -> dict[str, float]:
    runs = [run for group in collected.groups for run in group]
    flat = [value for group in rewards for value in group]
    return {
        "reward/mean": sum(flat) / len(flat),
        "correct/mean": sum(run.correct for run in runs) / len(runs),
        "void/share": sum(run.void for run in runs) / len(runs),
        "groups/dropped": collected.dropped / len(collected.groups),
        "tasks/drawn": float(collected.tasks_drawn),
    }
