"""The motion map and GrabCut guided by it, on synthetic videos whose robot mask is known: a static and a
panning camera, a post of the robot's colour inside the box, reading a video forwards."""
import warnings

import cv2
import numpy as np
import pytest

from snaketrack.datasets.boxes import Box, dilate_mask, mask_to_box
from snaketrack.datasets.grabcut_backend import GrabCutBackend
from snaketrack.datasets.layout import Dataset, DatasetWriter
from snaketrack.datasets.motion import MotionConfig, MotionMap, SequentialFrames, motion_near, nan_median
from snaketrack.datasets.motion_backend import MotionGuideConfig, MotionGuidedBackend
from snaketrack.datasets.video import open_frames
from snaketrack.errors import InputError
from snaketrack.labelling.label import LabelConfig, label_video
from snaketrack.masks import mask_iou

H, W, N = 120, 200, 40


def _ground(seed=0, size=(H + 80, W + 120)):
    rng = np.random.default_rng(seed)
    g = rng.integers(70, 190, (size[0] // 4, size[1] // 4, 3)).astype(np.uint8)
    return cv2.resize(g, (size[1], size[0]), interpolation=cv2.INTER_LINEAR)


def _video(pan_px=0.0, post=False):
    """Frames (N, H, W, 3) and robot masks (N, H, W): an orange bar crawling over textured ground
    seen by a camera panning ``pan_px`` per frame, with (``post``, still camera only) an orange post beside
    its path."""
    ground = _ground()
    frames, masks = [], []
    for k in range(N):
        ox = int(round(20 + pan_px * k))
        img = ground[20:20 + H, ox:ox + W].copy()
        m = np.zeros((H, W), np.uint8)
        x0, y0 = 30 + k, 25 + int(round(1.6 * k))  # crawling across its length, as a snake's body sweeps
        cv2.line(m, (x0, y0), (x0 + 50, y0 + int(8 * np.sin(k / 4))), 1, 7)
        m = m.astype(bool)
        if post:  # still, in the robot's colour, beside its path
            img[5:60, 110:118] = (230, 120, 40)
        img[m] = (230, 120, 40)
        frames.append(img)
        masks.append(m)
    return np.stack(frames), np.stack(masks)


def _write(tmp_path, frames, masks, name="clip"):
    out = tmp_path / name
    with DatasetWriter(out, {"fps": 30.0, "width": W, "height": H}) as w:
        for f, m in zip(frames, masks):
            w.write_frame(f, m)
    return out


@pytest.mark.parametrize("pan_px", [0.0, 1.5])
def test_motion_map_finds_the_moving_robot_from_a_still_or_panning_camera(pan_px):
    frames, masks = _video(pan_px)
    m = MotionMap(lambda i: frames[i] if 0 <= i < N else None, N, fps=30.0,
                  config=MotionConfig(offsets_s=(-0.5, -0.33, -0.17, 0.17, 0.33, 0.5)))
    for i in (0, 20, N - 1):
        moving = m.motion(i)
        recall = (moving & masks[i]).sum() / masks[i].sum()
        extra = (moving & ~masks[i]).sum() / masks[i].sum()
        assert recall > 0.9, (i, recall)
        # the ends take all their neighbours from one side: where the robot lay in two of them, its ghost
        assert extra < (0.15 if i == 20 else 1.0), (i, extra)


def test_no_plate_without_enough_neighbours_and_bad_settings():
    frames, _ = _video()
    m = MotionMap(lambda i: frames[i] if 0 <= i < 3 else None, None, fps=30.0)
    assert m.motion(1) is None  # the offsets reach past a three-frame video on both sides
    with pytest.raises(InputError, match="offsets"):
        MotionConfig(offsets_s=(0.0, 0.5))


def test_motion_near_keeps_the_pieces_reaching_into_the_box():
    moving = np.zeros((40, 60), bool)
    moving[10:13, 5:40] = True   # reaches into the box
    moving[30:33, 50:58] = True  # elsewhere
    kept = motion_near(moving, Box(0, 0, 10, 20))
    assert kept[10:13, 5:40].all() and not kept[30:].any()


def test_sequential_frames_equal_the_source_and_reopen_backwards(tmp_path):
    frames, masks = _video()
    clip = _write(tmp_path, frames, masks)
    read, ds = SequentialFrames(open_frames(clip), keep=8), Dataset(clip)
    for i in (0, 5, 20, 19, 3, 39):
        assert np.array_equal(read(i), ds.frame(i))
    assert read(40) is None and read(-1) is None


def test_a_post_of_the_robots_colour_is_cut_off_where_colour_alone_takes_it_in(tmp_path):
    frames, masks = _video(post=True)
    clip = _write(tmp_path, frames, masks)
    box = mask_to_box(masks[0]).expand(6)

    def run(backend, name):
        out = tmp_path / name
        label_video(open_frames(clip), out, backend, box, LabelConfig(), progress=False)
        ds = Dataset(out)
        return np.mean([mask_iou(ds.mask(i), masks[i]) for i in range(N)])

    colour = run(GrabCutBackend(), "colour")
    backend = MotionGuidedBackend(open_frames(clip))
    motion = run(backend, "motion")
    assert backend.guided >= N - 2
    assert motion > 0.85 and motion > colour + 0.1, (motion, colour)
    backend.seek(5)  # the held frame's moving pixels, for the fit: its motion map's
    moving = backend.moving()
    backend.close()  # the map is used from one thread at a time: the worker's look-ahead finishes first
    assert np.array_equal(moving, backend.motion.motion(5)) and moving[masks[5]].mean() > 0.5


def test_label_video_names_each_source_frame_to_a_seeking_backend(tmp_path):
    frames, masks = _video()
    clip = _write(tmp_path, frames, masks)
    seen = []

    class Recorder(GrabCutBackend):
        def seek(self, index):
            seen.append(index)

    label_video(open_frames(clip), tmp_path / "out", Recorder(), mask_to_box(masks[0]).expand(6), LabelConfig(),
                stride=3, max_frames=5, progress=False)
    assert seen == [0, 3, 6, 9, 12]


def test_nan_median_equals_numpys():
    rng = np.random.default_rng(0)
    for n in (1, 2, 3, 5, 6, 8):
        for nan_share in (0.0, 0.3, 1.0):  # every pixel whole, some with NaN, every value NaN
            x = rng.normal(size=(n, 30, 20, 3)).astype(np.float32)
            x[rng.random(x.shape) < nan_share] = np.nan
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN pixels
                want = np.nanmedian(x, axis=0)
            got = nan_median(x)
            assert got.dtype == np.float32
            np.testing.assert_allclose(got, want, rtol=1e-6)


def test_the_default_labeller_on_a_video_is_motion_guided_and_no_motion_turns_it_off(tmp_path):
    from snaketrack.cli import main
    from snaketrack.labelling.backends import build_backend

    frames, masks = _video()
    clip = _write(tmp_path, frames, masks)
    assert isinstance(build_backend("default", open_frames(clip)), MotionGuidedBackend)
    assert type(build_backend("grabcut", open_frames(clip), motion=False)) is GrabCutBackend
    assert type(build_backend("grabcut")) is GrabCutBackend  # no video to read motion from
    box = mask_to_box(masks[0]).expand(6)
    for flags, name in (([], "motion"), (["--no-motion"], "colour")):
        assert main(["label", str(clip), "--box", f"{box.x},{box.y},{box.w},{box.h}", *flags,
                     "--out", str(tmp_path / name)]) == 0
        assert len(Dataset(tmp_path / name)) == N


def test_a_still_object_the_last_label_took_in_drops_out_once_the_robot_is_away_from_it(tmp_path):
    frames, masks = _video(post=True)
    post = np.zeros((H, W), bool)
    post[5:60, 110:118] = True
    i = 5  # the robot's nearest pixel is ~20 px from the post
    prior = masks[i - 1] | post  # the last label took the post in
    backend = MotionGuidedBackend(open_frames(_write(tmp_path, frames, masks)))
    backend.seek(i)
    backend.set_image(frames[i])
    out = backend.predict(mask_to_box(prior).expand(6), prior)
    assert backend.guided == 1
    assert not out[post].any()
    assert mask_iou(out, masks[i]) > 0.8


@pytest.mark.parametrize("pan_px", [0.0, 1.5])
def test_still_pixels_are_the_scene_that_does_not_change_and_never_the_moving_robot(pan_px):
    frames, masks = _video(pan_px, post=pan_px == 0)
    m = MotionMap(lambda i: frames[i] if 0 <= i < N else None, N, fps=30.0,
                  config=MotionConfig(offsets_s=(-0.5, -0.33, -0.17, 0.17, 0.33, 0.5)))
    swept = masks.any(0)  # under a still camera, every pixel the robot ever covers
    for i in (0, 20, N - 1):
        still = m.still(i)
        assert not (still & masks[i]).any(), i
        assert still[~dilate_mask(swept, 2)].mean() > (0.95 if pan_px == 0 else 0.6), i
        if pan_px == 0:
            assert still[5:60, 110:118][~swept[5:60, 110:118]].all()  # the post, where the robot never is
    assert MotionMap(lambda i: frames[i] if 0 <= i < N else None, N, fps=30.0,
                     config=MotionConfig(still_threshold=None)).still(20) is None


def test_a_still_object_touching_the_robot_that_the_last_label_took_in_is_cut_off(tmp_path):
    frames, masks = _video()
    post = np.zeros((H, W), bool)
    post[30:50, 104:112] = True  # the robot's colour, touching its front end in frame 20, never crossed by it
    assert not (post & masks.any(0)).any() and (post & dilate_mask(masks[20], 3)).any()
    frames = frames.copy()
    frames[:, post] = (230, 120, 40)
    clip = _write(tmp_path, frames, masks)
    i = 20
    prior = masks[i - 1] | post  # the last label took the post in

    def cut(still_threshold):
        backend = MotionGuidedBackend(open_frames(clip),
                                      MotionGuideConfig(motion=MotionConfig(still_threshold=still_threshold)))
        backend.seek(i)
        backend.set_image(frames[i])
        return backend.predict(mask_to_box(prior).expand(15), prior)

    without = cut(None)  # within the guide's reach of the moving robot, and of its colour: kept
    assert without[post].sum() > 0.5 * post.sum()
    out = cut(MotionConfig().still_threshold)
    assert out[post].sum() < 0.05 * post.sum()
    assert mask_iou(out, masks[i]) > 0.95


class _GuideRecorder(GrabCutBackend):
    """GrabCut that records the guide each cut was given."""

    def __init__(self):
        super().__init__()
        self.guides = []

    def predict(self, box, prior=None, guide=None, **kw):
        self.guides.append(guide)
        return super().predict(box, prior, guide=guide, **kw)


def _still_robot_video(flicker: np.ndarray, changed: int = 20):
    """Frames (N, H, W, 3) and the robot's mask: an orange bar lying still on textured ground; the pixels of
    ``flicker`` (bool (H, W), its tail tip) are orange but grey in frame ``changed`` (the tip has moved)."""
    ground = _ground()[20:20 + H, 20:20 + W]
    robot = np.zeros((H, W), np.uint8)
    cv2.line(robot, (30, 60), (150, 70), 1, 7)
    robot = robot.astype(bool)
    frames = []
    for k in range(N):
        img = ground.copy()
        img[robot] = (230, 120, 40)
        img[flicker] = (90, 90, 90) if k == changed else (230, 120, 40)
        frames.append(img)
    return np.stack(frames), robot


def test_a_paused_robot_keeps_its_whole_label_though_its_tip_still_moves(tmp_path):
    tip = np.zeros((H, W), bool)
    tip[62:72, 150:158] = True
    frames, robot = _still_robot_video(tip)
    gc = _GuideRecorder()
    backend = MotionGuidedBackend(open_frames(_write(tmp_path, frames, np.stack([robot] * N))), grabcut=gc)
    backend.seek(20)
    backend.set_image(frames[20])
    out = backend.predict(mask_to_box(robot).expand(15), robot)
    assert gc.guides[-1] is None  # the motion near the last mask is a fraction of it: cut without the guide
    assert mask_iou(out, robot) > 0.85
    # guided by the tip alone (and the last mask near it), the cut loses the rest of the robot
    tip_only = MotionGuidedBackend(open_frames(tmp_path / "clip"), MotionGuideConfig(min_moving_frac=0.0))
    tip_only.seek(20)
    tip_only.set_image(frames[20])
    assert mask_iou(tip_only.predict(mask_to_box(robot).expand(15), robot), robot) < 0.5 and tip_only.guided == 1


def test_a_light_change_joined_to_the_robot_s_motion_stays_out_of_the_guide(tmp_path):
    frames, masks = _video()
    sheen = np.zeros((H, W), bool)
    sheen[:, 185:] = True  # a band of glossy floor whose light changes, far from the robot
    sheen[60:63, 60:186] = True  # joined to the robot's path by a streak
    frames = frames.copy()
    i = 20
    frames[i][sheen & ~masks[i]] = np.clip(frames[i][sheen & ~masks[i]].astype(int) + 60, 0, 255)  # brighter now
    gc = _GuideRecorder()
    backend = MotionGuidedBackend(open_frames(_write(tmp_path, frames, masks)), grabcut=gc)
    backend.seek(i)
    backend.set_image(frames[i])
    backend.predict(mask_to_box(masks[i - 1]).expand(15), masks[i - 1])
    guide = gc.guides[-1]
    assert guide is not None and guide[masks[i]].mean() > 0.3  # the robot's motion guides the cut
    assert not (guide & ~dilate_mask(masks[i - 1], backend.config.extend_px)).any()
    assert (backend.motion.motion(i) & ~dilate_mask(masks[i - 1], backend.config.extend_px)).sum() > 500


def test_each_pair_of_frames_is_matched_once_and_registers_as_if_matched_afresh():
    frames, _ = _video(pan_px=1.5)
    m = MotionMap(lambda i: frames[i] if 0 <= i < N else None, N, fps=30.0,
                  config=MotionConfig(offsets_s=(-0.33, 0.33)))
    orb = cv2.ORB_create(m.config.features)
    bf = cv2.BFMatcher(cv2.NORM_HAMMING, crossCheck=True)
    calls = []
    match = m._matcher.match
    m._matcher = type("Counting", (), {"match": lambda self, a, b: calls.append(1) or match(a, b)})()
    for i, j in [(10, 20), (20, 10), (30, 20), (20, 30)]:
        kj, dj = orb.detectAndCompute(cv2.cvtColor(frames[j], cv2.COLOR_RGB2GRAY), None)
        ki, di = orb.detectAndCompute(cv2.cvtColor(frames[i], cv2.COLOR_RGB2GRAY), None)
        direct = bf.match(dj, di)  # what matching j against i afresh gives, in its order
        qj, ti = m.matches(j, i)
        assert [(d.queryIdx, d.trainIdx) for d in direct] == list(zip(qj.tolist(), ti.tolist()))
        src = np.float32([kj[d.queryIdx].pt for d in direct])
        dst = np.float32([ki[d.trainIdx].pt for d in direct])
        want, _ = cv2.findHomography(src, dst, cv2.RANSAC, m.config.ransac_px)
        np.testing.assert_array_equal(m.homography(j, i), want)
        assert abs(m.homography(j, i)[0, 2] - 1.5 * (j - i)) < 1.0  # the pan, j's pixels onto i's
    assert len(calls) == 2  # (10, 20) and (20, 30), each once


def test_motion_maps_made_ahead_give_the_labels_made_in_turn_and_the_thread_stops(tmp_path):
    import threading

    frames, masks = _video(pan_px=1.5)
    clip = _write(tmp_path, frames, masks)
    box = mask_to_box(masks[0]).expand(6)
    labels, made_by = {}, {}
    for name in ("in_turn", "ahead"):
        backend = MotionGuidedBackend(open_frames(clip))
        make = backend._make
        made_by[name] = []

        def recording(i, make=make, seen=made_by[name]):
            seen.append((i, threading.current_thread().name))
            return make(i)

        backend._make = recording
        if name == "in_turn":
            backend.maps = recording  # each frame's maps made on the labeller's thread when it is cut
        label_video(open_frames(clip), tmp_path / name, backend, box, LabelConfig(), progress=False)
        labels[name] = [Dataset(tmp_path / name).mask(i) for i in range(N)]
        assert backend._worker is None  # label_video closed it
    assert all(np.array_equal(a, b) for a, b in zip(labels["in_turn"], labels["ahead"]))
    assert mask_iou(labels["ahead"][N // 2], masks[N // 2]) > 0.8
    assert [i for i, _ in made_by["ahead"]] == list(range(N))  # each frame once, the last not past the end
    assert all(t.startswith("motion-map") for _, t in made_by["ahead"])
    assert all(t == threading.main_thread().name for _, t in made_by["in_turn"])


def test_label_runs_grabcut_on_one_torch_thread_unless_told_and_a_bad_count_is_one_line(tmp_path, capsys,
                                                                                        monkeypatch):
    import torch

    import snaketrack.labelling.label as label
    from snaketrack.cli import main

    frames, masks = _video()
    clip = _write(tmp_path, frames, masks)
    box = mask_to_box(masks[0]).expand(6)
    seen, real = [], label.label_video
    monkeypatch.setattr(label, "label_video", lambda *a, **kw: seen.append(torch.get_num_threads()) or real(*a, **kw))
    before = torch.get_num_threads()
    try:
        for flags, name in (([], "default"), (["--threads", "2"], "two")):
            assert main(["label", str(clip), "--box", f"{box.x},{box.y},{box.w},{box.h}", "--max-frames", "2",
                         *flags, "--out", str(tmp_path / name)]) == 0
    finally:
        torch.set_num_threads(before)
    assert seen == [1, 2]
    capsys.readouterr()
    assert main(["label", str(clip), "--box", "1,1,5,5", "--threads", "0", "--out", str(tmp_path / "z")]) == 2
    assert capsys.readouterr().err.strip().splitlines() == ["snaketrack: error: --threads 0: expected at least 1"]
    assert not (tmp_path / "z").exists()
