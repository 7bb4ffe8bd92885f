"""Mask corruption: exact disc morphology without noise, rates, determinism."""
import cv2
import numpy as np
import pytest
from scipy import ndimage

from snaketrack.errors import InputError
from snaketrack.tracker.run.corrupt import CorruptionConfig, MaskCorruptor, corrupt_mask, signed_distance


def _snake_mask(h=120, w=200):
    m = np.zeros((h, w), np.uint8)
    pts = np.array([[20 + 16 * i, 60 + 25 * np.sin(i / 2.0)] for i in range(11)], np.int32)
    cv2.polylines(m, [pts], False, 1, thickness=9)
    return m > 0


def _disc(r):
    k = int(np.floor(r))
    y, x = np.mgrid[-k:k + 1, -k:k + 1]
    return x * x + y * y <= r * r


def _iou(a, b):
    return (a & b).sum() / max((a | b).sum(), 1)


@pytest.mark.parametrize("r", [1.0, 1.5, 2.5])
def test_bias_without_noise_is_disc_erosion_or_dilation(r):
    m = _snake_mask()
    cfg = CorruptionConfig(bias_min_px=r, bias_max_px=r, ragged_std_px=0.0, missing_chunk_prob=0, false_blob_prob=0)
    c = MaskCorruptor(seed=5, config=cfg)
    seen = set()
    for i in range(8):
        out = c(m, i)
        if c.last_events["bias_px"] > 0:
            ref = ndimage.binary_erosion(m, structure=_disc(r), border_value=1)
            assert out.sum() < m.sum() and not (out & ~m).any()
        else:
            ref = ndimage.binary_dilation(m, structure=_disc(r))
            assert out.sum() > m.sum() and not (m & ~out).any()
        np.testing.assert_array_equal(out, ref)
        seen.add(c.last_events["bias_px"] > 0)
    assert seen == {True, False}


def test_signed_distance_against_scipy_edt():
    m = _snake_mask()
    d = signed_distance(m)
    ref = np.where(m, ndimage.distance_transform_edt(m), -ndimage.distance_transform_edt(~m))
    np.testing.assert_allclose(d, ref, atol=1e-4)


def test_default_corruption_is_realistic_and_deterministic():
    m = _snake_mask()
    c = MaskCorruptor(seed=3)
    ious = [_iou(c(m, i), m) for i in range(30)]
    assert 0.3 < np.mean(ious) < 0.95  # a 9 px body with 1-3 px bias
    # same seed, same bytes, in any order; another seed differs
    a = [c(m, i) for i in (4, 2, 9)]
    b = [MaskCorruptor(seed=3)(m, i) for i in (9, 2, 4)][::-1]
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(c(m, 4), corrupt_mask(m, 4, seed=4))
    # ragged: the boundary is not the clean disc morphology
    r = c(m, 7)
    e = c.last_events["bias_px"]
    clean = MaskCorruptor(3, CorruptionConfig(ragged_std_px=0.0))(m, 7)
    assert not np.array_equal(r, clean) and _iou(r, clean) > 0.6, e


def test_event_rates_and_effects():
    m = np.zeros((40, 60), bool)
    m[15:25, 5:55] = True
    c = MaskCorruptor(seed=11)
    n = 3000
    chunks = blobs = 0
    for i in range(n):
        out = c(m, i)
        ev = c.last_events
        chunks += ev["missing_chunk"]
        blobs += ev["false_blob"]
        if ev["false_blob"] and not ev["missing_chunk"] and ev["bias_px"] > 0:
            # a false blob adds pixels outside the (eroded) body somewhere, or overlaps it
            clean = MaskCorruptor(11, CorruptionConfig(false_blob_prob=0))(m, i)
            assert out.sum() >= clean.sum()
    # binomial: 5 % and 2 % of 3000 frames, 4 sigma bounds
    assert abs(chunks - 150) < 4 * np.sqrt(3000 * 0.05 * 0.95)
    assert abs(blobs - 60) < 4 * np.sqrt(3000 * 0.02 * 0.98)


def test_missing_chunk_removes_body():
    m = _snake_mask()
    cfg_all = CorruptionConfig(missing_chunk_prob=1.0, false_blob_prob=0.0, ragged_std_px=0.0)
    cfg_none = CorruptionConfig(missing_chunk_prob=0.0, false_blob_prob=0.0, ragged_std_px=0.0)
    a = MaskCorruptor(2, cfg_all)(m, 0)
    b = MaskCorruptor(2, cfg_none)(m, 0)
    assert not (a & ~b).any() and a.sum() < b.sum()


def test_empty_mask_and_bad_input():
    e = np.zeros((30, 40), bool)
    c = MaskCorruptor(0, CorruptionConfig(false_blob_prob=0.0))
    assert not c(e, 1).any()
    with pytest.raises(InputError):
        c(np.zeros((2, 3, 4)), 0)
    with pytest.raises(InputError):
        CorruptionConfig(missing_chunk_prob=2.0)
    with pytest.raises(InputError):
        CorruptionConfig(bias_min_px=3, bias_max_px=1)


def test_iou_ceiling_recovers_a_pure_bias_and_bounds_the_plain_iou():
    """best_offset_iou against scipy's disc morphology: a pure bias is undone, a ragged edge is not."""
    from snaketrack.tracker.run.corrupt import best_offset_iou

    m = _snake_mask()
    for r, grow in ((2.0, False), (1.5, True), (3.0, True)):
        biased = ndimage.binary_dilation(m, structure=_disc(r)) if grow else \
            ndimage.binary_erosion(m, structure=_disc(r), border_value=1)
        iou, off = best_offset_iou(m, biased)
        assert iou > 0.99 and off == pytest.approx(r if grow else -r, abs=0.25)
        assert _iou(m, biased) < 0.8  # the offset is what the bias costs a 9 px body
    c = MaskCorruptor(seed=3)
    for i in range(6):
        out = c(m, i)
        iou, off = best_offset_iou(m, out)
        assert _iou(m, out) <= iou < 1.0
        if abs(c.last_events["bias_px"]) >= 1.5 and not (c.last_events["missing_chunk"] or c.last_events["false_blob"]):
            assert np.sign(off) == -np.sign(c.last_events["bias_px"])  # + bias erodes, + offset grows
    assert np.isnan(best_offset_iou(np.zeros_like(m), m)[0])
    with pytest.raises(InputError):
        best_offset_iou(m, m[:, :-1])


def test_iou_ceiling_of_a_dataset(tmp_path):
    """measure_iou_ceiling on a written dataset: a 9 px body, the ceiling above the plain IoU; and
    ``snaketrack bench iou-ceiling`` run as a command prints it."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    from snaketrack.bench.ceiling import measure_iou_ceiling
    from snaketrack.datasets.layout import DatasetWriter
    from snaketrack.errors import MissingFileError

    m = _snake_mask()
    meta = {"K": [[300.0, 0, 99.5], [0, 300.0, 59.5], [0, 0, 1]], "width": 200, "height": 120, "fps": 30.0,
            "robot": "planar-snake-11", "scene": "static", "seed": 4}
    with DatasetWriter(tmp_path / "ds", meta, masks=True, truth=False) as w:
        for i in range(6):
            w.write_frame(np.full((120, 200, 3), 90, np.uint8), m if i != 2 else np.zeros_like(m), None)
    res = measure_iou_ceiling(tmp_path / "ds", step=1)
    assert res["frames"] == 5  # the empty frame is skipped
    assert res["iou_plain"] < res["iou_ceiling"] < 1.0
    assert res["body_width_px"] == pytest.approx(9.0, abs=1.5)
    c = MaskCorruptor(seed=4)
    direct = [_iou(m, c(m, i)) for i in (0, 1, 3, 4, 5)]
    assert res["iou_plain"] == pytest.approx(np.mean(direct), rel=1e-9)
    with pytest.raises(MissingFileError, match="not a dataset"):
        measure_iou_ceiling(tmp_path)

    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-m", "snaketrack", "bench", "iou-ceiling", str(tmp_path / "ds")],
                          capture_output=True, text=True, cwd=root, timeout=120)
    assert done.returncode == 0, done.stderr
    # the same figures; a float may differ in its last bit between two processes (summation order)
    printed = json.loads(done.stdout)["datasets"][0]
    assert printed.keys() == res.keys()
    for k, v in res.items():
        assert printed[k] == (v if isinstance(v, str) else pytest.approx(v, rel=1e-12)), k
