"""``curate filter``: from judged trajectories to the ones kept for training, and why every other one went.

The stages, in order, each seeing only what the one before kept:

1. ``select``: the selection strategy over the judge's verdicts (``curate._select``);
2. one stage per rule check (format, answer length, language, repetition, decontamination...);
3. ``dedup``: exact and near-duplicate trajectories (the first one written is kept);
4. ``overthinking``: optionally, a ceiling on the overthinking score, then a sample of ``keep``
   trajectories, 90% from the most concise and 10% from deeper explorations (Datarus);
5. ``mix``: optionally, the largest subset whose strata follow a target mix.

Everything kept gets its stratum and overthinking score (``Curated``); everything dropped gets one
line in ``dropped.jsonl`` with its stage and reason. The funnel goes into the manifest. The stage
reads only the run's files and rewrites its outputs whole, so running it again with other options
decides again from the same verdicts.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Sequence

from pydantic import BaseModel, ConfigDict, Field, field_validator
from rich.console import Console
from rich.progress import track

from datalyst.curate._dedup import deduplicate
from datalyst.curate._filters import AnswerLengthCheck, FormatCheck, RepetitionCheck
from datalyst.curate._judge import read_group_verdicts
from datalyst.curate._language import LanguageCheck
from datalyst.curate._overthinking import overthinking_score, sample_by_overthinking
from datalyst.curate._records import Check, Curated, Stratum
from datalyst.curate._run import RunFolder
from datalyst.curate._select import Dropped, Selected, Strategy, select
from datalyst.curate._strata import DATARUS_MIX, mix_strata, stratum
from datalyst.files import write_atomic
from datalyst.provenance import write_manifest


class FilterOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    strategy: Strategy = Strategy.NON_SELECT
    """Which judged trajectories go on (DataMind's ablation found non-select best). ``con-select`` was its
    original."""
    seed: int = 0
    """Seed of random choices."""
    dedup_threshold: float = Field(0.8, gt=0, lt=1)
    """Similarity at which a trajectory repeats a kept one (estimated Jaccard similarity of code and thoughts)."""
    max_overthinking: float | None = Field(None, ge=0)
    """Drop trajectories scoring above this."""
    keep: int | None = Field(None, ge=0)
    """Keep this many, 90% the most concise and 10% deeper explorations (None keeps all)."""
    mix: dict[Stratum, float] | None = Field(None, json_schema_extra={"text": True})
    """Target strata shares: 'datarus' (40/35/15/10) or e.g. 'success=0.5,error_correction=0.5'."""

    @field_validator("mix", mode="before")
    @classmethod
    def _written_shares(cls, value: object) -> object:
        """``datarus``, or ``name=share`` pairs separated by commas, as the shares of the strata."""
        if value == "datarus":
            return dict(DATARUS_MIX)
        if isinstance(value, str):
            pairs = [part.partition("=") for part in value.split(",")]
            if any(not sep for _, sep, _ in pairs):
                raise ValueError(f"write 'datarus' or name=share pairs, not {value!r}")
            return {name.strip(): share for name, _, share in pairs}
        return value


class StageCount(BaseModel):
    stage: str
    kept: int
    dropped: dict[str, int]


class FilterSummary(BaseModel):
    trajectories: int
    kept: int
    funnel: list[StageCount]
    by_stratum: dict[str, int]
    by_selection: dict[str, int]


def rule_checks(count_tokens: Callable[[str], int]) -> list[Check]:
    """DataMind's rule filters (format, answer length, language) and the repetition check, in that order."""
    return [FormatCheck(), AnswerLengthCheck(count_tokens), LanguageCheck(), RepetitionCheck()]


def filter_run(
    run: RunFolder, checks: Sequence[Check], options: FilterOptions | None = None, *, progress: bool = True
) -> FilterSummary:
    """Write ``kept.jsonl`` and ``dropped.jsonl`` of ``run``; returns the funnel."""
    options = options or FilterOptions()
    trajectories = run.trajectories()
    selected, dropped = select(trajectories, read_group_verdicts(run), options.strategy, seed=options.seed)
    funnel = [_count("select", selected, dropped)]
    expert = run.config().source == "expert"
    console = Console(stderr=True)
    for check in checks:
        survivors = []
        before = len(dropped)
        for item in track(selected, description=check.name, console=console, disable=not progress, transient=True):
            verdict = check.check(item.trajectory)
            if verdict.kept:
                survivors.append(item)
            else:
                dropped.append(Dropped(id=item.trajectory.id, stage=check.name, reason=verdict.reason or "",
                                       detail=verdict.detail))  # fmt: skip
        selected = survivors
        funnel.append(_count(check.name, selected, dropped[before:]))
    before = len(dropped)
    duplicates = deduplicate(
        [item.trajectory for item in selected], threshold=options.dedup_threshold, seed=options.seed
    )
    dropped += [
        Dropped(id=tid, stage="dedup", reason=dup.reason, detail=dup.verdict.detail) for tid, dup in duplicates.items()
    ]
    selected = [item for item in selected if item.trajectory.id not in duplicates]
    funnel.append(_count("dedup", selected, dropped[before:]))
    kept = [_curated(item, expert) for item in selected]
    before = len(dropped)
    kept = _by_overthinking(kept, options, dropped)
    if options.max_overthinking is not None or options.keep is not None:
        funnel.append(_count("overthinking", kept, dropped[before:]))
    if options.mix:
        before = len(dropped)
        mixed = mix_strata(kept, [c.stratum for c in kept], options.mix, rng=random.Random(options.seed))
        chosen = {c.id for c in mixed}
        dropped += [
            Dropped(id=c.id, stage="mix", reason="over_share", detail=c.stratum) for c in kept if c.id not in chosen
        ]
        kept = mixed
        funnel.append(_count("mix", kept, dropped[before:]))
    write_atomic(run.kept, "".join(c.model_dump_json() + "\n" for c in kept))
    write_atomic(run.dropped, "".join(d.model_dump_json() + "\n" for d in dropped))
    summary = FilterSummary(
        trajectories=len(trajectories),
        kept=len(kept),
        funnel=funnel,
        by_stratum=dict(sorted(Counter(c.stratum.value for c in kept).items())),
        by_selection=dict(sorted(Counter(c.selected_by for c in kept).items())),
    )
    write_manifest(run.kept, options=options.model_dump(mode="json"), checks=[c.name for c in checks],
                   summary=summary.model_dump())  # fmt: skip
    return summary


def _curated(item: Selected, expert: bool) -> Curated:
    return Curated(
        id=item.trajectory.id,
        trajectory=item.trajectory,
        selected_by="expert" if expert and item.selected_by != "unfiltered" else item.selected_by,
        stratum=stratum(item.trajectory, item.correct),
        overthinking=overthinking_score(item.trajectory).total,
    )


def _by_overthinking(kept: list[Curated], options: FilterOptions, dropped: list[Dropped]) -> list[Curated]:
    """The trajectories under the score ceiling, then ``keep`` of them sampled 90/10 by score."""
    if options.max_overthinking is None and options.keep is None:
        return kept
    scores = [c.overthinking for c in kept]
    k = len(kept) if options.keep is None else options.keep
    chosen = sample_by_overthinking(
        kept, scores, k, rng=random.Random(options.seed), max_score=options.max_overthinking
    )
    ids = {c.id for c in chosen}
    for c in kept:
        if c.id not in ids:
            over = options.max_overthinking is not None and c.overthinking > options.max_overthinking
            reason = "overthinking" if over else "not_sampled"
            dropped.append(Dropped(id=c.id, stage="overthinking", reason=reason, detail=f"{c.overthinking:.3f}"))
    return chosen


def _count(stage: str, kept: Sequence[object], dropped: Sequence[Dropped]) -> StageCount:
    return StageCount(stage=stage, kept=len(kept), dropped=dict(Counter(d.reason for d in dropped)))
