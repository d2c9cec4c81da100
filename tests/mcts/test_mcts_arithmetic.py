"""UCT, step reward and return arithmetic against values computed by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from momoka.mcts import MCTS


def test_step_reward_eq4_by_hand():
    # root 0 (p=0, s=0), cand 1 (p=1, s=3), I=1:
    # r = 1 + 3/(1+1) + 2/(3+1) = 3.0 ; r_max = 1 + 3/1 + 2/1 = 6 -> 0.5
    e = MCTS(2, paragraph=[0, 1], sentence=[0, 3])
    assert e.r_max == 6.0
    assert e.step_reward(0, 1, 1.0) == pytest.approx(0.5)
    assert e.step_reward(1, 0, 0.0) == pytest.approx(2.0 / 6.0)
    # unnormalised, other weights: 0 + 1/(1+0.5) + 4/(3+2)
    e = MCTS(2, paragraph=[0, 1], sentence=[0, 3], alpha=1, beta=4, gamma=0.5, delta=2, normalize=False)
    assert e.step_reward(0, 1, 0.0) == pytest.approx(1 / 1.5 + 4 / 5)


def test_single_iteration_backs_up_the_step_reward():
    e = MCTS(2, roots=[0], paragraph=[0, 1], sentence=[0, 3], iterations=1, rollout_len=1)
    e.run_native(np.array([[0, 1], [0, 0]], float))
    t = e.tree(0)
    assert t["item"].tolist() == [0, 1]
    assert t["visits"].tolist() == [1, 1]
    assert t["value"].tolist() == pytest.approx([0.5, 0.5])


@pytest.mark.parametrize("ret, expected", [("mean", 43 / 72), ("sum", 43 / 36)])
def test_rollout_return_by_hand(ret, expected):
    # n=3, root 0, para [0,0,1], sent [0,1,2], I[0,1]=1, I[0,2]=0.
    # r(1) = (1 + 3/1 + 2/2)/6 = 5/6 ; r(2) = (0 + 3/2 + 2/3)/6 = 13/36
    # one rollout of length 3 visits both, in either order: mean 43/72, sum 43/36
    I = np.zeros((3, 3))
    I[0, 1] = 1
    e = MCTS(3, roots=[0], paragraph=[0, 0, 1], sentence=[0, 1, 2], iterations=1, rollout_len=3,
             rollout_return=ret)
    e.run_native(I)
    assert e.tree(0)["value"][0] == pytest.approx(expected)


def test_rollout_return_last_is_the_final_step():
    I = np.zeros((3, 3))
    I[0, 1] = 1
    e = MCTS(3, roots=[0], iterations=1, rollout_len=3, rollout_return="last")
    e.run_native(I)
    child = int(e.tree(0)["item"][1])
    last = 3 - child  # the rollout goes child -> the other item
    assert e.tree(0)["value"][0] == pytest.approx(I[0, last])


def _three_items(c, iterations, scope="leaf"):
    I = np.zeros((3, 3))
    I[0, 1] = 1.0  # no structural prior: step reward = I
    e = MCTS(3, roots=[0], iterations=iterations, rollout_len=1, c=c, rollout_scope=scope)
    e.run_native(I)
    t = e.tree(0)
    return {tuple(_path(t, k)): (int(t["visits"][k]), float(t["value"][k])) for k in range(len(t["item"]))}


def _path(t, k):
    out = []
    while k >= 0:
        out.append(int(t["item"][k]))
        k = int(t["parent"][k])
    return out[::-1]


def test_uct_eq3_selection_by_hand():
    # iterations 1-2 expand both root children (fully expand first): 1 gets R=1, 2 gets R=0.
    # iteration 3: UCT(1) = 1 + c*sqrt(ln 2) > UCT(2) = c*sqrt(ln 2): descend into 1, expand 2 under it (R = I[0,2] = 0).
    # iteration 4 with c=1: UCT(1) = 1/2 + sqrt(ln3/2) = 1.241 > UCT(2) = sqrt(ln 3) = 1.048 -> 1 again;
    #   node 1 is fully expanded, its only child (0,1,2) is terminal and rolls out itself (R=0).
    assert _three_items(1.0, 4) == {(0,): (4, 1.0), (0, 1): (3, 1.0), (0, 2): (1, 0.0), (0, 1, 2): (2, 0.0)}
    # with c=2: UCT(1) = 1/2 + 2*sqrt(ln3/2) = 1.982 < UCT(2) = 2*sqrt(ln 3) = 2.096 -> 2, expand 1 under it (R=1)
    assert _three_items(2.0, 4) == {(0,): (4, 2.0), (0, 1): (2, 1.0), (0, 2): (2, 1.0), (0, 1, 2): (1, 0.0),
                                    (0, 2, 1): (1, 1.0)}
    assert 0.5 + math.sqrt(math.log(3) / 2) > math.sqrt(math.log(3))
    assert 0.5 + 2 * math.sqrt(math.log(3) / 2) < 2 * math.sqrt(math.log(3))


def test_path_scope_scores_the_tree_path_by_hand():
    # as above (c=1) but every node below the root on the path is scored too:
    # iteration 3 descends into 1 and expands 2: steps [1, 2] -> R = (1 + 0)/2 = 0.5
    # iteration 4: UCT(1) = 1.5/2 + sqrt(ln3/2) = 1.491 > UCT(2) = sqrt(ln3) = 1.048; the terminal
    #   node (0,1,2) is reached again: R = 0.5
    assert _three_items(1.0, 4, "path") == {(0,): (4, 2.0), (0, 1): (3, 2.0), (0, 2): (1, 0.0),
                                            (0, 1, 2): (2, 1.0)}


def test_best_path_tie_breaks():
    # c=2 above: root children 1 and 2 both have 2 visits and mean 0.5 -> lowest item (1), then its child 2
    I = np.zeros((3, 3))
    I[0, 1] = 1.0
    e = MCTS(3, roots=[0], iterations=4, rollout_len=1, c=2.0, path_cap=5, rollout_scope="leaf").run_native(I)
    assert e.paths()[0].tolist() == [1, 2]
    # two children with one visit each: the higher mean reward wins over the lower index
    I = np.zeros((3, 3))
    I[0, 2] = 1.0
    e = MCTS(3, roots=[0], iterations=2, rollout_len=1).run_native(I)
    assert e.paths()[0].tolist() == [2]
    assert e.top_children(5)[0].tolist() == [2, 1]
    # path cap
    e = MCTS(3, roots=[0], iterations=50, rollout_len=1, path_cap=1).run_native(I)
    assert len(e.paths()[0]) == 1


def test_running_mean_backup_eq3_by_hand():
    # ETS backup: V += (R - V)/N. Same tree as the c=1 case: node 1 gets R = 1, 0, 0 -> V = 1, 1/2, 1/3
    I = np.zeros((3, 3))
    I[0, 1] = 1.0
    e = MCTS(3, roots=[0], iterations=4, rollout_len=1, c=1.0, backup="mean", rollout_scope="leaf").run_native(I)
    t = e.tree(0)
    k = t["item"].tolist().index(1, 1)
    assert t["visits"][k] == 3 and t["value"][k] == pytest.approx(1 / 3)
    assert t["value"][0] == pytest.approx(1 / 4)


def test_paper_rule_with_more_items_than_iterations_stays_at_depth_one():
    # METHODS 3.2: 150 candidates, 100 iterations -> 100 root children with one visit each
    n = 151
    e = MCTS(n, roots=[0], iterations=100).run_native(np.zeros(n))
    t = e.tree(0)
    assert t["depth"].max() == 1
    assert (t["visits"][1:] == 1).all() and len(t["item"]) == 101


def test_progressive_widening_bounds_children():
    # a node may hold max(1, ceil(k * N**a)) children; the root is always considered first
    n = 151
    e = MCTS(n, roots=[0], iterations=100, widening=(1.0, 0.5)).run_native(np.zeros(n))
    t = e.tree(0)
    children = 0
    for visits in range(100):  # root visits before each iteration
        if children < max(1, math.ceil(math.sqrt(max(visits, 1)))):
            children += 1
    assert int((t["parent"] == 0).sum()) == children == 10
    assert t["depth"].max() > 1
