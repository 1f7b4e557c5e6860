"""``curate sequences``: CodeSeq's self-correction chains on programming problems, kept as training data.

A working model writes a program for a problem (the ``program`` dialect); the problem's hidden test cases
run it in the sandbox, one fresh sandbox per case. When a case fails, a guiding model explains why from that
case, and the failing case and the explanation go back to the working model, which writes the program again;
at most ``rounds`` corrections. Each chain is one trajectory: every program is a turn whose ``result`` holds its
test run (a failed run makes it a failed turn, so exports keep it in the context without training on it,
unless asked), and every feedback message is that turn's observation. Chains that end in a passing program
are kept for export, as the stratum they fall in (first try: ``success``; after corrections:
``error_correction``).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from datalyst.agent import PROGRAM, ActionKind, Agent, AgentConfig, AgentState, Termination, Trajectory, rollout
from datalyst.curate._overthinking import overthinking_score
from datalyst.curate._records import Curated
from datalyst.curate._run import RunConfig, RunFolder
from datalyst.curate._strata import stratum
from datalyst.files import write_atomic
from datalyst.judge import ProgramRun, arun_cases, cases_result, first_failing, program_text
from datalyst.llm import ChatMessage, ChatModel, Completion, Role, SamplingParams
from datalyst.provenance import write_manifest
from datalyst.tasks import Case, Task

WORKER_SAMPLING = SamplingParams(temperature=0.6, top_p=0.95, max_tokens=768, seed=0)
GUIDE_SAMPLING = SamplingParams(temperature=0.0, max_tokens=256)
SHOWN_OUTPUT_CHARS = 300


class CorrectionOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    rounds: int = Field(3, ge=0)
    """Corrections a chain may make after its first program (CodeSeq's chains average about 3)."""
    sampling: SamplingParams = WORKER_SAMPLING


class CorrectingAgent(Agent):
    """The ``program`` dialect's agent with the correction loop: a program that fails a case gets the case and
    the guide's explanation back instead of ending the trajectory, until it passes or ``rounds`` run out."""

    def __init__(self, model: ChatModel, guide: ChatModel, options: CorrectionOptions | None = None,
                 *, require_isolation: bool = True) -> None:  # fmt: skip
        options = options or CorrectionOptions()
        programs = options.rounds + 1
        config = AgentConfig(dialect=PROGRAM, sampling=options.sampling, max_turns=2 * programs,
                             require_isolation=require_isolation)  # fmt: skip
        super().__init__(model, config)
        self.guide = guide
        self.options = options

    async def advance(
        self, state: AgentState, completion: Completion, *, generation_s: float = 0.0, redraws: int = 0
    ) -> AgentState:
        state = await super().advance(state, completion, generation_s=generation_s, redraws=redraws)
        turn = state.turns[-1]
        if turn.kind != ActionKind.ANSWER:
            return state
        task = state.trajectory.task
        program = program_text(turn.answer or "")
        started = time.monotonic()
        runs = await arun_cases(program, task.tests, require_isolation=self.config.require_isolation)
        turn.execution_s = time.monotonic() - started
        failing = first_failing(task.tests, runs)
        turn.result = cases_result(task.tests, runs)
        programs = sum(t.kind == ActionKind.ANSWER for t in state.turns)
        if failing is None or programs > self.options.rounds:
            return state
        turn.observation = feedback(*failing, await explain_failure(self.guide, task, program, *failing))
        message = ChatMessage(role=Role.USER, content=self.dialect.observation(turn.observation))
        trajectory = state.trajectory.model_copy(update={"answer": None, "termination": Termination.MAX_TURNS})
        return dataclasses.replace(state, trajectory=trajectory, messages=(*state.messages, message), done=False)


def _what_happened(case: Case, run: ProgramRun) -> str:
    if run.result == "wrong output":
        return f"Your program printed: {run.stdout.strip()[:SHOWN_OUTPUT_CHARS]}"
    if run.result == "timed out":
        return "Your program did not finish within the time limit."
    return f"Your program stopped with an error: {run.result.removeprefix('failed: ')}"


async def explain_failure(guide: ChatModel, task: Task, program: str, case: Case, run: ProgramRun) -> str:
    """The guide's short account of why ``program`` fails ``case`` (it writes no code)."""
    request = (
        f"A programming problem:\n\n{task.question}\n\nA program written for it:\n```python\n{program}```\n\n"
        f"On the input {case.input.strip()!r} the expected output is {case.output!r}. "
        f"{_what_happened(case, run)}\n\n"
        "Explain in at most three sentences why the program goes wrong on this input: name the idea or the line "
        "at fault. Do not write a corrected program."
    )
    [reply] = await guide.agenerate([ChatMessage(role=Role.USER, content=request)], GUIDE_SAMPLING)
    return " ".join(reply.text.split())


def feedback(case: Case, run: ProgramRun, why: str) -> str:
    """What the working model reads after a failing program."""
    return (
        f"Your program fails a test case.\nInput: {case.input.strip()}\nExpected output: {case.output}\n"
        f"{_what_happened(case, run)}\nWhy: {why}\n\nWrite the corrected program in one ```python block."
    )


class ChainSummary(BaseModel):
    """What the chains of a run did (CodeSeq's table: first-try rate, rate after corrections, mean rounds)."""

    chains: int
    first_try: int
    """Chains whose first program passed every case."""
    passed: int
    """Chains that ended with a passing program, after any number of corrections."""
    mean_rounds: float
    """Corrections before the passing program, over the chains that passed."""
    by_rounds: dict[int, int]
    """Passing chains by the corrections they took."""
    failed: int
    """Trajectories that broke (our failure, not the model's: a model server down); run again to retry them."""


def chain_passed(trajectory: Trajectory) -> bool:
    """The chain's last program passed every case."""
    programs = [turn for turn in trajectory.turns if turn.kind == ActionKind.ANSWER]
    return bool(programs) and programs[-1].result is not None and programs[-1].result.ok


def corrections(trajectory: Trajectory) -> int:
    """Programs the chain wrote after its first."""
    return max(sum(turn.kind == ActionKind.ANSWER for turn in trajectory.turns) - 1, 0)


def summarize_chains(trajectories: Sequence[Trajectory]) -> ChainSummary:
    chains = [t for t in trajectories if t.termination != Termination.FAILED]
    passed = [t for t in chains if chain_passed(t)]
    rounds = [corrections(t) for t in passed]
    return ChainSummary(
        chains=len(chains),
        first_try=sum(r == 0 for r in rounds),
        passed=len(passed),
        mean_rounds=sum(rounds) / len(rounds) if rounds else 0.0,
        by_rounds={r: rounds.count(r) for r in sorted(set(rounds))},
        failed=len(trajectories) - len(chains),
    )


async def correct_programs(
    tasks: Sequence[Task],
    task_files: Sequence[str],
    folder: RunFolder,
    model: ChatModel,
    guide: ChatModel,
    *,
    options: CorrectionOptions | None = None,
    concurrency: int = 2,
    require_isolation: bool = True,
    progress: bool = True,
) -> ChainSummary:
    """A chain for every task into ``folder`` (resumable), the passing chains kept for ``curate export``."""
    options = options or CorrectionOptions()
    agent = CorrectingAgent(model, guide, options, require_isolation=require_isolation)
    folder.start(RunConfig(source="corrections", tasks=list(task_files), model=model.spec, agent=agent.config,
                           guide=guide.spec, rounds=options.rounds))  # fmt: skip
    await rollout(tasks, agent, folder.samples, concurrency=concurrency, progress=progress)
    trajectories = folder.trajectories()
    kept = [Curated(id=t.id, trajectory=t, selected_by="tests", stratum=stratum(t, True),
                    overthinking=overthinking_score(t).total) for t in trajectories if chain_passed(t)]  # fmt: skip
    write_atomic(folder.kept, "".join(record.model_dump_json() + "\n" for record in kept))
    summary = summarize_chains(trajectories)
    write_manifest(folder.kept, stage="corrections", guide=guide.spec, rounds=options.rounds,
                   summary=summary.model_dump())  # fmt: skip
    return summary
