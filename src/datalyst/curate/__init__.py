"""Curation: from tasks to trajectories worth training on (sampling, judges, reflection, filters, strata, exports).

A run folder holds one curation: ``curate sample`` (or ``curate expert``) writes its trajectories,
``curate judge`` its verdicts, ``curate filter`` what is kept and why the rest was dropped, and
``curate export`` the files trainers read.
"""

from datalyst.curate._consistency import (
    Agreement,
    Attempt,
    ConsistencyJudge,
    LLMConsistency,
    RuleConsistency,
    answers_agree,
)
from datalyst.curate._guidance import Guide, refine_workflow, reflection_text, workflow_text
from datalyst.curate._judge import GroupVerdict, JudgeSummary, judge_group, judge_run, read_verdicts
from datalyst.curate._records import KEEP, Check, Curated, Stratum, Verdict
from datalyst.curate._run import RunConfig, RunFolder
from datalyst.curate._sample import sample, sampling_agent
from datalyst.curate._select import Dropped, Selected, Strategy, select, with_agreed_answer

__all__ = [
    "KEEP",
    "Agreement",
    "Attempt",
    "Check",
    "ConsistencyJudge",
    "Curated",
    "Dropped",
    "GroupVerdict",
    "Guide",
    "JudgeSummary",
    "LLMConsistency",
    "RuleConsistency",
    "RunConfig",
    "RunFolder",
    "Selected",
    "Strategy",
    "Stratum",
    "Verdict",
    "answers_agree",
    "judge_group",
    "judge_run",
    "read_verdicts",
    "refine_workflow",
    "reflection_text",
    "sample",
    "sampling_agent",
    "select",
    "with_agreed_answer",
    "workflow_text",
]
