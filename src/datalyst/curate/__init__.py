"""Curation: from tasks to trajectories worth training on (sampling, judges, reflection, filters, strata, exports).

A run folder holds one curation: ``curate sample`` (or ``curate expert``) writes its trajectories,
``curate judge`` its verdicts, ``curate filter`` what is kept and why the rest was dropped, and
``curate export`` the files trainers read.
"""

from datalyst.curate._consistency import (
    ConsistencyJudge,
    LLMConsistency,
    RuleConsistency,
)
from datalyst.curate._corrections import (
    ChainSummary,
    CorrectionOptions,
    correct_programs,
)
from datalyst.curate._decontaminate import Decontaminator
from datalyst.curate._expert import EXPERT_SPEC, ExpertAgent, ExpertOptions, expert_tasks
from datalyst.curate._exports import (
    export_examples,
    export_notebooks,
    export_sharegpt,
    export_trl,
    export_verl,
)
from datalyst.curate._filter import FilterOptions, filter_run, rule_checks
from datalyst.curate._guidance import Guide
from datalyst.curate._judge import (
    GroupVerdict,
    JudgeSummary,
    judge_group,
    judge_run,
    read_group_verdicts,
    tasks_in_band,
)
from datalyst.curate._language import LanguageCheck
from datalyst.curate._overthinking import overthinking_score
from datalyst.curate._records import KEEP, Curated, Decision, Stratum
from datalyst.curate._refine import category_pass_rates, refine_run
from datalyst.curate._report import curation_report, read_curated, render_curation, write_report
from datalyst.curate._run import RunConfig, RunFolder
from datalyst.curate._sample import sample
from datalyst.curate._select import Strategy, select, with_agreed_answer
from datalyst.curate._strata import DATARUS_MIX, mix_strata, stratum

__all__ = [
    "DATARUS_MIX",
    "EXPERT_SPEC",
    "KEEP",
    "ChainSummary",
    "ConsistencyJudge",
    "CorrectionOptions",
    "Curated",
    "Decision",
    "Decontaminator",
    "ExpertAgent",
    "ExpertOptions",
    "FilterOptions",
    "GroupVerdict",
    "Guide",
    "JudgeSummary",
    "LLMConsistency",
    "LanguageCheck",
    "RuleConsistency",
    "RunConfig",
    "RunFolder",
    "Strategy",
    "Stratum",
    "category_pass_rates",
    "correct_programs",
    "curation_report",
    "expert_tasks",
    "export_examples",
    "export_notebooks",
    "export_sharegpt",
    "export_trl",
    "export_verl",
    "filter_run",
    "judge_group",
    "judge_run",
    "mix_strata",
    "overthinking_score",
    "read_curated",
    "read_group_verdicts",
    "refine_run",
    "render_curation",
    "rule_checks",
    "sample",
    "select",
    "stratum",
    "tasks_in_band",
    "with_agreed_answer",
    "write_report",
]
