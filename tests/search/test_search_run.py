import asyncio

import pytest
from script_helpers import ScriptModel
from tree_helpers import hand_built

from datalyst.agent import Agent, AgentConfig
from datalyst.errors import ConfigError
from datalyst.search import MCTSConfig, Tree, answer_paths, search_tasks, tree_path, tree_trajectory
from datalyst.tasks import Task

CONFIG = MCTSConfig(simulations=3, expansions=2)


@pytest.fixture
def tasks():
    return [Task(id=f"t/{i}", question="What is x?", judge="dabench", answer={"x": "20"}) for i in range(2)]


def run(tasks, out, model, config=CONFIG, trials=1):
    agent = Agent(model, AgentConfig(dialect="jupiter"))
    return asyncio.run(search_tasks(tasks, agent, out, config, trials=trials, judged=True, progress=False))


def test_every_task_and_trial_gets_a_saved_tree_and_a_second_run_skips_them(tasks, tmp_path):
    trees = run(tasks, tmp_path, ScriptModel(), trials=2)
    assert [tree.root.id for tree in trees] == ["t/0#0", "t/0#1", "t/1#0", "t/1#1"]
    assert all(tree.finished and tree.simulations == 3 for tree in trees)
    assert Tree.load(tree_path(tmp_path, tasks[1], 1)) == trees[3]
    again = ScriptModel()
    assert run(tasks, tmp_path, again, trials=2) == trees and again.calls == 0


def test_an_interrupted_search_goes_on_from_its_last_simulation(tasks, tmp_path):
    with pytest.raises(RuntimeError, match="went away"):
        run(tasks[:1], tmp_path, ScriptModel(fail_after=2))
    stopped = Tree.load(tree_path(tmp_path, tasks[0], 0))
    assert stopped.simulations == 2 and not stopped.finished
    model = ScriptModel()
    [tree] = run(tasks[:1], tmp_path, model)
    assert tree.finished and tree.simulations == 3 and model.calls == 1
    assert tree.nodes[: len(stopped.nodes)] != [] and tree.nodes[1].turn == stopped.nodes[1].turn


def test_a_tree_saved_with_other_settings_is_refused(tasks, tmp_path):
    run(tasks[:1], tmp_path, ScriptModel())
    with pytest.raises(ConfigError, match="other settings"):
        run(tasks[:1], tmp_path, ScriptModel(), config=MCTSConfig(simulations=5, expansions=2))


def test_a_search_answers_with_the_vote_along_the_best_path_to_it():
    tree = hand_built()  # two answers that disagree: the tie goes to the higher valued, node 3
    trajectory = tree_trajectory(tree)
    assert trajectory.answer == "@mean[3.2] @max[9]"
    assert [turn.text for turn in trajectory.turns] == ["Action: a", "Answer: @mean[3.2] @max[9]"]


def test_a_search_without_answers_gives_the_path_to_its_best_state():
    tree = hand_built()
    tree.nodes = [node.model_copy(update={"ending": None}) if node.answer else node for node in tree.nodes]
    trajectory = tree_trajectory(tree)
    assert trajectory.answer is None and trajectory.turns[-1].text == "Answer: @mean[3.2] @max[9]"


def test_every_answered_path_is_a_trajectory_numbered_by_its_tree_and_node():
    tree = hand_built()
    tree.root = tree.root.model_copy(update={"id": "t1#2", "trial": 2})
    paths = answer_paths(tree)
    assert [(path.id, path.trial, path.answer) for path in paths] == [
        ("t1#2003", 2003, "@mean[3.2] @max[9]"), ("t1#2005", 2005, "@mean[3.2] @max[7]")]  # fmt: skip
    assert [turn.text for turn in paths[1].turns] == ["Action: b", "Answer: @mean[3.2] @max[7]"]
    assert all(path.termination == "answer" for path in paths)
