"""Long videos in chunks: the ranges, the stitching rule on hand-made tracks, and a chunked track of a
short clip against the sequential one."""
import numpy as np
import pytest

from snaketrack.batch.chunks import chunk_ranges, stitch
from snaketrack.errors import InputError

from posed_dataset import write_posed_dataset


def _rows(frames, q, status="tracked"):
    return [{"frame": f, "q_1": q(f), "base_x": 0.0, "base_y": 0.0, "base_z": 2.0, "status": status}
            for f in frames]


def test_ranges_cover_every_frame_with_the_overlap_in_chunks_of_equal_length():
    assert chunk_ranges(90, 3, 10) == [(0, 37), (27, 63), (53, 90)]
    for n, k, overlap in [(600, 2, 30), (601, 4, 7), (1000, 7, 30), (97, 1, 5)]:
        ranges = chunk_ranges(n, k, overlap)
        assert ranges[0][0] == 0 and ranges[-1][1] == n and len(ranges) == k
        assert all(b[0] == a[1] - overlap for a, b in zip(ranges, ranges[1:]))  # each overlaps the one before
        lengths = [b - a for a, b in ranges]
        assert max(lengths) - min(lengths) <= 1
    with pytest.raises(InputError, match="too short"):
        chunk_ranges(30, 3, 10)


def test_the_seam_is_where_the_chunks_agree_best_in_the_overlaps_second_half():
    early = _rows(range(0, 50), lambda f: 0.01 * f)
    # the later chunk warms up on 40..44 (far off), then agrees exactly at 47
    late = _rows(range(40, 100), lambda f: 0.01 * f + (0.5 if f < 45 else 0.0 if f == 47 else 0.02))
    rows, seams = stitch([early, late], n_joints=1)
    assert [r["frame"] for r in rows] == list(range(100))
    assert seams[0].frame == 47 and seams[0].agreed
    assert rows[46] is early[46] and rows[47] is late[7]


def test_chunks_that_disagree_keep_the_earlier_one_through_the_overlap():
    early = _rows(range(0, 50), lambda f: 0.0)
    late = _rows(range(40, 100), lambda f: 1.0)  # e.g. read from the other end
    rows, seams = stitch([early, late], n_joints=1)
    assert seams[0].frame == 49 and not seams[0].agreed
    assert [r["q_1"] for r in rows[:49]] == [0.0] * 49 and rows[49]["q_1"] == 1.0


def test_a_chunked_track_stitches_into_the_sequential_ones_accuracy(tmp_path):
    import ray

    from snaketrack.batch.chunks import track_chunked
    from snaketrack.tracker.run.loop import RunOptions, track_source
    from snaketrack.tracker.run.pipeline import PipelineConfig

    ds = write_posed_dataset(tmp_path / "ds", 24, seed=6)
    config = PipelineConfig(refine_steps=4, hold_frames=0)
    try:
        chunked = track_chunked(ds, tmp_path / "chunked", chunks=2, overlap=6, config=config, workers=2)
    finally:
        ray.shutdown()
    whole = track_source(ds, tmp_path / "whole", config=config,
                         options=RunOptions(video=False, plots=False, progress=False))
    assert chunked["frames"] == 24 and chunked["seams_disagree"] == 0
    (_, first_end), (second_start, _) = chunk_ranges(24, 2, 6)
    assert second_start + 3 <= chunked["seams"][0]["frame"] < first_end  # the overlap's second half
    from snaketrack.io import read_csv_columns

    frames = read_csv_columns(tmp_path / "chunked" / "track.csv")["frame"]
    assert np.array_equal(frames, np.arange(24))
    for key in ("joint_error_rad", "base_position_error_m"):
        assert chunked[key] <= 1.1 * whole[key] + 1e-3, key


def test_a_chunked_track_that_needs_an_up_direction_fails_before_ray_starts(tmp_path):
    import ray

    from snaketrack.batch.chunks import track_chunked
    from snaketrack.tracker.run.pipeline import PipelineConfig

    ds = write_posed_dataset(tmp_path / "ds", 24, seed=6)
    with pytest.raises(InputError, match="up direction"):
        track_chunked(ds, tmp_path / "o", chunks=2, overlap=6, config=PipelineConfig(static_camera=True))
    assert not ray.is_initialized() and not (tmp_path / "o").exists()


def test_a_chunk_that_starts_while_the_robot_is_hidden_waits_for_it_and_the_stitch_keeps_the_earlier_one(tmp_path):
    """The later chunk's first frames have no robot: they are lost with no pose (not a failed task), it starts
    once the robot is seen, and the seam falls where both chunks track it."""
    from snaketrack.batch.chunks import track_range
    from snaketrack.tracker.run.pipeline import PipelineConfig

    ds = write_posed_dataset(tmp_path / "ds", 24, seed=6)
    config = PipelineConfig(refine_steps=4, hold_frames=0, hidden=((12, 16),))
    early = track_range(str(ds), None, None, "truth", config, None, 0, 18)
    late = track_range(str(ds), None, None, "truth", config, None, 12, 24)
    assert [r["status"] for r in late["rows"][:4]] == ["lost"] * 4 and np.isnan(late["rows"][0]["q_1"])
    assert all(r["status"] == "tracked" for r in late["rows"][4:])
    assert [r["status"] for r in early["rows"][12:16]] == ["coasting"] * 4  # the settled chunk coasts through
    rows, seams = stitch([early["rows"], late["rows"]], early["dof"])
    assert [r["frame"] for r in rows] == list(range(24)) and seams[0].frame in (16, 17) and seams[0].agreed
    assert not any(np.isnan(r["q_1"]) for r in rows)
