"""What the tracker's objective leaves of the pose error when it starts at the truth: the floor under its errors.

For each dataset with truth (``snaketrack sim video``), every ``--step``-th
frame's mask is corrupted as ``snaketrack track --corrupt-masks`` does
(:class:`snaketrack.tracker.corrupt.MaskCorruptor`, seeded by the dataset's
seed; ``--clean``: the truth mask itself) and the tracker's per-frame
refinement (:meth:`snaketrack.tracker.tracker.Tracker.fit`, with its
occlusion and cut weighting) is started at the true pose, with the prediction
it is held to also at the true pose, and ``--up sim-imu`` as in the benchmark
(no ground-height prior). Where it settles is the pose the mask, the model and
the priors prefer near the truth: a tracker that started every frame at the
truth would still be off by this much. The frames it needs are independent,
so no error carries from one frame to the next.

Prints one JSON line per dataset: ``floor_joint_error_rad`` (mean per-joint
absolute error), ``floor_base_error_m``, ``floor_iou`` (against the mask the
refinement saw). With ``--track DIR`` (``DIR/<dataset name>/track.csv``) also,
on the same frames, the track's own ``track_joint_error_rad``,
``track_base_error_m`` and ``track_iou``, and ``refit_iou``: the same
refinement started at the track's pose. When ``refit_iou`` is about
``floor_iou`` the objective does not tell the track's pose from the truth's,
and the error between them is beyond what the masks show.

    .venv/bin/python scripts/measure_pose_floor.py /work/data/handheld-arcsnake-s0 [...] [--step 5]
        [--clean] [--up sim-imu|none] [--prior-scale 1] [--track bench_out/tracker]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import cv2
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from snaketrack.datasets.layout import Dataset  # noqa: E402
from snaketrack.errors import InputError, SnaketrackError  # noqa: E402
from snaketrack.tracker.corrupt import MaskCorruptor  # noqa: E402


def _track_pose(cols: dict, k: int, layout) -> np.ndarray:
    """Row ``k`` of a track.csv's columns as a pose vector (D,)."""
    q = [cols[f"q_{j + 1}"][k] for j in range(layout.n_joints)]
    quat = [cols[c][k] for c in ("base_qw", "base_qx", "base_qy", "base_qz")]
    base = [cols[c][k] for c in ("base_x", "base_y", "base_z")]
    return layout.from_quat(np.asarray(q, float), np.asarray(quat, float), np.asarray(base, float))


def measure(path: Path, step: int = 1, frames: int | None = None, clean: bool = False,
            up: str = "sim-imu", track: Path | None = None, prior_scale: float = 1.0,
            progress: bool = False) -> dict:
    """The floor figures of one dataset (module doc); ``track``: a track.csv to compare on the same frames;
    ``prior_scale``: the factor on the prediction prior's standard deviations; ``progress``: a tqdm bar."""
    from dataclasses import replace

    from snaketrack.models.robot import load_robot
    from snaketrack.tracker.camera import Camera
    from snaketrack.tracker.gravity import open_up
    from snaketrack.tracker.tracker import Tracker, TrackerConfig

    ds = Dataset(path)
    truth = ds.truth
    if not truth:
        raise InputError(f"{path}: no truth.jsonl; the floor is measured against the true poses")
    if not ds.has_masks:
        raise InputError(f"{path}: no masks/; the floor is measured on the truth masks")
    seed = int(ds.meta.get("seed", 0) or 0)
    robot = load_robot(ds.meta.get("robot", "planar-snake-11"))
    cam = Camera.from_meta(ds.meta)
    if not (np.isfinite(prior_scale) and prior_scale > 0):
        raise InputError(f"prior scale {prior_scale!r}: expected a positive factor")
    config = TrackerConfig()
    r = config.refine
    config = replace(config, refine=replace(r, prior_q=r.prior_q * prior_scale, prior_rot=r.prior_rot * prior_scale,
                                            prior_trans=r.prior_trans * prior_scale))
    tracker = Tracker(robot, cam.K, cam.width, cam.height, fps=ds.fps, config=config)
    layout = tracker.layout
    corrupt = None if clean else MaskCorruptor(seed)
    up_source = open_up(up, truth, seed)
    cols = rows = None
    if track is not None:
        from snaketrack.io import read_csv_columns

        cols = read_csv_columns(track)
        rows = {int(f): k for k, f in enumerate(np.asarray(cols["frame"], float))}
    n = len(ds) if frames is None else min(frames, len(ds))
    out: dict[str, list] = {k: [] for k in ("jf", "bf", "if", "jt", "bt", "it", "ir")}
    frames_it = range(0, n, step)
    if progress:
        from tqdm import tqdm

        frames_it = tqdm(frames_it, desc=f"floor {path.name}", unit="frame", mininterval=0.5)
    for i in frames_it:
        m = ds.mask(i)
        if m is None or not (m > 0).any() or i >= len(truth):
            continue
        m = m > 0
        observed = m if corrupt is None else corrupt(m, i)
        if not observed.any():
            continue
        tr = truth[i]
        q_true = np.asarray(tr["joint_angles"], float)
        t_true = np.asarray(tr["base_position_cam"], float)
        x_true = layout.from_quat(q_true, np.asarray(tr["base_quat_cam"], float), t_true)
        u = None if up_source is None else up_source(i)
        res = tracker.fit(x_true, observed, up=u)
        q, _, t = layout.unpack(res.x)
        out["jf"].append(np.abs(q - q_true).mean())
        out["bf"].append(np.linalg.norm(t - t_true))
        out["if"].append(res.iou)
        if rows is not None and i in rows and cols["status"][rows[i]] == "tracked":
            x_track = _track_pose(cols, rows[i], layout)
            q_k, _, t_k = layout.unpack(x_track)
            out["jt"].append(np.abs(q_k - q_true).mean())
            out["bt"].append(np.linalg.norm(t_k - t_true))
            out["it"].append(float(cols["iou"][rows[i]]))
            out["ir"].append(tracker.fit(x_track, observed, up=u).iou)
    if not out["jf"]:
        raise InputError(f"{path}: no frame with a robot in its mask among the first {n}")
    res = {"dataset": path.name, "frames": len(out["jf"]), "masks": "truth" if clean else "corrupted",
           "prior_scale": float(prior_scale),
           "floor_joint_error_rad": float(np.mean(out["jf"])), "floor_base_error_m": float(np.mean(out["bf"])),
           "floor_iou": float(np.mean(out["if"]))}
    if out["jt"]:
        res.update(track_frames=len(out["jt"]), track_joint_error_rad=float(np.mean(out["jt"])),
                   track_base_error_m=float(np.mean(out["bt"])), track_iou=float(np.mean(out["it"])),
                   refit_iou=float(np.mean(out["ir"])))
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("datasets", nargs="+", type=Path)
    ap.add_argument("--step", type=int, default=1, help="every STEP-th frame")
    ap.add_argument("--clean", action="store_true", help="the truth masks, not corrupted ones")
    ap.add_argument("--up", default="sim-imu", choices=("sim-imu", "none"),
                    help="the up direction, as snaketrack track --up (default sim-imu)")
    ap.add_argument("--prior-scale", type=float, default=1.0,
                    help="widen the prior towards the prediction (the truth here) this many times")
    ap.add_argument("--track", type=Path, default=None,
                    help="folder of tracks (DIR/<dataset name>/track.csv) to compare on the same frames")
    args = ap.parse_args(argv)
    if args.step < 1:
        ap.error(f"--step {args.step}: expected a positive integer")
    for path in args.datasets:
        if not (path / "meta.json").is_file():
            print(f"error: {path}: not a dataset folder (no meta.json)", file=sys.stderr)
            return 2
        csv = None if args.track is None else args.track / path.name / "track.csv"
        try:
            res = measure(path, args.step, clean=args.clean, up=args.up,
                          track=csv if csv is not None and csv.is_file() else None, prior_scale=args.prior_scale,
                          progress=sys.stderr.isatty())
        except SnaketrackError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        print(json.dumps(res))
    return 0


if __name__ == "__main__":
    cv2.setNumThreads(1)
    sys.exit(main())
