"""Follow-up questions: two questions about the same files asked one after the other in one conversation.

An analyst rarely asks one question and leaves; the second question finds the data already loaded and earlier
variables in place, and asks for a new answer in its own format. A follow-up task is a task of the input whose
``earlier`` holds another task's question on the same files: the agent answers that one first (unjudged), then
this one, judged as usual. Where a composed task and a shorter question it was built from are both there
(``lineage.parents``), the shorter one comes first, so the conversation grows from the easier question to the
harder one; otherwise the earlier question is drawn from another category where there is one.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Sequence

from datalyst.tasks import Asked, Lineage, Task

GENERATOR = "follow_up"
VERSION = 1


def make_follow_ups(tasks: Sequence[Task], *, per_files: int = 2, seed: int = 0) -> list[Task]:
    """Up to ``per_files`` follow-up tasks for each set of files two or more of ``tasks`` ask about."""
    rng = random.Random(seed)
    groups: dict[tuple[str, ...], list[Task]] = defaultdict(list)
    for task in tasks:
        if not task.earlier:
            groups[tuple(task.files)].append(task)
    follow_ups = []
    for group in groups.values():
        if len(group) >= 2:
            follow_ups += [_follow_up(first, then, seed) for first, then in _pairs(group, per_files, rng)]
    return follow_ups


def _pairs(group: list[Task], count: int, rng: random.Random) -> list[tuple[Task, Task]]:
    """``count`` (earlier, then) pairs of distinct tasks, no task asked last twice: composed tasks after a question
    they were built from first, then each remaining task after one drawn from another category where possible."""
    by_id = {task.id: task for task in group}
    order = rng.sample(group, len(group))
    pairs: list[tuple[Task, Task]] = []
    for then in order:
        parents = [by_id[p] for p in (then.lineage.parents if then.lineage else []) if p in by_id]
        if parents:
            pairs.append((rng.choice(parents), then))
    for then in order:
        if len(pairs) >= count:
            break
        if any(then is last for _, last in pairs):
            continue
        others = [task for task in group if task is not then]
        elsewhere = [task for task in others if task.category != then.category]
        pairs.append((rng.choice(elsewhere or others), then))
    return pairs[:count]


def _follow_up(first: Task, then: Task, seed: int) -> Task:
    asked = Asked(question=first.question, constraints=first.constraints, format=first.format)
    lineage = Lineage(
        generator=GENERATOR,
        version=VERSION,
        seed=seed,
        parents=[first.id, then.id],
        source_hash=then.lineage.source_hash if then.lineage else None,
        verified=then.lineage.verified if then.lineage else None,
    )
    return then.model_copy(update={"id": f"{then.id}.after.{first.id}", "earlier": [asked], "lineage": lineage})
