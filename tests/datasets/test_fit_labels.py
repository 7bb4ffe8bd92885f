"""Robot-fitted labels against MuJoCo truth: the fit removes a label's shadow fringe and glued blobs.

Truth masks come from MuJoCo's segmentation render (an independent
renderer); the "auto-labels" are those masks with GrabCut's kinds of error
added (a cast-shadow fringe on one side, a dark blob glued to the robot,
a notch), and the fitted labels must be nearer the truth than the labels.
"""
import csv
import json
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

from snaketrack import cli
from snaketrack.datasets.boxes import dilate_mask
from snaketrack.datasets.layout import Dataset, DatasetWriter
from snaketrack.errors import InputError, SnaketrackWarning
from snaketrack.labelling.fit_labels import FIT_CSV, FitConfig, fit_labels
from snaketrack.models.robot import load_robot

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tracker"))

W, H, F, N = 320, 240, 420.0, 16


def _label_errors(truth: np.ndarray, i: int) -> np.ndarray:
    """GrabCut-like errors: a 1-px fringe on the lower side, a ragged edge, a blob every 2nd frame, a notch."""
    rng = np.random.default_rng(i)
    shadow = np.zeros_like(truth)
    shadow[1:, :] = truth[:-1, :]
    lab = truth | shadow
    edge = (cv2.dilate(lab.view(np.uint8), np.ones((3, 3), np.uint8)) > 0) & ~lab
    lab |= edge & (rng.random(truth.shape) < 0.3)
    ys, xs = np.nonzero(truth)
    if i % 2 == 0:
        k = len(ys) // 3
        cv2.circle(lab.view(np.uint8), (int(xs[k]) + 6, int(ys[k]) + 6), 7, 1, -1)
    k = 2 * len(ys) // 3
    lab[ys[k] - 3:ys[k] + 4, xs[k] - 3:xs[k] + 4] = False
    return lab


@pytest.fixture(scope="module")
def labelled(tmp_path_factory):
    """(label dataset root, truth masks): N frames of a serpentine robot, labels with errors."""
    from mj_scene import MujocoMasks, serpentine

    robot = load_robot("planar-snake-11")
    mj = MujocoMasks(robot, W, H, F)
    truths = [mj.mask(*serpentine(robot, k)) for k in range(N)]
    mj.close()
    root = tmp_path_factory.mktemp("fit") / "labels"
    meta = {"K": mj.K.tolist(), "width": W, "height": H, "fps": 30.0, "robot": "planar-snake-11"}
    rng = np.random.default_rng(0)
    with DatasetWriter(root, meta) as w:
        for i, t in enumerate(truths):
            rgb = (110 + rng.normal(0, 8, (H, W, 3))).clip(0, 255).astype(np.uint8)
            rgb[t] = (230, 120, 30)
            w.write_frame(rgb, _label_errors(t, i))
    return root, truths


def _iou(a, b):
    return np.count_nonzero(a & b) / np.count_nonzero(a | b)


def _masks(root):
    ds = Dataset(root)
    return [ds.mask(i) for i in range(len(ds))]


def test_fitted_labels_are_nearer_the_truth(labelled, tmp_path):
    root, truths = labelled
    rep = fit_labels(root, tmp_path / "fit", config=FitConfig(replace_iou=0.0), progress=False)
    assert rep["frames"] == N and rep["replaced"] == N and rep["kept_label"] == 0
    labels, fitted = _masks(root), _masks(tmp_path / "fit")
    iou_label = np.mean([_iou(m, t) for m, t in zip(labels, truths)])
    iou_fit = np.mean([_iou(m, t) for m, t in zip(fitted, truths)])
    assert iou_label < 0.85 and iou_fit > 0.88 and iou_fit > iou_label + 0.06, (iou_label, iou_fit)
    # the glued blobs are gone: next to nothing fitted lies more than 4 px outside the truth
    for m, t in zip(fitted, truths):
        far = cv2.distanceTransform((~t).astype(np.uint8), cv2.DIST_L2, 3) > 4
        assert np.count_nonzero(m & far) < 10
    meta = json.loads((tmp_path / "fit" / "meta.json").read_text())
    assert meta["labelling"]["robot_fit"]["agree_px"] == 2
    # frames are copied byte for byte (no second JPEG encoding)
    src, dst = Dataset(root), Dataset(tmp_path / "fit")
    assert src.frame_path(3).read_bytes() == dst.frame_path(3).read_bytes()


def test_keep_edge_cuts_far_errors_and_keeps_the_label_edge(labelled, tmp_path):
    root, truths = labelled
    rep = fit_labels(root, tmp_path / "trim", config=FitConfig(keep_edge=True, snap=False), progress=False)
    assert rep["trimmed"] == N
    labels, trimmed = _masks(root), _masks(tmp_path / "trim")
    iou_label = np.mean([_iou(m, t) for m, t in zip(labels, truths)])
    iou_trim = np.mean([_iou(m, t) for m, t in zip(trimmed, truths)])
    assert iou_trim > iou_label + 0.02, (iou_label, iou_trim)
    kept = []
    for m, lab, t in zip(trimmed, labels, truths):
        assert not np.any(m & ~lab)  # nothing added: every pixel is the label's own
        far = cv2.distanceTransform((~t).astype(np.uint8), cv2.DIST_L2, 3) > 4
        assert np.count_nonzero(m & far) < 10  # the glued blobs are gone
        near = (cv2.dilate(t.view(np.uint8), np.ones((3, 3), np.uint8)) > 0) & ~t & lab
        kept.append(np.count_nonzero(m & near) / np.count_nonzero(near))
    # the label's edge is kept: most of its fringe 1 px outside the truth stays
    # (measured 0.78-0.86 a frame; the fitted silhouette keeps 0.26-0.36 of it)
    assert np.mean(kept) > 0.7 and min(kept) > 0.6, kept
    meta = json.loads((tmp_path / "trim" / "meta.json").read_text())
    assert meta["labelling"]["robot_fit"]["keep_edge"] is True


def test_by_default_a_label_is_replaced_where_the_fit_explains_it_and_trimmed_elsewhere(labelled, tmp_path):
    root, truths = labelled
    rep = fit_labels(root, tmp_path / "fit", progress=False)
    assert rep["replaced"] > 0 and rep["trimmed"] > 0 and rep["kept_label"] == 0
    rows = list(csv.DictReader((tmp_path / "fit" / FIT_CSV).open()))
    labels, fitted = _masks(root), _masks(tmp_path / "fit")
    for row, m, lab in zip(rows, fitted, labels):
        iou = float(row["iou_fit"])
        assert row["source"] == ("fit" if iou >= 0.85 else "trim"), row
        if row["source"] == "trim":  # a trimmed label is the label's own pixels, its edge snapped by a pixel at most
            assert not np.any(m & ~dilate_mask(lab, 1))
    iou_label = np.mean([_iou(m, t) for m, t in zip(labels, truths)])
    iou_fit = np.mean([_iou(m, t) for m, t in zip(fitted, truths)])
    assert iou_fit > iou_label + 0.02, (iou_label, iou_fit)
    with pytest.raises(InputError, match="replace-iou"):
        FitConfig(replace_iou=1.5)


def test_a_label_the_fit_cannot_explain_is_kept(labelled, tmp_path):
    root, _ = labelled
    rep = fit_labels(root, tmp_path / "fit", config=FitConfig(min_iou=0.99), progress=False)
    assert rep["fitted"] == 0 and rep["kept_label"] == N
    for a, b in zip(_masks(root), _masks(tmp_path / "fit")):
        assert np.array_equal(a, b)


def test_the_fit_starts_on_the_first_label_large_enough(labelled, tmp_path):
    """Labels too small to start the model on (an empty first cut) are kept; the fit starts after them."""
    root, truths = labelled
    src = Dataset(root)
    late = tmp_path / "late"
    with DatasetWriter(late, src.meta) as w:
        for i in range(6):
            w.write_frame(src.frame(i), src.mask(i) if i >= 2 else np.zeros((H, W), bool))
    rep = fit_labels(late, tmp_path / "fit", progress=False)
    rows = list(csv.DictReader((tmp_path / "fit" / FIT_CSV).open()))
    assert [r["source"] for r in rows[:2]] == ["label", "label"] and rep["kept_label"] == 2
    assert all(r["status"] == "tracked" and r["source"] in ("fit", "trim") for r in rows[2:])
    assert not any(m.any() for m in _masks(tmp_path / "fit")[:2])


def test_resume_after_interruption(labelled, tmp_path, monkeypatch):
    root, _ = labelled
    fit_labels(root, tmp_path / "whole", progress=False)
    real_mask = Dataset.mask

    def interrupted(self, i):
        if i == 9:
            raise KeyboardInterrupt
        return real_mask(self, i)

    monkeypatch.setattr(Dataset, "mask", interrupted)
    with pytest.raises(KeyboardInterrupt):
        fit_labels(root, tmp_path / "part", progress=False)
    assert len(list((tmp_path / "part" / "masks").glob("*.png"))) == 9
    monkeypatch.setattr(Dataset, "mask", real_mask)
    real_frame, decoded = Dataset.frame, []
    monkeypatch.setattr(Dataset, "frame", lambda self, i: decoded.append(i) or real_frame(self, i))
    fit_labels(root, tmp_path / "part", progress=False)
    assert decoded == list(range(9, N))  # the frames written before are fitted again, not decoded
    rows = (tmp_path / "part" / FIT_CSV).read_text().splitlines()
    assert [r.split(",")[0] for r in rows[1:]] == [str(i) for i in range(N)]
    for a, b in zip(_masks(tmp_path / "whole"), _masks(tmp_path / "part")):
        assert np.array_equal(a, b)


def test_bad_input(labelled, tmp_path):
    root, _ = labelled
    with pytest.raises(InputError, match="same folder"):
        fit_labels(root, root, progress=False)
    no_k = tmp_path / "noK"
    with DatasetWriter(no_k, {"width": W, "height": H, "fps": 30.0, "robot": "planar-snake-11"}) as w:
        w.write_frame(np.zeros((H, W, 3), np.uint8), np.zeros((H, W), bool))
    # no calibration: a phone's field of view is assumed, said; the empty label is kept
    with pytest.warns(SnaketrackWarning, match="--intrinsics"):
        assert fit_labels(no_k, tmp_path / "o", progress=False)["kept_label"] == 1
    distorted = tmp_path / "distorted.json"
    K = Dataset(root).meta["K"]
    distorted.write_text(json.dumps({"camera_matrix": K, "dist_coeffs": [-0.2, 0.05, 0, 0, 0]}))
    with pytest.raises(InputError, match="lens distortion"):
        fit_labels(root, tmp_path / "d", intrinsics=str(distorted), progress=False)
    with pytest.raises(InputError, match="agree-px"):
        FitConfig(agree_px=-1)
    with pytest.raises(InputError, match="trim-px"):
        FitConfig(keep_edge=True, trim_px=-1)
    done = tmp_path / "done"
    fit_labels(root, done, config=FitConfig(min_iou=1.0), progress=False)
    with pytest.raises(InputError, match="other labels or settings"):
        fit_labels(root, done, config=FitConfig(agree_px=3), progress=False)
    with pytest.raises(InputError, match="other labels or settings"):
        fit_labels(root, done, config=FitConfig(min_iou=1.0, keep_edge=True), progress=False)


def test_cli(labelled, tmp_path, capsys):
    root, _ = labelled
    code = cli.main(["fit-labels", str(root), "--out", str(tmp_path / "cli"), "--json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["frames"] == N and out["fitted"] + out["kept_label"] == N
    assert cli.main(["fit-labels", str(root), "--keep-edge", "--no-snap", "--out", str(tmp_path / "cli-trim")]) == 0
    assert f"0 replaced by the fitted silhouette and {N} trimmed to it" in capsys.readouterr().out
    for m, lab in zip(_masks(tmp_path / "cli-trim"), _masks(root)):
        assert not np.any(m & ~lab)


def test_while_labelling_the_silhouettes_moving_pixels_the_label_left_out_join_it(labelled):
    """A link the cut left out (the ground's colour) comes back where it moves; a part of it behind a still
    post stays out, and the moving cast shadow beside the robot, outside the silhouette, is not taken in.
    Neither trimming (which only removes) nor the replacement (the label grown by 2 px) brings a link back."""
    from snaketrack.labelling.fit_labels import LabelFitter
    from snaketrack.tracker.calib.camera import Camera

    root, truths = labelled
    ds = Dataset(root)
    fitter = LabelFitter(load_robot("planar-snake-11"), Camera.from_meta(ds.meta), 30.0, FitConfig(snap=False))
    iou_label, iou_joined = [], []
    for t in truths[:8]:
        ys, xs = np.nonzero(t)
        lo, hi = np.percentile(xs, [55, 70])
        link = t & (np.arange(W)[None, :] >= lo) & (np.arange(W)[None, :] < hi)  # a link missed by the cut
        post = link & (np.arange(H)[:, None] < np.median(ys[(xs >= lo) & (xs < hi)]))  # its half behind a post
        shadow = np.zeros_like(t)
        shadow[4:] = t[:-4]  # the cast shadow, moving with the robot
        res = fitter(t & ~link, moving=(t | shadow) & ~post)
        assert res.source in ("fit", "trim"), res
        assert not np.any(res.mask & post)  # still: left out
        assert np.count_nonzero(res.mask & ~dilate_mask(t, 1)) < 5  # no shadow beyond the edge
        assert np.count_nonzero(res.mask & link & ~post) > 0.6 * np.count_nonzero(link & ~post)
        iou_label.append(_iou(t & ~link, t))
        iou_joined.append(_iou(res.mask, t))
    assert np.mean(iou_joined) > np.mean(iou_label) + 0.03, (np.mean(iou_label), np.mean(iou_joined))


def test_the_fitted_backend_hands_the_fit_the_frames_moving_pixels():
    from snaketrack.labelling.fit_labels import FittedBackend, FittedFrame

    moving = np.zeros((6, 8), bool)
    moving[2:4, 3:6] = True

    class Cut:
        name = "grabcut"

        def set_image(self, rgb):
            self.rgb = rgb

        def predict(self, box, prior=None):
            return np.zeros(self.rgb.shape[:2], bool)

        def moving(self):
            return moving

    class Fitter:
        def __call__(self, label, frame=None, moving=None, index=None):
            self.seen = (frame, moving, index)
            return FittedFrame(label, "tracked", 1.0, "fit")

    fitter = Fitter()
    backend = FittedBackend(Cut(), fitter)
    rgb = np.zeros((6, 8, 3), np.uint8)
    backend.seek(5)  # the labeller seeks each source frame before labelling it
    backend.set_image(rgb)
    backend.polish(backend.predict(None))
    assert fitter.seen[0] is rgb and fitter.seen[1] is moving and fitter.seen[2] == 5


def test_a_model_fitted_wider_than_the_label_is_drawn_narrowed_by_its_edge_offset(labelled):
    """A robot file whose bodies are 1.4 times as wide as the robot filmed: the tracker's fit shrinks the outline
    by a negative edge offset, and the silhouette drawn with it (the default) explains the truth; drawn without
    it, the outline is too wide by the offset all round and the fit cannot use it."""
    import yaml

    from snaketrack.labelling.fit_labels import LabelFitter
    from snaketrack.models.robot import ROBOTS_DIR, robot_from_dict
    from snaketrack.tracker.calib.camera import Camera

    root, truths = labelled
    spec = yaml.safe_load((ROBOTS_DIR / "planar-snake-11.yaml").read_text())
    vis = spec["visual"]
    vis["body_radius"] = [1.4 * r for r in vis["body_radius"]]
    vis["housing_radius"] *= 1.4
    vis["cap_radius"] *= 1.4
    wide = robot_from_dict(spec)
    camera = Camera.from_meta(Dataset(root).meta)
    iou = {}
    for narrow in (False, True):
        fitter = LabelFitter(wide, camera, 30.0, FitConfig(snap=False, replace_iou=0.0, narrow_by_offset=narrow))
        res = [fitter(t) for t in truths[:4]]
        assert fitter.tracker.offset < -0.5
        iou[narrow] = np.mean([r.iou for r in res])
        if narrow:
            assert all(r.source == "fit" for r in res)
            assert np.mean([_iou(r.mask, t) for r, t in zip(res, truths)]) > 0.9
    assert iou[True] > 0.9 and iou[False] < 0.8, iou


def test_a_label_the_fit_cannot_explain_still_takes_in_the_silhouettes_moving_pixels(labelled):
    """A cut that lost the robot's far half (IoU with the silhouette below ``min_iou``: kept, not fitted) while
    the tracker holds the whole body: the half comes back where it moves, and nothing moving off the body."""
    from snaketrack.labelling.fit_labels import LabelFitter
    from snaketrack.tracker.calib.camera import Camera

    root, truths = labelled
    fitter = LabelFitter(load_robot("planar-snake-11"), Camera.from_meta(Dataset(root).meta), 30.0,
                         FitConfig(snap=False))
    for t in truths[:4]:
        fitter(t, moving=t)
    t = truths[4]
    xs = np.nonzero(t)[1]
    half = t & (np.arange(W)[None, :] >= np.percentile(xs, 55))
    stone = np.zeros_like(t)
    stone[:12, :12] = True  # something else that moves, far from the robot
    res = fitter(t & ~half, moving=t | stone)
    assert res.source == "label" and res.status == "tracked", res
    assert fitter.joined >= 1
    assert np.count_nonzero(res.mask & half) > 0.6 * np.count_nonzero(half)
    assert not np.any(res.mask & stone)
    assert _iou(res.mask, t) > _iou(t & ~half, t) + 0.2


def test_by_default_the_one_pixel_rim_a_cut_left_out_where_the_robot_moves_joins_the_label(labelled):
    """A cut that drew its edge one pixel inside the body along part of the robot (a grey link's rim on
    gravel): the rim moves with the robot and lies in the silhouette, and the default joins every such pixel;
    an opening by a 3 px square (``join_moving_px`` 3) keeps the one-pixel rim out. The label is trimmed, not
    replaced (``keep_edge``), so only the join can add to it."""
    from snaketrack.labelling.fit_labels import LabelFitter
    from snaketrack.tracker.calib.camera import Camera

    root, truths = labelled
    camera = Camera.from_meta(Dataset(root).meta)
    back = {}
    for piece_px in ("default", 3):
        config = FitConfig(snap=False, keep_edge=True)
        if piece_px != "default":
            config = FitConfig(snap=False, keep_edge=True, join_moving_px=piece_px)
        fitter = LabelFitter(load_robot("planar-snake-11"), camera, 30.0, config)
        got = lost = 0
        for t in truths[:8]:
            xs = np.nonzero(t)[1]
            inner = cv2.erode(t.view(np.uint8), np.ones((3, 3), np.uint8)) > 0
            span = (np.arange(W)[None, :] >= np.percentile(xs, 40)) & (np.arange(W)[None, :] < np.percentile(xs, 80))
            rim = t & ~inner & span
            res = fitter(t & ~rim, moving=t)
            assert np.count_nonzero(res.mask & ~dilate_mask(t, 1)) < 5  # nothing beyond the body's edge
            got += np.count_nonzero(res.mask & rim)
            lost += np.count_nonzero(rim)
        back[piece_px] = got / lost
    # the model's capsules lie inside the body's bulging housings, so not all of the rim is in the silhouette
    assert back["default"] > 0.4 and back[3] < 0.1, back
