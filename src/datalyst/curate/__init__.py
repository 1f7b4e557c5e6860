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
)
from datalyst.curate._corrections import (
    WORKER_SAMPLING,
    ChainSummary,
    CorrectingAgent,
    CorrectionOptions,
    correct_programs,
    summarize_chains,
)
from datalyst.curate._decontaminate import BENCHMARK_QUESTION, BENCHMARK_TABLE, Decontaminator
from datalyst.curate._dedup import Duplicate, deduplicate
from datalyst.curate._expert import EXPERT_SPEC, ExpertAgent, ExpertOptions, expert_tasks
from datalyst.curate._exports import (
    Exported,
    export_examples,
    export_notebooks,
    export_sharegpt,
    export_trl,
    export_verl,
)
from datalyst.curate._filter import FilterOptions, FilterSummary, StageCount, filter_run, rule_checks
from datalyst.curate._filters import AnswerLengthCheck, FormatCheck, RepetitionCheck
from datalyst.curate._guidance import Guide, refine_workflow, reflection_text, workflow_text
from datalyst.curate._judge import (
    GroupVerdict,
    JudgeSummary,
    judge_group,
    judge_run,
    read_group_verdicts,
    tasks_in_band,
)
from datalyst.curate._language import LanguageCheck
from datalyst.curate._mistakes import MISTAKES
from datalyst.curate._overthinking import OVERTHINKING_VERSION, Overthinking, overthinking_score, sample_by_overthinking
from datalyst.curate._records import KEEP, Check, Curated, Decision, Stratum
from datalyst.curate._refine import CategoryRate, category_pass_rates, refine_run
from datalyst.curate._report import CurationReport, curation_report, read_curated, render_curation, write_report
from datalyst.curate._run import RunConfig, RunFolder
from datalyst.curate._sample import sample, sampling_agent
from datalyst.curate._select import Dropped, Selected, Strategy, select, with_agreed_answer
from datalyst.curate._solution import split_solution
from datalyst.curate._strata import DATARUS_MIX, mix_strata, stratum

__all__ = [
    "BENCHMARK_QUESTION",
    "BENCHMARK_TABLE",
    "DATARUS_MIX",
    "EXPERT_SPEC",
    "KEEP",
    "MISTAKES",
    "OVERTHINKING_VERSION",
    "WORKER_SAMPLING",
    "Agreement",
    "AnswerLengthCheck",
    "Attempt",
    "CategoryRate",
    "ChainSummary",
    "Check",
    "ConsistencyJudge",
    "CorrectingAgent",
    "CorrectionOptions",
    "Curated",
    "CurationReport",
    "Decision",
    "Decontaminator",
    "Dropped",
    "Duplicate",
    "ExpertAgent",
    "ExpertOptions",
    "Exported",
    "FilterOptions",
    "FilterSummary",
    "FormatCheck",
    "GroupVerdict",
    "Guide",
    "JudgeSummary",
    "LLMConsistency",
    "LanguageCheck",
    "Overthinking",
    "RepetitionCheck",
    "RuleConsistency",
    "RunConfig",
    "RunFolder",
    "Selected",
    "StageCount",
    "Strategy",
    "Stratum",
    "category_pass_rates",
    "correct_programs",
    "curation_report",
    "deduplicate",
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
    "refine_workflow",
    "reflection_text",
    "render_curation",
    "rule_checks",
    "sample",
    "sample_by_overthinking",
    "sampling_agent",
    "select",
    "split_solution",
    "stratum",
    "summarize_chains",
    "tasks_in_band",
    "with_agreed_answer",
    "workflow_text",
    "write_report",
]
