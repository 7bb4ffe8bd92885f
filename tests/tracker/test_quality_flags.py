"""The truth-free flags of a run: a clean run raises none; a run whose masks drift onto a distractor, or whose
track leaves the robot, is flagged on the figures that say so. The runs go through the real pipeline and
writers with a stand-in tracker reporting known poses (the figures are the pipeline's, not the stand-in's)."""

import numpy as np
import pytest

from snaketrack.datasets.layout import encode_mask, read_mask
from snaketrack.errors import SnaketrackWarning
from snaketrack.models.robot import load_robot
from snaketrack.tracker.run.loop import RunOptions, track_source
from snaketrack.tracker.run.pipeline import PipelineConfig
from snaketrack.tracker.run.quality_flags import (
    LIMITS,
    body_width_px,
    depth_jump_fraction,
    joint_at_limit_fraction,
    mask_area_ratio,
    quality_flags,
    run_figures,
    warning_line,
)

from posed_dataset import FPS, TruePoses, W, write_posed_dataset

N = 36


# -- the figures against brute force ---------------------------------------------------------------
def test_joints_held_at_their_limits_counted_over_tracked_frames_only():
    rng = np.random.default_rng(0)
    q = rng.uniform(-0.7, 0.7, (50, 3))
    q[:10, 1] = 1.2  # joint 2 at its upper limit in 10 frames
    q[40:45, 2] = -0.795  # joint 3 within 0.02 rad of its lower limit in 5 frames
    q[20:22, 2] = 0.8  # and for 2 frames at its upper
    tracked = np.ones(50, bool)
    tracked[5] = False  # splits joint 2's run into 5 and 4 frames
    lower, upper = np.array([-1.5, -1.2, -0.8]), np.array([1.5, 1.2, 0.8])

    def brute(min_frames):
        out = []
        for j in range(3):
            at = [tracked[i] and (q[i, j] <= lower[j] + 0.02 or q[i, j] >= upper[j] - 0.02) for i in range(50)]
            held = [any(all(at[k] for k in range(a, a + min_frames)) for a in range(max(0, i - min_frames + 1), i + 1)
                        if a + min_frames <= 50) for i in range(50)]
            out.append(np.mean([held[i] for i in range(50) if tracked[i]]))
        return out

    for min_frames in (1, 3, 5, 6):
        np.testing.assert_allclose(joint_at_limit_fraction(q, lower, upper, tracked, min_frames), brute(min_frames))
    frac = joint_at_limit_fraction(q, lower, upper, tracked, 5)
    assert frac[1] == pytest.approx(5 / 49) and frac[2] == pytest.approx(5 / 49) and frac[0] == 0


def test_depth_jumps_are_steps_beyond_a_share_of_the_median_depth():
    z = np.full(40, 1.0)
    z[20:] = 1.5  # one jump of 50 %
    z[30] = 1.52  # a small step, then back
    tracked = np.ones(40, bool)
    assert depth_jump_fraction(z, tracked) == pytest.approx(1 / 39)
    tracked[20] = False  # the jump's pair is not both tracked: no jump counted
    assert depth_jump_fraction(z, tracked) == pytest.approx(0 / 37)
    assert np.isnan(depth_jump_fraction(z[:1], tracked[:1]))


def test_a_bar_s_width_is_its_area_over_its_skeleton_s_length():
    from snaketrack.tracker.run.quality import skeleton_pixels

    mask = np.zeros((60, 200), bool)
    mask[20:32, 10:190] = True  # 12 px wide
    sk = len(skeleton_pixels(mask))
    assert body_width_px([mask.sum()] * 6, [sk] * 6) == pytest.approx(12.0, rel=0.1)
    assert np.isnan(body_width_px([0, 0], [0, 0]))


def test_mask_area_ratio_at_the_first_quarters_depth():
    """A robot crawling from 1.3 m to 2.6 m away shows a quarter of its area: not a mask that shrank."""
    z = np.linspace(1.3, 2.6, 40)
    area = 15000.0 * (1.3 / z) ** 2
    assert mask_area_ratio(area) < 0.4  # taken as it is, it would flag (limit 0.6)
    assert mask_area_ratio(area, z) == pytest.approx(1.0, abs=0.05)
    grown = area * np.r_[np.ones(30), np.full(10, 2.0)]  # the same track, the mask doubled at its end
    assert mask_area_ratio(grown, z) == pytest.approx(2.0, abs=0.1)
    assert np.isnan(mask_area_ratio(area, np.full(40, np.nan)))


def test_mask_area_ratio_and_the_flags_sides():
    assert mask_area_ratio([100] * 8 + [250] * 8) == pytest.approx(2.5)
    assert np.isnan(mask_area_ratio([100, 100]))
    clean = {"silhouette_iou_mean": 0.9, "silhouette_iou_p5": 0.8, "skeleton_residual_p95_widths": 0.2,
             "mask_area_ratio": 1.1, "joint_at_limit_fraction": 0.0, "depth_jump_fraction": 0.0,
             "gait_power_fraction": 0.1, "gait_cycles": 1.5, "lost_fraction": 0.0, "labels_flagged_fraction": 0.0}
    assert quality_flags(clean) == [] and warning_line([]) is None  # too few cycles: the gait is not judged
    bad = dict(clean, gait_cycles=3.0, mask_area_ratio=0.4, silhouette_iou_mean=float("nan"))
    flags = quality_flags(bad)
    assert [f["figure"] for f in flags] == ["mask_area_ratio", "gait_power_fraction"]
    assert flags[0]["limit"] == f"< {LIMITS['mask_area_ratio_low'][1]:g}"
    line = warning_line(flags)
    assert "\n" not in line and "mask_area_ratio 0.4" in line and "gait_power_fraction 0.1" in line


# -- runs ------------------------------------------------------------------------------------------
class KnownPoses(TruePoses):
    """The posed dataset's true pose each frame, or from frame ``leave`` on a pose that left the robot (its depth
    jumping between two values, joint 3 bent to its limit)."""

    def __init__(self, robot, leave=None):
        super().__init__(robot)
        self.leave = leave

    def frame_pose(self, i):
        q, base = super().frame_pose(i)
        if self.leave is not None and i >= self.leave:
            q = q.copy()
            q[2] = self.robot.upper[2]
            base = base * (0.6 if i % 2 else 1.0)  # nearer the camera every other frame: a smaller robot
        return q, base


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    root = tmp_path_factory.mktemp("flags")
    ds = write_posed_dataset(root / "ds", N, seed=5)
    (ds / "truth.jsonl").unlink()
    # masks that drift onto a distractor: from frame 9 a block beside the head end (a chair leg) grows into
    # the mask, and from frame 22 the robot's own tail end fades out of it
    drift = root / "drift"
    drift.mkdir()
    for p in sorted((ds / "masks").glob("*.png")):
        i, m = int(p.stem), read_mask(p)
        vv, uu = np.nonzero(m)
        if i >= 9:
            s = min(1.0, (i - 9) / 13)
            u1, v0, h = int(uu.max()), int(np.median(vv)), int(8 + 40 * s)
            m[max(v0 - h, 0):v0 + h, u1 - 4:min(u1 + int(8 + 50 * s), W)] = True
        if i >= 22:
            m[:, :int(np.percentile(uu, min(100.0, 100.0 * (i - 21) / 18)))] = False
        (drift / p.name).write_bytes(encode_mask(m))
    return ds, drift


def _run(monkeypatch, ds, out, masks=None, leave=None):
    from snaketrack.tracker.run import pipeline

    monkeypatch.setattr(pipeline, "make_tracker", lambda robot, *a, **kw: KnownPoses(robot, leave))
    track_source(ds, out, "planar-snake-11", masks=None if masks is None else str(masks), config=PipelineConfig(),
                 options=RunOptions(video=False, plots=False, progress=False))
    fig = run_figures(out, load_robot("planar-snake-11"), FPS)
    return fig, {f["figure"] for f in quality_flags(fig)}


def test_a_clean_run_is_not_flagged(clip, tmp_path, monkeypatch):
    fig, flags = _run(monkeypatch, clip[0], tmp_path / "clean")
    assert flags == set(), fig
    assert fig["body_width_px"] == pytest.approx(9.2, rel=0.2)  # 0.018 m at 2 m with f = 400 px: 7.2 px, and caps
    assert fig["skeleton_residual_p95_widths"] < 0.2 and fig["joint_at_limit_fraction"] == 0.0
    per_frame = (tmp_path / "clean" / "quality.csv").read_text().splitlines()
    assert per_frame[0].split(",")[-1] == "mask_pixels"


def test_a_track_that_leaves_the_robot_is_flagged(clip, tmp_path, monkeypatch):
    fig, flags = _run(monkeypatch, clip[0], tmp_path / "left", leave=18)
    assert {"joint_at_limit_fraction", "depth_jump_fraction", "silhouette_iou_p5"} <= flags, fig
    from snaketrack.io import read_csv_columns

    track = read_csv_columns(tmp_path / "left" / "track.csv")
    tracked = np.asarray(track["status"]).astype(str) == "tracked"
    at_limit = np.asarray(track["q_3"], float) >= load_robot("planar-snake-11").upper[2] - 0.02
    # held there from frame 18 to the end, 18 frames: 0.6 s, more than PINNED_S
    assert fig["joint_at_limit_fraction"] == pytest.approx(at_limit[tracked].mean()) and at_limit[18:].all()
    z = np.asarray(track["base_z"], float)
    pairs = tracked[1:] & tracked[:-1]
    jumps = (np.abs(np.diff(z)) > 0.15 * np.median(z[tracked]))[pairs]
    assert fig["depth_jump_fraction"] == pytest.approx(jumps.mean()) and jumps.sum() >= 17


class VaryingFit(KnownPoses):
    """The true poses with a fit IoU that changes every frame."""

    def _state(self, mask):
        from dataclasses import replace

        state = super()._state(mask)
        return replace(state, iou=0.5 + 0.01 * self.i)


def test_masks_that_drift_onto_a_distractor_are_flagged_and_track_s_line_gives_mean_ious(clip, tmp_path, monkeypatch,
                                                                                           capsys):
    from snaketrack import cli
    from snaketrack.io import read_csv_columns
    from snaketrack.tracker.run import pipeline

    monkeypatch.setattr(pipeline, "make_tracker", lambda robot, *a, **kw: VaryingFit(robot))
    out = tmp_path / "drift"
    with pytest.warns(SnaketrackWarning, match="the track may have left the robot") as caught:
        assert cli.main(["track", str(clip[0]), "--robot", "planar-snake-11", "--masks", str(clip[1]), "--no-video",
                         "--out", str(out)]) == 0
    fig = run_figures(out, load_robot("planar-snake-11"), FPS)
    flags = {f["figure"] for f in quality_flags(fig)}
    assert {"silhouette_iou_mean", "silhouette_iou_p5", "mask_area_ratio"} <= flags, fig
    assert fig["mask_area_ratio"] > 2.0
    assert all(f in str(caught[-1].message) for f in flags)  # track says so in one warning
    # the summary line's IoUs are means over the frames, not one frame's
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("frames="))
    printed = float(next(w for w in line.split() if w.startswith("iou="))[4:])
    track = read_csv_columns(out / "track.csv")
    assert np.ptp(track["iou"]) > 0.3  # the frames differ ...
    assert printed == pytest.approx(np.mean(track["iou"]), abs=1e-3)  # ... and the line gives their mean
    assert printed != pytest.approx(track["iou"][0], abs=1e-2)
    silhouette = float(next(w for w in line.split() if w.startswith("silhouette_iou_mean="))[20:])
    assert silhouette == pytest.approx(np.nanmean(track["iou_no_offset"]), abs=1e-3)
    assert silhouette == pytest.approx(fig["silhouette_iou_mean"], abs=1e-3)
