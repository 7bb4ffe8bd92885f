"""The labeller's propagation, quality guard and resume, with deterministic stand-in predictors."""
import csv
import json

import cv2
import numpy as np
import pytest

from snaketrack.datasets.boxes import Box, dilate_mask, mask_to_box
from snaketrack.datasets.layout import Dataset
from snaketrack.datasets.toy import toy_video, write_toy_dataset
from snaketrack.datasets.video import open_frames
from snaketrack.errors import InputError, StateError
from snaketrack.labelling.label import LabelConfig, Labeller, label_video
from snaketrack.masks import mask_iou

W, H = 120, 90


@pytest.fixture(scope="module")
def toy():
    return toy_video(16, W, H, seed=4)


class Oracle:
    """Answers a box prompt with the truth mask inside the box; records prompts and set_image calls."""

    name = "oracle"

    def __init__(self, frames, truth, fail_at=None, edits=None):
        self.frames, self.truth = frames, truth
        self.fail_at, self.edits = fail_at, edits or {}
        self.boxes, self.images = [], []

    def set_image(self, rgb):
        # frames may come back from JPEG: the nearest stored frame is this one
        self.i = int(np.argmin([np.abs(f.astype(int) - rgb).mean() for f in self.frames]))
        if self.i == self.fail_at:
            raise KeyboardInterrupt
        self.images.append(self.i)

    def predict(self, box, prior=None):
        self.boxes.append(box)
        if self.i in self.edits:
            return self.edits[self.i](self.truth[self.i])
        return self.truth[self.i] & box.to_mask(W, H)

    def reset_image(self):
        pass


def test_prompt_is_previous_mask_dilated_box(toy):
    frames, truth = toy
    oracle = Oracle(frames, truth)
    lab = Labeller(oracle, LabelConfig(dilate_px=6))
    user = mask_to_box(truth[0]).expand(2)
    labels = [lab.start(frames[0], user)] + [lab.step(f) for f in frames[1:]]
    assert oracle.boxes[0] == user.clip(W, H)
    for t in range(1, len(frames)):  # seed eqs. 3-4: box of the dilated previous mask
        expect = mask_to_box(dilate_mask(labels[t - 1].mask, 6)).clip(W, H)
        assert oracle.boxes[t] == expect
    assert all(mask_iou(l.mask, m) == 1.0 for l, m in zip(labels, truth))
    assert oracle.images == list(range(len(frames)))  # set_image once per frame


def test_without_dilation_the_moving_robot_gets_cut(toy):
    frames, truth = toy
    lab = Labeller(Oracle(frames, truth), LabelConfig(dilate_px=0, min_overlap=0.0, max_area_ratio=100))
    labels = [lab.start(frames[0], mask_to_box(truth[0]))] + [lab.step(f) for f in frames[1:]]
    ious = [mask_iou(l.mask, m) for l, m in zip(labels, truth)]
    assert ious[0] == 1.0 and min(ious[1:]) < 0.9  # a tight box loses the parts that moved out


def test_quality_guard_flags_and_recovers(toy):
    frames, truth = toy
    edits = {3: lambda m: np.zeros_like(m),                                   # empty
             5: lambda m: dilate_mask(m, 6),                                  # area jump
             7: lambda m: np.roll(m, (H // 2, 0), axis=(0, 1)) & ~dilate_mask(m, 20)}  # jumped away
    oracle = Oracle(frames, truth, edits=edits)
    lab = Labeller(oracle, LabelConfig(dilate_px=5))
    labels = [lab.start(frames[0], mask_to_box(truth[0]).expand(3))] + [lab.step(f) for f in frames[1:]]
    flags = {i: l.flags for i, l in enumerate(labels) if l.flags}
    assert flags[3] == ("empty",) and "area_jump" in flags[5] and "low_overlap" in flags[7]
    assert set(flags) == {3, 5, 7}
    # after the flagged frame 3, frame 4 is prompted from frame 2's mask, dilated twice as far
    assert oracle.boxes[4] == mask_to_box(dilate_mask(labels[2].mask, 10)).clip(W, H)
    assert mask_iou(labels[8].mask, truth[8]) == 1.0


def test_step_before_start_is_a_state_error(toy):
    with pytest.raises(StateError, match="start"):
        Labeller(Oracle(*toy)).step(toy[0][0])


def _rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_report_and_contact_sheet(tmp_path, toy):
    frames, truth = toy
    src_dir = write_toy_dataset(tmp_path / "src", 10, W, H, seed=4)
    oracle = Oracle(frames[:10], truth[:10], edits={4: lambda m: np.zeros_like(m)})
    res = label_video(open_frames(src_dir), tmp_path / "out", oracle, mask_to_box(truth[0]).expand(3),
                      progress=False)
    rep = json.loads((tmp_path / "out" / "labels_report.json").read_text())
    assert rep["frames"] == 10 and rep["flagged_count"] == 1 == res.flagged
    assert rep["flagged"][0]["frame"] == 4 and rep["flagged"][0]["flags"] == ["empty"]
    sheet = cv2.imread(str(tmp_path / "out" / "labels_flagged.png"))
    assert sheet is not None and sheet.shape[1] == 242
    ds = Dataset(tmp_path / "out")
    assert len(ds) == 10 and ds.meta["labelling"]["backend"] == "oracle"
    assert all(np.array_equal(ds.mask(i), truth[i]) for i in (0, 3, 9))


def test_resume_after_interruption_equals_uninterrupted_run(tmp_path, toy):
    frames, truth = toy
    src = open_frames(write_toy_dataset(tmp_path / "src", 12, W, H, seed=4))
    box = mask_to_box(truth[0]).expand(3)
    edits = {2: lambda m: np.zeros_like(m)}  # a flagged frame before the cut, to restore from
    label_video(src, tmp_path / "ref", Oracle(frames, truth, edits=edits), box, progress=False)

    with pytest.raises(KeyboardInterrupt):
        label_video(src, tmp_path / "run", Oracle(frames, truth, fail_at=6, edits=edits), box, progress=False)
    assert len(_rows(tmp_path / "run" / "labels.csv")) == 6
    assert len(Dataset(tmp_path / "run")) == 6
    # a crash between writing frame 5's mask and its CSV row: that frame is redone
    rows = _rows(tmp_path / "run" / "labels.csv")
    with open(tmp_path / "run" / "labels.csv", "w", newline="") as f:
        w = csv.DictWriter(f, list(rows[0]))
        w.writeheader()
        w.writerows(rows[:5])
    oracle = Oracle(frames, truth, edits=edits)
    res = label_video(src, tmp_path / "run", oracle, box, progress=False)
    assert oracle.images == list(range(5, 12))
    assert res.frames == 12 and res.written == 7
    assert _rows(tmp_path / "run" / "labels.csv") == _rows(tmp_path / "ref" / "labels.csv")
    a, b = Dataset(tmp_path / "run"), Dataset(tmp_path / "ref")
    assert all(np.array_equal(a.mask(i), b.mask(i)) for i in range(12))
    # running once more does nothing
    again = Oracle(frames, truth)
    assert label_video(src, tmp_path / "run", again, box, progress=False).written == 0 and again.images == []


def test_stride_maps_dataset_to_source_frames(tmp_path, toy):
    frames, truth = toy
    src = open_frames(write_toy_dataset(tmp_path / "src", 10, W, H, seed=4))
    res = label_video(src, tmp_path / "out", Oracle(frames, truth), mask_to_box(truth[0]).expand(3),
                      stride=3, progress=False)
    assert res.frames == 4
    assert [int(r["source_frame"]) for r in _rows(tmp_path / "out" / "labels.csv")] == [0, 3, 6, 9]
    with pytest.raises(InputError, match="stride"):
        label_video(src, tmp_path / "out", Oracle(frames, truth), Box(1, 1, 9, 9), stride=2, progress=False)
    for bad in (0, -1):
        with pytest.raises(InputError, match="--max-frames"):
            label_video(src, tmp_path / "none", Oracle(frames, truth), Box(1, 1, 9, 9), max_frames=bad,
                        progress=False)
    assert not (tmp_path / "none").exists()


def test_refuses_a_folder_that_is_not_a_labelling_run(tmp_path, toy):
    root = write_toy_dataset(tmp_path / "ds", 3, W, H)
    with pytest.raises(InputError, match="labels.csv"):
        label_video(open_frames(root), root, Oracle(*toy), Box(1, 1, 9, 9), progress=False)


class PolishingOracle(Oracle):
    """An oracle whose written label is its answer eroded by one pixel (a stand-in for outline smoothing)."""

    def polish(self, mask):
        return cv2.erode(mask.astype(np.uint8), np.ones((3, 3), np.uint8)) > 0


def test_polished_label_is_written_but_the_raw_mask_propagates(toy):
    frames, truth = toy
    lab = Labeller(PolishingOracle(frames, truth), LabelConfig(dilate_px=8))
    first = lab.start(frames[0], mask_to_box(truth[0]).expand(3))
    assert np.array_equal(first.raw_mask, truth[0])
    assert np.array_equal(first.mask, PolishingOracle.polish(None, truth[0]))
    assert first.area_px == truth[0].sum()               # the guard judges the raw mask
    assert lab.next_box(W, H) == mask_to_box(dilate_mask(truth[0], 8))  # and the prompt comes from it


def test_resume_with_a_polishing_backend_equals_uninterrupted_run(tmp_path, toy):
    frames, truth = toy
    src = open_frames(write_toy_dataset(tmp_path / "src", 12, W, H, seed=4))
    box = mask_to_box(truth[0]).expand(3)
    edits = {2: lambda m: np.zeros_like(m)}
    ref = PolishingOracle(frames, truth, edits=edits)
    label_video(src, tmp_path / "ref", ref, box, progress=False)
    with pytest.raises(KeyboardInterrupt):
        label_video(src, tmp_path / "run", PolishingOracle(frames, truth, fail_at=7, edits=edits), box,
                    progress=False)
    again = PolishingOracle(frames, truth, edits=edits)
    label_video(src, tmp_path / "run", again, box, progress=False)
    assert again.boxes == ref.boxes[7:]                  # the same prompts as without the interruption
    assert _rows(tmp_path / "run" / "labels.csv") == _rows(tmp_path / "ref" / "labels.csv")
    # without the resume file the prompt would come from the polished (eroded) label on disk
    (tmp_path / "run" / "labels_resume.npz").unlink()
    rows = _rows(tmp_path / "run" / "labels.csv")
    with open(tmp_path / "run" / "labels.csv", "w", newline="") as f:
        w = csv.DictWriter(f, list(rows[0]))
        w.writeheader()
        w.writerows(rows[:7])
    third = PolishingOracle(frames, truth, edits=edits)
    label_video(src, tmp_path / "run", third, box, progress=False)
    assert third.boxes[0] != ref.boxes[7]


def _drifting(truth, keep=(0.75, 0.55, 0.4, 0.3), first=2):
    """Edits that lose one end of the robot a little more each frame from ``first`` on (each step passes
    the guard against the one before), then give the whole robot again, wherever the prompt box lies."""
    def cut(frac):
        def edit(m):
            cols = np.flatnonzero(m.any(axis=0))
            order = np.cumsum(m[:, cols].sum(axis=0)) / m.sum()
            return m & (np.arange(m.shape[1]) <= cols[np.searchsorted(order, frac)])
        return edit
    edits = {i: (lambda m: m) for i in range(first + len(keep), len(truth))}
    return edits | {first + k: cut(f) for k, f in enumerate(keep)}


@pytest.mark.parametrize("reanchor", [0, 3])
def test_after_a_slow_drift_the_whole_robot_is_taken_back(toy, reanchor):
    frames, truth = toy
    oracle = Oracle(frames, truth, edits=_drifting(truth))
    lab = Labeller(oracle, LabelConfig(dilate_px=15, reanchor_frames=reanchor))
    labels = [lab.start(frames[0], mask_to_box(truth[0]).expand(3))] + [lab.step(f) for f in frames[1:]]
    flags = {i: l.flags for i, l in enumerate(labels) if l.flags}
    assert not any(flags.get(i) for i in range(6))  # the drift passes the guard frame to frame
    assert flags[6] == ("area_jump",) and flags[7] == ("area_jump",)  # the whole robot, against a fifth of it
    if reanchor:
        assert set(flags) == {6, 7}  # the third agreeing frame is taken as good, and the rest follow
        assert all(mask_iou(labels[i].mask, truth[i]) == 1.0 for i in range(8, len(frames)))
    else:
        assert set(flags) >= set(range(6, len(frames)))  # never again


def test_a_streak_of_masks_that_disagree_is_not_taken(toy):
    frames, truth = toy
    edits = _drifting(truth)
    edits[7] = lambda m: dilate_mask(m, 5)  # more than twice the area of frame 6's

    lab = Labeller(Oracle(frames, truth, edits=edits), LabelConfig(dilate_px=15, reanchor_frames=3))
    labels = [lab.start(frames[0], mask_to_box(truth[0]).expand(3))] + [lab.step(f) for f in frames[1:]]
    flags = {i: l.flags for i, l in enumerate(labels) if l.flags}
    assert labels[7].area_px > 2 * labels[6].area_px
    assert set(flags) == {6, 7, 8, 9}  # frame 7 agrees with neither neighbour: the streak restarts at 8


class ThirdOracle(Oracle):
    """An oracle whose written label keeps only the left third of its answer: on disk, a streak's masks
    would no longer agree with each other, so a resume must read the unpolished ones."""

    def polish(self, mask):
        cols = np.flatnonzero(mask.any(axis=0))
        return mask & (np.arange(mask.shape[1]) < cols[0] + (cols[-1] - cols[0]) / 3) if cols.size else mask


@pytest.mark.parametrize("oracle", [Oracle, ThirdOracle])
def test_resume_in_a_streak_equals_uninterrupted_run(tmp_path, toy, oracle):
    frames, truth = toy
    src = open_frames(write_toy_dataset(tmp_path / "src", 16, W, H, seed=4))
    box = mask_to_box(truth[0]).expand(3)
    config = LabelConfig(dilate_px=15, reanchor_frames=3)
    label_video(src, tmp_path / "ref", oracle(frames, truth, edits=_drifting(truth)), box, config, progress=False)
    with pytest.raises(KeyboardInterrupt):
        label_video(src, tmp_path / "run", oracle(frames, truth, fail_at=7, edits=_drifting(truth)), box, config,
                    progress=False)
    label_video(src, tmp_path / "run", oracle(frames, truth, edits=_drifting(truth)), box, config, progress=False)
    ref = _rows(tmp_path / "ref" / "labels.csv")
    assert _rows(tmp_path / "run" / "labels.csv") == ref
    assert [r["flags"] for r in ref[6:9]] == ["area_jump", "area_jump", ""]


def test_the_label_command_takes_the_reanchoring_count(tmp_path, capsys):
    from snaketrack.cli import main
    from snaketrack.io import read_json

    truth = write_toy_dataset(tmp_path / "truth", 4, W, H, seed=4)
    box = str(mask_to_box(Dataset(truth).mask(0)).expand(3))
    out = tmp_path / "labels"
    assert main(["label", str(truth), "--box", box, "--backend", "grabcut", "--reanchor", "0", "--out", str(out)]) == 0
    assert read_json(out / "meta.json")["labelling"]["reanchor_frames"] == 0
    assert main(["label", str(truth), "--box", box, "--backend", "grabcut", "--reanchor", "-1",
                 "--out", str(tmp_path / "bad")]) == 2
    assert "--reanchor -1" in capsys.readouterr().err


def test_the_report_lists_and_shows_the_labels_the_fit_kept_as_cut(tmp_path):
    """From fit.csv: the counts of each kind of written mask, the frames kept as cut and their contact sheet,
    which goes when a rerun's fit.csv keeps none."""
    from snaketrack.datasets.label_report import CSV_COLUMNS, FIT_COLUMNS, FIT_CSV, KEPT_SHEET, write_report
    from snaketrack.datasets.layout import DatasetWriter
    from snaketrack.io import CsvAppender

    out = tmp_path / "labels"
    rgb = np.full((24, 32, 3), 90, np.uint8)
    mask = np.zeros((24, 32), bool)
    mask[8:16, 4:28] = True
    with DatasetWriter(out, {"fps": 30.0, "width": 32, "height": 24}) as w:
        for _ in range(4):
            w.write_frame(rgb, mask)
    with CsvAppender(out / "labels.csv", CSV_COLUMNS) as log:
        for i in range(4):
            log.write({"frame": i, "source_frame": i, "box_x": 4, "box_y": 8, "box_w": 24, "box_h": 8,
                       "area_px": 192, "area_ratio": "", "overlap": "", "iou_prev": "", "flags": ""})

    def fit(sources):
        with CsvAppender(out / FIT_CSV, FIT_COLUMNS) as log:
            for i, src in enumerate(sources):
                log.write({"frame": i, "status": "tracked", "iou_fit": 0.5 if src == "label" else 0.9,
                           "source": src, "area_label_px": 192, "area_fitted_px": 190})

    fit(["fit", "label", "trim", "label"])
    report = write_report(out)["fit"]
    assert report == {"replaced": 1, "trimmed": 1, "kept": 2, "kept_frames": [1, 3], "contact_sheet": KEPT_SHEET,
                      "gate_counts": {}, "gated_frames": 0}
    assert cv2.imread(str(out / KEPT_SHEET)).shape[1] == 2 * (240 + 2)  # two tiles in a row
    fit(["fit", "fit", "trim", "fit"])
    assert write_report(out)["fit"]["kept_frames"] == [] and not (out / KEPT_SHEET).exists()


def test_the_report_counts_the_gates_reasons_and_reads_a_fit_csv_without_them(tmp_path):
    """fit.csv's ``gate`` column counted per reason; a fit.csv written without the column reads as ungated."""
    from snaketrack.datasets.label_report import CSV_COLUMNS, FIT_COLUMNS, FIT_CSV, read_label_rows, write_report
    from snaketrack.datasets.layout import DatasetWriter
    from snaketrack.io import CsvAppender

    out = tmp_path / "labels"
    with DatasetWriter(out, {"fps": 30.0, "width": 32, "height": 24}) as w:
        for _ in range(3):
            w.write_frame(np.full((24, 32, 3), 90, np.uint8), np.ones((24, 32), bool))
    with CsvAppender(out / "labels.csv", CSV_COLUMNS) as log:
        for i in range(3):
            log.write({"frame": i, "source_frame": i, "box_x": 0, "box_y": 0, "box_w": 32, "box_h": 24,
                       "area_px": 768, "area_ratio": "", "overlap": "", "iou_prev": "", "flags": ""})
    with CsvAppender(out / FIT_CSV, FIT_COLUMNS) as log:
        for i, gate in enumerate(["", "cut_off_model+recut", "cut_off_model"]):
            log.write({"frame": i, "status": "tracked", "iou_fit": 0.9, "source": "fit", "area_label_px": 768,
                       "area_fitted_px": 700, "gate": gate})
    rep = write_report(out)["fit"]
    assert rep["gate_counts"] == {"cut_off_model": 2, "recut": 1} and rep["gated_frames"] == 2
    with CsvAppender(out / FIT_CSV, FIT_COLUMNS[:-1]) as log:  # rewritten without the column
        log.write({"frame": 0, "status": "tracked", "iou_fit": 0.9, "source": "fit", "area_label_px": 768,
                   "area_fitted_px": 700})
    assert [r["gate"] for r in read_label_rows(out / FIT_CSV, FIT_COLUMNS)] == [""]
