"""Follow-up tasks: another question on the same files asked first in the same conversation."""

from __future__ import annotations

from datalyst.synth import make_follow_ups
from datalyst.tasks import Asked, Lineage, Task


def task(id: str, files: list[str], category: str, parents: list[str] | None = None) -> Task:
    lineage = Lineage(generator="g", version=1, seed=0, parents=parents or [], source_hash=f"hash-{files[0]}")
    return Task(id=id, question=f"Question {id}?", format=f"@{id}[value]", files=files, answer={id: "1"},
                judge="dabench", category=category, lineage=lineage)  # fmt: skip


def test_a_follow_up_asks_another_question_on_the_same_files_first_and_keeps_its_own_answer():
    tasks = [task("a", ["x.csv"], "Ranking"), task("b", ["x.csv"], "Ranking"), task("c", ["x.csv"], "Counting"),
             task("alone", ["y.csv"], "Counting")]  # fmt: skip
    made = make_follow_ups(tasks, per_files=2, seed=0)
    assert len(made) == 2 and len({t.id for t in made}) == 2
    by_id = {t.id: t for t in tasks}
    for follow_up in made:
        (asked,) = follow_up.earlier
        then_id, first_id = follow_up.id.split(".after.")
        first, then = by_id[first_id], by_id[then_id]
        assert first is not then and first.files == then.files == follow_up.files
        assert asked == Asked(question=first.question, format=first.format)
        assert (follow_up.question, follow_up.answer, follow_up.category) == (then.question, then.answer, then.category)
        assert follow_up.lineage.generator == "follow_up" and follow_up.lineage.parents == [first.id, then.id]
        assert follow_up.lineage.source_hash == "hash-x.csv"
        if then.category == "Ranking":  # another category is asked first where there is one
            assert first.category == "Counting"
    assert len({t.id.split(".after.")[0] for t in made}) == 2  # no question is asked last twice
    assert make_follow_ups(tasks, per_files=2, seed=0) == made  # seeded


def test_a_composed_question_follows_the_shorter_question_it_was_built_from():
    tasks = [task("easy", ["x.csv"], "Multi-hop"), task("other", ["x.csv"], "Ranking"),
             task("hard", ["x.csv"], "Multi-hop", parents=["easy", "missing"])]  # fmt: skip
    for seed in range(5):
        made = make_follow_ups(tasks, per_files=1, seed=seed)
        assert [t.id for t in made] == ["hard.after.easy"]


def test_files_with_a_single_question_and_tasks_that_are_follow_ups_already_make_none():
    single = task("a", ["x.csv"], "Ranking")
    already = task("b", ["x.csv"], "Ranking").model_copy(update={"earlier": [Asked(question="Q?")]})
    assert make_follow_ups([single, already]) == []
