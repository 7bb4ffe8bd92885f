"""The two silhouette renderers side by side: the own analytic one and PyTorch3D's (docs/renderer.md).

Per benchmark clip (``snaketrack.bench.tracking``'s, rendered into ``--data`` when absent), at its first true
pose at 640×360 with the tracker's silhouette model (``visual``) and final edge softness (σ = 0.5 px):

- ``fwd_bwd_ms``: one silhouette over the robot's ROI and the gradient of Σ(o − m)² with respect to the pose
  vector (m: the own renderer's hard silhouette), through autograd: ``own``, ``pytorch3d`` (the outline blend)
  and ``pytorch3d_shader`` (PyTorch3D's SoftSilhouetteShader), both rasterised in PyTorch3D's ``_C`` without
  gradients and recomputed in torch, and, with ``--shipped-backward``, ``pytorch3d_shipped`` (the shader
  through PyTorch3D's own rasteriser backward); ``ratio``: each time over the own one's;
- ``jacobian_ms``: one Levenberg–Marquardt linearisation (silhouette and Jacobian with respect to the pose and
  the edge offset) as the tracker makes it, with each; ``jacobian_ratio``: over the own one's;
- ``iou_at_truth``: the two backends' hard silhouettes (at σ = 0.5 px) against each other at that pose; ``faces``:
  PyTorch3D's mesh size;
- ``outline``: at that pose and σ = 2, 1 and 0.5 px, the mean offset [px] of PyTorch3D's outline (its 0.5 level)
  from the own renderer's (+: wider; their area difference over the own outline's length) and the two hard
  silhouettes' IoU, with the meshes drawn shrunk by ``outline_sigmas`` σ (``default``) and as PyTorch3D's
  blend comes (``raw``, ``outline_sigmas=0``).

With ``--refine-frames N``, the tracker's refinement alone with each backend, frame after frame from the true
first pose against the truth masks (no filter, no search): its base and joint errors and time per frame.

Then each clip is tracked for ``--frames`` frames with each backend (``snaketrack track``'s benchmark options:
corrupted truth masks, no up direction; with ``--shader`` also ``pytorch3d-shader``): the base position, base
orientation and joint errors, IoU and frames per second, the PyTorch3D run's errors over the own run's, whether
each is within 10 % of it, and the own run's frames per second over PyTorch3D's (``time_ratio``).

Where CUDA is available the timings are repeated on the GPU (``"gpu"``); elsewhere ``"gpu"`` says why not.
Timings depend on the machine's load: compare the figures of one run.

    snaketrack bench renderer --frames 20      # needs PyTorch3D (make pytorch3d)
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from snaketrack.bench.cache import add_data_argument, data_dir
from snaketrack.bench.registry import Benchmark
from snaketrack.masks import mask_iou

if TYPE_CHECKING:
    import torch

CLIPS = ("static-planar-snake-11", "static-arcsnake-4")


def _timed(fn, reps: int) -> float:
    fn()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - t0) / reps * 1e3


def render_figures(ds_path: Path, reps: int, shipped: bool, device: str = "cpu") -> dict:
    import torch  # deferred: snaketrack bench --list imports none of a benchmark's work

    from snaketrack.bench.render_timing import SIZE
    from snaketrack.datasets.layout import Dataset
    from snaketrack.models.robot import load_robot
    from snaketrack.models.rotations import axis_angle_to_matrix_np
    from snaketrack.tracker.calib.camera import Camera
    from snaketrack.tracker.render.primitives import CapsuleModel
    from snaketrack.tracker.render.render_pytorch3d import PyTorch3DRenderer
    from snaketrack.tracker.render.silhouette import SilhouetteRenderer, SilhouetteSettings, render_with_jacobian
    from snaketrack.tracker.state import StateLayout

    W, H = SIZE
    ds = Dataset(ds_path)
    robot = load_robot(ds.meta.get("robot", "planar-snake-11"))
    cam = Camera.from_meta(ds.meta)
    if cam.size != SIZE:
        cam = cam.resized(W, H)
    model = CapsuleModel.from_visual(robot)
    s = SilhouetteSettings(sigma_px=0.5)
    own = SilhouetteRenderer(robot, cam.K, W, H, model, s)
    p3d = PyTorch3DRenderer(robot, cam.K, W, H, model, s, device=device)
    tr = ds.truth[0]
    lay = StateLayout.for_robot(robot)
    x0 = lay.from_quat(tr["joint_angles"], tr["base_quat_cam"], tr["base_position_cam"])
    xt = torch.as_tensor(x0)[None]
    roi = p3d.screen_roi(xt, 8.0)
    with torch.no_grad():
        target = (own(xt, roi)[0][0] > 0.5).double()
        hard_p3d = p3d(xt, roi)[0][0] > 0.5
    hard_own = target > 0.5
    out = {"clip": ds_path.name, "roi": list(roi), "faces": int(len(p3d.meshes.faces)), "device": device,
           "iou_at_truth": mask_iou(hard_own.cpu().numpy(), hard_p3d.cpu().numpy()),
           "outline": outline_figures(own, p3d, xt, p3d.screen_roi(xt, 12.0))}

    def fwd_bwd(ren, backward=None):
        def run():
            x = xt.clone().requires_grad_(True)
            if backward is None:
                sil = ren(x, roi)[0][0]
            else:
                sil = ren.silhouette(ren.vertices(x), roi, s, backward=backward)[0]
            ((sil - target) ** 2).sum().backward()
        return run

    shader = PyTorch3DRenderer(robot, cam.K, W, H, model, s, device=device, meshes=p3d.meshes, blend="shader")
    times = {"own": _timed(fwd_bwd(own), reps), "pytorch3d": _timed(fwd_bwd(p3d, "torch"), max(reps // 5, 1)),
             "pytorch3d_shader": _timed(fwd_bwd(shader, "torch"), max(reps // 5, 1))}
    if shipped or device != "cpu":
        times["pytorch3d_shipped"] = _timed(fwd_bwd(shader, "pytorch3d"), 1 if device == "cpu" else reps)
    out["fwd_bwd_ms"] = times
    out["ratio"] = {k: v / times["own"] for k, v in times.items() if k != "own"}
    # one LM linearisation each, as the refiner makes it
    J = lay.n_joints
    q, R0, t0 = torch.as_tensor(x0[:J]), torch.as_tensor(axis_angle_to_matrix_np(x0[J:J + 3])), \
        torch.as_tensor(x0[J + 3:])
    from snaketrack.models.chain import point_jacobian

    def lin_own():
        pts, G = point_jacobian(robot, model, q, R0, t0)
        render_with_jacobian(pts[None, :, 0], pts[None, :, 1], torch.as_tensor(model.radius), own.K.double(), roi,
                             G, s, with_offset=True, tol=1e-3 / 0.5, compute_dtype=torch.float32,
                             image_size=(W, H), cylinders=model.cylinders)

    def lin_p3d():
        p3d.pose_jacobian(q, R0, t0, roi, s, with_offset=True, tol=1e-3 / 0.5)

    def lin_shader():
        shader.pose_jacobian(q, R0, t0, roi, s, with_offset=True, tol=1e-3 / 0.5)

    jac = {"own": _timed(lin_own, reps), "pytorch3d": _timed(lin_p3d, max(reps // 5, 1)),
           "pytorch3d_shader": _timed(lin_shader, max(reps // 5, 1))}
    out["jacobian_ms"] = jac
    out["jacobian_ratio"] = {k: v / jac["own"] for k, v in jac.items() if k != "own"}
    return out


def outline_offset_px(ref: np.ndarray, other: np.ndarray) -> float:
    """Mean signed distance [px] from the outline of the bool mask ``ref`` to that of ``other`` (+: ``other``
    wider): their area difference over the length of ``ref``'s outline."""
    import cv2

    contours, _ = cv2.findContours(ref.astype(np.uint8), cv2.RETR_LIST, cv2.CHAIN_APPROX_NONE)
    return float(int(other.sum()) - int(ref.sum())) / max(sum(cv2.arcLength(c, True) for c in contours), 1.0)


def outline_figures(own, p3d, x: torch.Tensor, roi) -> dict:
    """PyTorch3D's silhouette against the own renderer's at pose ``x`` (1, D) over ``roi``, σ = 2, 1, 0.5 px: the
    mean outline offset [px] of the 0.5 levels, the IoU of the hard silhouettes and the largest difference of
    the soft ones, for each blend: ``outline`` (the default), ``shader`` (PyTorch3D's SoftSilhouetteShader,
    meshes shrunk by its ``outline_sigmas`` default) and ``shader_raw`` (the shader as it comes,
    ``outline_sigmas=0``)."""
    import torch  # deferred: snaketrack bench --list imports none of a benchmark's work

    from snaketrack.tracker.render.render_pytorch3d import PyTorch3DRenderer
    from snaketrack.tracker.render.silhouette import SilhouetteSettings

    def variant(blend, outline_sigmas=None):
        return PyTorch3DRenderer(p3d.robot, p3d.K.numpy(), p3d.width, p3d.height, p3d.model, p3d.settings,
                                 meshes=p3d.meshes, blend=blend, outline_sigmas=outline_sigmas)

    rens = {"outline": variant("outline"), "shader": variant("shader"), "shader_raw": variant("shader", 0.0)}
    out = {"shader_outline_sigmas": rens["shader"].outline_sigmas}
    for sigma in (2.0, 1.0, 0.5):
        s = SilhouetteSettings(sigma_px=sigma)
        with torch.no_grad():
            soft = own(x, roi, s)[0][0].numpy()
            a = soft > 0.5
            row = {}
            for name, ren in rens.items():
                o = ren(x, roi, s)[0][0].cpu().numpy()
                b = o > 0.5
                row[name] = {"offset_px": outline_offset_px(a, b), "iou": mask_iou(a, b),
                             "max_abs_diff": float(np.abs(o - soft).max())}
        out[f"sigma_{sigma:g}"] = row
    return out


def refine_figures(ds_path: Path, frames: int, renderer: str) -> dict:
    """The tracker's refinement alone, frame after frame from the true first pose against the clip's truth masks
    (each frame starts from the last refined pose; no filter, no search): mean base position [m] and joint
    [rad] errors over ``frames`` frames, the mean IoU and seconds per frame."""
    from snaketrack.datasets.layout import Dataset
    from snaketrack.models.robot import load_robot
    from snaketrack.tracker.calib.camera import Camera
    from snaketrack.tracker.config import TrackerConfig
    from snaketrack.tracker.fit.observation import observe
    from snaketrack.tracker.fit.refine import Refiner
    from snaketrack.tracker.render.primitives import CapsuleModel
    from snaketrack.tracker.render.renderers import make_renderer
    from snaketrack.tracker.render.silhouette import SilhouetteSettings
    from snaketrack.tracker.state import StateLayout

    ds = Dataset(ds_path)
    robot = load_robot(ds.meta.get("robot", "planar-snake-11"))
    cam = Camera.from_meta(ds.meta)
    cfg = TrackerConfig().refine
    ren = make_renderer(renderer, robot, cam.K, cam.width, cam.height, CapsuleModel.from_visual(robot),
                        SilhouetteSettings(sigma_px=cfg.sigma_px))
    refiner = Refiner(ren, cfg)
    lay = StateLayout.for_robot(robot)
    truth = [lay.from_quat(t["joint_angles"], t["base_quat_cam"], t["base_position_cam"]) for t in ds.truth]
    J = lay.n_joints
    x, offset, base, joint, ious = truth[0], 0.0, [], [], []
    t0 = time.perf_counter()
    for i in range(1, frames + 1):
        res = refiner.refine(x, observe(ds.mask(i) > 0, cfg), offset0=offset)
        x, offset = res.x, res.offset_px
        base.append(float(np.linalg.norm(x[J + 3:] - truth[i][J + 3:])))
        joint.append(float(np.abs(x[:J] - truth[i][:J]).mean()))
        ious.append(res.iou)
    return {"base_position_error_m": float(np.mean(base)), "joint_error_rad": float(np.mean(joint)),
            "iou": float(np.mean(ious)), "s_per_frame": (time.perf_counter() - t0) / frames}


def track_figures(ds_path: Path, out: Path, frames: int, renderer: str, up: str = "none") -> dict:
    """``snaketrack track``'s benchmark run of the clip with ``renderer`` over ``frames`` frames (``up``: the up
    direction's source, ``none`` or ``sim-imu``, as ``bench tracker --up``): its summary's
    figures (:data:`~snaketrack.bench.tracking.REPORTED`), ``base_orientation_error_rad`` (the mean angle [rad]
    of the rotation from the true base orientation to the tracked one) and the run's wall time ``wall_s`` [s]."""
    from snaketrack.bench.tracking import REPORTED, bench_options
    from snaketrack.datasets.layout import Dataset
    from snaketrack.io import read_csv_columns, read_json
    from snaketrack.tracker.run.loop import track_source

    meta = read_json(ds_path / "meta.json")
    scene = ds_path.name.split("-")[0]
    pipeline, opts = bench_options(scene, int(meta.get("seed", 0)), frames, up=up, renderer=renderer)
    pipeline = replace(pipeline, hold_frames=0)
    run_dir = out / f"{ds_path.name}-{renderer}"
    t0 = time.perf_counter()
    summary = track_source(ds_path, run_dir, meta.get("robot"), config=pipeline, options=opts)
    res = {k: summary.get(k) for k in REPORTED}
    res["wall_s"] = time.perf_counter() - t0
    track = read_csv_columns(run_dir / "track.csv")
    truth = Dataset(ds_path).truth
    q = np.stack([track[c] for c in ("base_qw", "base_qx", "base_qy", "base_qz")], 1)
    q_true = np.array([truth[int(f)]["base_quat_cam"] for f in track["frame"]])
    dot = np.abs((q * q_true).sum(1)) / (np.linalg.norm(q, axis=1) * np.linalg.norm(q_true, axis=1))
    angle = 2.0 * np.arccos(np.clip(dot, 0.0, 1.0))
    res["base_orientation_error_rad"] = float(np.nanmean(angle))
    return res


ERRORS = ("base_position_error_m", "base_orientation_error_rad", "joint_error_rad", "joint_error_l2_rad")


def track_comparison(ds_path: Path, out: Path, frames: int, shader: bool = False, up: str = "none") -> dict:
    """The clip tracked with each backend (:func:`track_figures`; with ``shader``, also ``pytorch3d-shader``),
    and PyTorch3D's errors over the own renderer's (``error_ratio``, per PyTorch3D run with the shader) and
    whether each is within 10 % of it (``within_10_percent``), and the own renderer's frames per second over
    PyTorch3D's (``time_ratio``)."""
    names = ("own", "pytorch3d") + (("pytorch3d-shader",) if shader else ())
    runs = {r: track_figures(ds_path, out, frames, r, up) for r in names}
    o = runs["own"]

    def ratios(p):
        err = {k: (p[k] / o[k] if o.get(k) and p.get(k) is not None else None) for k in ERRORS}
        return err, {k: (v is not None and v <= 1.1) for k, v in err.items()}

    runs["error_ratio"], runs["within_10_percent"] = ratios(runs["pytorch3d"])
    runs["time_ratio"] = o["fps"] / runs["pytorch3d"]["fps"] if runs["pytorch3d"].get("fps") else None
    if shader:
        runs["error_ratio_shader"], runs["within_10_percent_shader"] = ratios(runs["pytorch3d-shader"])
    return runs


def add_arguments(ap: argparse.ArgumentParser) -> None:
    add_data_argument(ap)
    ap.add_argument("--out", default="bench_out/renderer", help="tracking runs' output folder")
    ap.add_argument("--clips", nargs="+", default=list(CLIPS),
                    help="SCENE-ROBOT clips (default: static-planar-snake-11 static-arcsnake-4)")
    ap.add_argument("--seed", type=int, default=0, help="the clips' seed (default 0)")
    ap.add_argument("--frames", type=int, default=20, help="frames tracked per clip and backend (default 20)")
    ap.add_argument("--reps", type=int, default=10, help="repetitions of the own renderer's timed passes "
                                                       "(PyTorch3D's: a fifth of them; default 10)")
    ap.add_argument("--shipped-backward", action="store_true",
                    help="also time PyTorch3D's own CPU backward (once: tens of seconds)")
    ap.add_argument("--no-track", action="store_true", help="timings only")
    ap.add_argument("--refine-frames", type=int, default=0, metavar="N",
                    help="also the refinement alone over N frames from the true first pose with each backend")
    ap.add_argument("--threads", type=int, default=2, help="torch intra-op threads (default 2)")
    ap.add_argument("--up", default="none", choices=["none", "sim-imu"],
                    help="the tracking runs' up direction: none, or the clip's simulated IMU (the ground prior; "
                         "without it a near-overhead view can be fitted with its plane mirrored; default none)")
    ap.add_argument("--shader", action="store_true",
                    help="also track with PyTorch3D's SoftSilhouetteShader blend (the renderer pytorch3d-shader)")


def run(args: argparse.Namespace) -> dict:
    import torch  # deferred: snaketrack bench --list imports none of a benchmark's work

    from snaketrack.bench.tracking import dataset_dir, ensure_dataset
    from snaketrack.tracker.render.renderers import check_renderer

    check_renderer("pytorch3d")
    torch.set_num_threads(max(1, min(args.threads, os.cpu_count() or 1)))
    result = {"size": [640, 360], "threads": torch.get_num_threads(), "frames": args.frames, "up": args.up,
              "clips": {}}
    for clip in args.clips:
        scene, robot = clip.split("-", 1)
        ds = ensure_dataset(dataset_dir(data_dir(args), scene, robot, args.seed), scene, robot, args.seed,
                            args.frames)
        entry = {"render": render_figures(ds, args.reps, args.shipped_backward)}
        if torch.cuda.is_available():
            entry["render_gpu"] = render_figures(ds, args.reps, True, "cuda")
        if args.refine_frames > 0:
            ref = {r: refine_figures(ds, args.refine_frames, r) for r in ("own", "pytorch3d")}
            ref["error_ratio"] = {k: ref["pytorch3d"][k] / ref["own"][k] if ref["own"][k] else None
                                  for k in ("base_position_error_m", "joint_error_rad")}
            entry["refine"] = ref
            print(json.dumps({clip: ref}), file=sys.stderr)
        if not args.no_track:
            entry["track"] = track_comparison(ds, Path(args.out), args.frames, args.shader, args.up)
            print(json.dumps({clip: entry["track"]}), file=sys.stderr)
        result["clips"][clip] = entry
        print(f"{clip}: done", file=sys.stderr)
    result["gpu"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else \
        "none: no CUDA device here (the GPU figures need one)"
    return result


BENCHMARK = Benchmark("renderer", "the PyTorch3D renderer beside the tracker's own: speed, agreement and tracking",
                      add_arguments, run,
                      quick={"frames": 5, "refine_frames": 2, "reps": 1, "clips": ["static-arcsnake-4"]})
