"""Head or tail: the body wave's direction, the chain read from the other end, and a tracker that
starts read backwards turning itself round."""
import math

import numpy as np
import pytest
import torch

from snaketrack.models.robot import load_robot
from snaketrack.tracker.reading import ReadingHold, flip_pose, wave_direction, yaw_indices
from snaketrack.tracker.render.primitives import CapsuleModel
from snaketrack.tracker.render.silhouette import SilhouetteRenderer
from snaketrack.tracker.state import StateLayout

K = np.array([[500.0, 0, 159.5], [0, 500.0, 119.5], [0, 0, 1]])
R_DOWN = np.diag([1.0, -1.0, -1.0])  # lying flat, seen from above


def _gait(t, J, forward=True):
    """The simulator's lateral undulation (snaketrack.sim.gait): joint k's phase ωt + δk, tail first."""
    k = np.arange(J)[None]
    return (math.pi / 3) * np.sin(4.0 * t[:, None] + (math.pi / 3 if forward else -math.pi / 3) * k)


def test_wave_direction_sign_and_flip_symmetry():
    t = np.arange(40) / 30.0
    q = _gait(t, 10)
    assert wave_direction(q, 5) > 0.5
    assert wave_direction(-q[:, ::-1], 5) == pytest.approx(-wave_direction(q, 5))  # read backwards
    assert wave_direction(_gait(t, 10, forward=False), 5) < -0.5  # crawling backwards
    assert wave_direction(np.tile(q[:1], (40, 1)), 5) == 0.0  # standing still: no evidence
    assert wave_direction(q[:5], 5) == 0.0  # too short a window


def test_yaw_indices():
    assert yaw_indices(load_robot("planar-snake-11")) == list(range(10))
    assert yaw_indices(load_robot("arcsnake-4")) == [0, 2, 4]


@pytest.mark.parametrize("name", ["planar-snake-11", "arcsnake-4"])
def test_flip_pose_is_the_same_body(name):
    robot = load_robot(name)
    lay = StateLayout.for_robot(robot)
    rng = np.random.default_rng(0)
    q = rng.uniform(-0.5, 0.5, robot.dof)
    if name == "arcsnake-4":
        q[1::2] = 0.0  # no pitch: the reversed axis order is then exact
    x = lay.pack(q, R_DOWN, np.array([0.1, 0.05, 2.0]))
    xf = flip_pose(robot, lay, x)
    ren = SilhouetteRenderer(robot, K, 320, 240, CapsuleModel.capsules(robot))
    with torch.no_grad():
        a = ren.full_image(torch.as_tensor(x)[None])[0].numpy() > 0.5
        b = ren.full_image(torch.as_tensor(xf)[None])[0].numpy() > 0.5
    assert (a & b).sum() / (a | b).sum() > 0.995
    assert np.allclose(flip_pose(robot, lay, xf), x, atol=1e-9)
    # the new base sits where the head end was
    from snaketrack.models.kinematics import forward_kinematics_np

    fk = forward_kinematics_np(robot, q, R_DOWN, np.array([0.1, 0.05, 2.0]))
    assert np.allclose(xf[lay.trans], fk["ends"][-1], atol=1e-9)


def _crawl(n=40, speed=0.05):
    """(robot, layout, true pose vectors, masks, tracker) of a planar snake crawling by lateral
    undulation (the tracker's own renderer, visual model: no inverse crime is at stake here, the
    reading is)."""
    from snaketrack.tracker.config import TrackerConfig
    from snaketrack.tracker.tracker import Tracker

    robot = load_robot("planar-snake-11")
    lay = StateLayout.for_robot(robot)
    W, H = 320, 240
    ren = SilhouetteRenderer(robot, K, W, H)
    t = np.arange(n) / 30.0
    Q = _gait(t, robot.dof) * 0.6 if speed else np.tile(_gait(t[:1], robot.dof) * 0.6, (n, 1))
    xs = [lay.pack(q, R_DOWN, np.array([-0.5 + speed * ti, 0.0, 2.0])) for q, ti in zip(Q, t)]
    with torch.no_grad():
        masks = [ren.full_image(torch.as_tensor(x)[None])[0].numpy() > 0.5 for x in xs]
    return robot, lay, xs, masks, Tracker(robot, K, W, H, fps=30.0, config=TrackerConfig())


def test_tracker_started_backwards_turns_round():
    """The track starts from the pose read backwards; the body wave turns it round."""
    robot, lay, xs, masks, trk = _crawl()
    st = trk.start(masks[0], flip_pose(robot, lay, xs[0]))
    base_err = [np.linalg.norm(st.base_position - xs[0][lay.trans])]
    for m, x in zip(masks[1:], xs[1:]):
        st = trk.step(m)
        base_err.append(np.linalg.norm(st.base_position - x[lay.trans]))
    assert base_err[0] > 0.5  # read backwards: the base is at the head
    assert trk.flips == 1 and trk.reading_settled
    assert max(base_err[-10:]) < 0.02


def test_the_turn_forgets_the_last_good_frame():
    """After the body wave turns the track round, a search must not keep the reading of a frame
    tracked before the turn (``Tracker.good``, the reading reference of a mid-track search)."""
    from dataclasses import replace

    robot, lay, xs, masks, trk = _crawl()
    trk.config = replace(trk.config, reading_ref_iou=2.0)  # only this test sets the reference
    st = trk.start(masks[0], flip_pose(robot, lay, xs[0]))
    turned = False
    for m in masks[1:]:
        trk.good = (trk.frame, st.pose_vector(lay))  # the last frame, read backwards
        st = trk.step(m)
        if trk.flips:
            turned = True
            assert trk.good is None
            break
    assert turned


def _held_track(trk, masks, x0, max_hold=60):
    """Track ``masks`` from ``x0`` through a ReadingHold; (released states in order, release frame of each, hold)."""
    hold = ReadingHold(trk, max_hold)
    released, when = [], []
    for k, m in enumerate(masks):
        st = trk.start(m, x0) if k == 0 else trk.step(m)
        out = hold.push(st, m, payload=k)
        released += [s for s, _ in out]
        when += [k] * len(out)
        assert [p for _, p in out] == list(range(len(released) - len(out), len(released)))  # in order
    out = hold.flush()
    released += [s for s, _ in out]
    when += [len(masks)] * len(out)
    return released, when, hold


def test_reading_hold_rereads_the_frames_before_the_turn():
    """Held through a ReadingHold, the frames tracked backwards before the turn come out read the right way."""
    robot, lay, xs, masks, trk = _crawl()
    released, when, hold = _held_track(trk, masks, flip_pose(robot, lay, xs[0]))
    assert trk.flips == 1 and hold.reread_frames >= 19
    assert [s.frame for s in released] == list(range(len(masks)))
    err = [np.linalg.norm(s.base_position - x[lay.trans]) for s, x in zip(released, xs)]
    assert max(err) < 0.03, np.round(err, 3)  # without the hold the first frames are > 0.5 m off
    assert when[0] == when[hold.reread_frames - 1] < len(masks)  # released together, once turned round


def test_reading_hold_passes_a_forward_track_unchanged():
    from dataclasses import replace

    robot, lay, xs, masks, trk = _crawl(30)
    trk.config = replace(trk.config, hold_backward=False)  # the backward refinement: the next test
    released, when, hold = _held_track(trk, masks, xs[0])
    # the same run without the hold gives the same states
    robot, lay, xs, masks, trk2 = _crawl(30)
    direct = [trk2.start(masks[0], xs[0])] + [trk2.step(m) for m in masks[1:]]
    assert hold.reread_frames == 0 and trk.flips == 0
    for a, b in zip(released, direct):
        assert np.allclose(a.base_position, b.base_position) and np.allclose(a.q, b.q)
    assert 19 <= when[0] < len(masks)  # held until the wave confirmed the reading (a 20-frame window)
    assert when[-1] == len(masks) - 1  # after that, each frame passes at once


def test_reading_hold_releases_after_max_hold_without_a_wave():
    """A robot that does not move shows no wave: the hold gives up after max_hold frames."""
    robot, lay, xs, masks, trk = _crawl(12, speed=0.0)
    released, when, hold = _held_track(trk, masks, xs[0], max_hold=5)
    assert not trk.reading_settled and len(released) == 12
    assert when == [4] * 5 + list(range(5, 12))
    with pytest.raises(ValueError):
        ReadingHold(trk, -1)


def _undulating_pose_and_mask():
    """The planar snake mid-gait seen from above: (robot, layout, pose (D,), its 320×240 mask)."""
    robot = load_robot("planar-snake-11")
    lay = StateLayout.for_robot(robot)
    ren = SilhouetteRenderer(robot, K, 320, 240)
    q = _gait(np.array([0.3]), robot.dof)[0] * 0.6
    x = lay.pack(q, R_DOWN, np.array([-0.4, 0.0, 2.0]))
    with torch.no_grad():
        mask = ren.full_image(torch.as_tensor(x)[None])[0].numpy() > 0.5
    return robot, lay, x, mask


@pytest.mark.parametrize("backwards", [False, True])
def test_search_with_a_reading_keeps_it(backwards):
    """``initialise(orient=...)`` (a re-search while tracking, ``keep_reading``) returns a pose read
    the same way as ``orient``, whichever way that is; without it the search reads the chain freely."""
    from snaketrack.tracker.config import TrackerConfig
    from snaketrack.tracker.tracker import Tracker

    robot, lay, x, mask = _undulating_pose_and_mask()
    W, H = mask.shape[1], mask.shape[0]
    trk = Tracker(robot, K, W, H, fps=30.0, config=TrackerConfig(init_candidates=3, init_refine_steps=15))
    orient = flip_pose(robot, lay, x) if backwards else x
    res = trk.initialise(mask, orient=orient)
    tail_o, head_o = trk.search.ends(orient)
    tail, _ = trk.search.ends(res.x)
    assert np.linalg.norm(tail - tail_o) < np.linalg.norm(tail - head_o)
    assert res.iou > 0.8


@pytest.mark.parametrize("keep_results", [False, True])
def test_search_drops_results_read_the_other_way(keep_results):
    """A start that refines into the other reading (here: the exact pose read backwards, given as an
    extra start, which fits best) is dropped with ``keep_reading_results``, kept without it."""
    from snaketrack.tracker.config import TrackerConfig
    from snaketrack.tracker.tracker import Tracker

    robot, lay, x, mask = _undulating_pose_and_mask()
    W, H = mask.shape[1], mask.shape[0]
    cfg = TrackerConfig(init_candidates=3, init_refine_steps=15, keep_reading_results=keep_results)
    trk = Tracker(robot, K, W, H, fps=30.0, config=cfg)
    res = trk.initialise(mask, extra=[flip_pose(robot, lay, x)], orient=x)
    tail_o, head_o = trk.search.ends(x)
    tail, _ = trk.search.ends(res.x)
    same = np.linalg.norm(tail - tail_o) < np.linalg.norm(tail - head_o)
    assert same == keep_results
    assert res.iou > 0.8


def test_reading_reference_is_the_last_good_frame_while_recent():
    from snaketrack.tracker.config import TrackerConfig
    from snaketrack.tracker.tracker import Tracker

    robot = load_robot("planar-snake-11")
    trk = Tracker(robot, K, 320, 240, config=TrackerConfig(reading_ref_frames=15))
    pred, good = np.zeros(robot.dof + 6), np.ones(robot.dof + 6)
    assert trk._reading_reference(pred) is pred  # nothing fitted well yet
    trk.good, trk.frame = (10, good), 25
    assert trk._reading_reference(pred) is good
    trk.frame = 26
    assert trk._reading_reference(pred) is pred


def test_reading_hold_refines_the_held_frames_backwards():
    """From a start 0.3 m too deep and 0.2 rad off in every joint, the first frames walk in; refined
    backwards from the settled track on release (``hold_backward``) they are nearer the truth, each
    at least as good a fit, and the frames after the hold are the same."""
    from dataclasses import replace

    def run(backward):
        robot, lay, xs, masks, trk = _crawl(30)
        trk.config = replace(trk.config, hold_backward=backward)
        x0 = xs[0].copy()
        x0[lay.trans] = x0[lay.trans] * (1.0 + 0.3 / np.linalg.norm(x0[lay.trans]))  # along the ray
        x0[lay.q] += 0.2
        released, when, _ = _held_track(trk, masks, x0)
        err = [np.linalg.norm(s.base_position - x[lay.trans]) for s, x in zip(released, xs)]
        return released, np.array(err), when

    fwd, e_fwd, when = run(False)
    back, e_back, when_b = run(True)
    n = when[0]  # the hold released frames 0..n together (measured: n = 20)
    assert when == when_b and 19 <= n < 29
    assert e_fwd[0] > 0.1  # measured 0.168 m, then 0.036 m
    assert e_back[:2].max() < 0.01  # measured 0.003, 0.000 m
    assert all(b.iou >= f.iou for b, f in zip(back[:n + 1], fwd[:n + 1]))
    for b, f in zip(back[n + 1:], fwd[n + 1:]):  # after the hold: untouched
        assert np.allclose(b.base_position, f.base_position) and np.allclose(b.q, f.q)


@pytest.mark.parametrize("heights", [False, True])
def test_backward_fits_replace_the_held_frames_heights(heights):
    """With ``hold_backward_heights`` a held frame's entry in the ground's heights is its backward
    fit's height; without, it stays the forward one."""
    from dataclasses import replace

    robot, lay, xs, masks, trk = _crawl(30)
    trk.config = replace(trk.config, hold_backward_heights=heights)
    up = R_DOWN[:, 2]
    x0 = xs[0].copy()
    x0[lay.trans] = x0[lay.trans] * (1.0 + 0.3 / np.linalg.norm(x0[lay.trans]))
    hold = ReadingHold(trk, 60)
    released = []
    for k, m in enumerate(masks):
        st = trk.start(m, x0, up=up) if k == 0 else trk.step(m, up=up)
        if k == 0:
            forward0 = trk.ground_prior.heights[0]
        released += [s for s, _ in hold.push(st, m, up=up)]
    released += [s for s, _ in hold.flush()]
    assert trk.ground_prior.frames[:3] == [0, 1, 2]
    refit0 = float(up @ released[0].base_position) - trk.ground_prior.axis_height
    assert abs(refit0 - forward0) > 0.01  # the backward fit moved the first frame
    assert trk.ground_prior.heights[0] == pytest.approx(refit0 if heights else forward0, abs=1e-9)
