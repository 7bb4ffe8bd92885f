"""Benchmark of the single-camera tracker (issue 3) on synthetic datasets.

For every scene (static, handheld, drone) and robot (planar-snake-11,
arcsnake-4): a 300-frame 640×360 dataset from ``snaketrack sim video``
(generated into ``--data`` when absent, named ``{scene}-{planar|arcsnake}-s{seed}``;
the static planar clip without the posts, as docs/video.md's datasets),
tracked with corrupted truth masks (``--corrupt-masks``, seeded by the
dataset's seed), 10 refinement steps; with ``--up sim-imu`` the static
scene's camera is declared fixed (``snaketrack track --static-camera``, off
with ``--no-static-camera``), as a tripod's user would, and the handheld and
drone scenes follow their camera's height over the ground (``--track-ground``,
off with ``--no-track-ground``; rule H of docs/notebook/tracker.md). Per scene and robot it reports the
``metrics.json`` figures (DESIGN.md names; ``fps`` includes the first
frame's pose search and any later searches, ``fps_excluding_search`` does
not, ``search_s`` is their time; ``iou`` is against the observed, corrupted
mask with the tracker's fitted edge offset, ``iou_no_offset`` the model's
own silhouette against it, ``iou_truth`` against the truth mask, ``iou_ceiling`` what the truth mask itself
scores against the corrupted masks with its best edge offset, ``iou_model_ceiling`` the same for the
tracker's silhouette model at the true pose: scripts/measure_iou_ceiling.py) and ``reacquire_frames``: a second
run in which the observed masks of frames [60, 90) are emptied (the robot
hidden for 30 frames; ``--hide-start`` moves the window), counting frames
from the first visible one (90) until
the rendered silhouette's IoU against the *truth* mask reaches 0.8 (null if
it never does within the run).

Also ``render_fwd_bwd_ms``: one forward and backward pass of the soft
silhouette renderer at 640×360 (its own ROI, σ = 0.5 px) on the drone
dataset's first true pose, and in the same run the same pass with the
same camera in a frame of 2560×1440, 16 times the pixels with the robot
the same size (``render_fwd_bwd_ms_16x_frame``), with their ratio
``render_16x_frame_cost_x``: about 1 when the cost follows the robot's size
in the image and not the frame's, 16 for a renderer that visits every
pixel; and the reference, ``render_dense_fwd_bwd_ms``: the same arithmetic
over every pixel of the 640×360 frame against every primitive (no ROI, no
pixel bands), with ``render_dense_speedup_x`` and the largest difference
between the two silhouettes, ``render_dense_max_abs_diff``. (Until the sixteenth session
the reference was the same pass with a full-frame ROI,
``render_roi_speedup_x``; since the renderer works on each primitive's pixel
band, a wider ROI only adds an empty buffer.) And
``jacobian_band_ms`` against ``jacobian_box_ms``: one LM linearisation on
each primitive's band against its whole screen box.

Usage::

    MUJOCO_GL=egl .venv/bin/python scripts/bench_tracker.py [--data /work/data] [--frames 300]
        [--scenes static handheld drone] [--robots planar-snake-11 arcsnake-4] [--out bench_out/tracker]

The last line printed is one JSON object.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("PYOPENGL_PLATFORM", os.environ["MUJOCO_GL"])
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import torch  # noqa: E402

SHORT = {"planar-snake-11": "planar", "arcsnake-4": "arcsnake"}
HIDE_FRAMES = 30  # the robot is hidden (empty masks) for this many frames


def dataset_dir(data: Path, scene: str, robot: str, seed: int) -> Path:
    return data / f"{scene}-{SHORT.get(robot, Path(robot).stem)}-s{seed}"


def obstacles_for(scene: str, robot: str) -> bool:
    """The posts are left out of the static planar clip, as in docs/video.md's datasets.

    Among the posts the planar snake crawls ~2.5 m in 10 s; a tripod that frames
    all of it sees the body only ~5.7 px wide, which the mask corruption's 1–3 px
    erosion wipes out. Without posts it undulates nearly in place (~22 px wide).
    """
    return not (scene == "static" and robot == "planar-snake-11")


def ensure_dataset(path: Path, scene: str, robot: str, seed: int, frames: int, body_width_px: float = 11.0,
                   size: tuple[int, int] = (640, 360), progress: bool = True) -> Path:
    """Generate the dataset with snaketrack.sim.video when it is absent, too short or made otherwise
    (``body_width_px``: ``--body-width-px``, the lens; ``size``: (width, height) [px])."""
    from snaketrack.datasets.layout import Dataset
    from snaketrack.io import read_json

    obstacles = obstacles_for(scene, robot)
    if (path / "meta.json").is_file():
        try:
            if len(Dataset(path)) >= frames and bool(read_json(path / "meta.json").get("obstacles", True)) == obstacles:
                return path
        except Exception:
            pass
        if bool(read_json(path / "meta.json").get("obstacles", True)) != obstacles:
            raise SystemExit(f"{path}: made with obstacles={not obstacles}; the benchmark expects "
                             f"obstacles={obstacles} (docs/video.md); move it away")
    from snaketrack.sim.video import VideoConfig, render_video

    cfg = VideoConfig(scene=scene, robot=robot, frames=frames, seed=seed, width=size[0], height=size[1],
                      obstacles=obstacles, target_width_px=float(body_width_px))
    print(f"generating {path} ({frames} frames)", file=sys.stderr)
    render_video(cfg, path, resume=(path / "meta.json").is_file(), progress=progress, extras=False)
    return path


def bench_options(scene: str, seed: int, frames: int, up: str = "sim-imu", refine_steps: int = 10,
                  hold_frames: int = 60, silhouette: str = "visual", static_camera: bool = True,
                  track_ground: bool = True):
    """The benchmark's ``TrackOptions`` for one clip: corrupted masks seeded by the dataset's seed, no
    video or plots; with an up direction the static scene's camera is declared fixed and the moving
    cameras follow their height over the ground (each switch can be turned off)."""
    from snaketrack.commands.track import TrackOptions

    fixed = scene == "static" and up != "none" and static_camera
    moving = scene != "static" and up != "none" and track_ground
    return TrackOptions(refine_steps=refine_steps, corrupt_masks=True, corrupt_seed=seed, max_frames=frames,
                        video=False, plots=False, progress=False, up=up, static_camera=fixed,
                        track_ground=moving, hold_frames=hold_frames, silhouette=silhouette)


def reacquire_frames(track_csv: Path, hide_end: int, threshold: float = 0.8):
    from snaketrack.io import read_csv_columns

    cols = read_csv_columns(track_csv)
    frames = cols["frame"].astype(int)
    iou = cols["iou_truth"]
    for f, v in zip(frames, iou):
        if f >= hide_end and np.isfinite(v) and v >= threshold:
            return int(f - hide_end)
    return None


def render_timing(data_path: Path, reps: int = 20) -> dict:
    from snaketrack.datasets.layout import Dataset
    from snaketrack.models.robot import load_robot
    from snaketrack.tracker.camera import Camera
    from snaketrack.tracker.render import SilhouetteRenderer
    from snaketrack.tracker.state import StateLayout

    ds = Dataset(data_path)
    robot = load_robot(ds.meta.get("robot", "planar-snake-11"))
    cam = Camera.from_meta(ds.meta)
    if cam.size != (640, 360):
        cam = cam.resized(640, 360)  # the timing is at 640x360 whatever the dataset's size
    r = SilhouetteRenderer(robot, cam.K, 640, 360)
    # the same camera in a frame 4x as wide and high (16x the pixels), the robot where it was relative
    # to the principal point: the same pixels of robot, 16x the pixels of frame
    K_big = cam.K.copy()
    K_big[0, 2] += 1.5 * 640
    K_big[1, 2] += 1.5 * 360
    r_big = SilhouetteRenderer(robot, K_big, 4 * 640, 4 * 360)
    tr = ds.truth[0]
    x0 = StateLayout.for_robot(robot).from_quat(tr["joint_angles"], tr["base_quat_cam"], tr["base_position_cam"])

    # the reference: every pixel of the 640x360 frame against every primitive (no ROI, no bands: the
    # primitives' margin reaches past the frame), the same arithmetic as the renderer's
    r_dense = r.with_settings(margin_sigmas=2.0 * (640 + 360) / r.settings.sigma_px)

    def once(rr, roi, target):
        x = torch.as_tensor(x0, dtype=torch.float32)[None].clone().requires_grad_(True)
        sil, roi_used = rr(x, roi)
        u0, v0, w, h = roi_used
        loss = ((sil[0] - target[v0:v0 + h, u0:u0 + w]) ** 2).sum()
        loss.backward()

    xt = torch.as_tensor(x0)[None].float()
    with torch.no_grad():
        sil, sil_dense = r.full_image(xt)[0], r_dense.full_image(xt)[0]
        target, target_big = (sil > 0.5).float(), (r_big.full_image(xt)[0] > 0.5).float()
    out = {}
    for name, rr, roi, tgt, n in (("render_fwd_bwd_ms", r, None, target, reps),
                                  ("render_fwd_bwd_ms_16x_frame", r_big, None, target_big, reps),
                                  ("render_dense_fwd_bwd_ms", r_dense, (0, 0, 640, 360), target, max(reps // 4, 1))):
        for _ in range(2):
            once(rr, roi, tgt)
        t0 = time.perf_counter()
        for _ in range(n):
            once(rr, roi, tgt)
        out[name] = (time.perf_counter() - t0) / n * 1e3
    out["render_16x_frame_cost_x"] = out["render_fwd_bwd_ms_16x_frame"] / out["render_fwd_bwd_ms"]
    out["render_dense_speedup_x"] = out["render_dense_fwd_bwd_ms"] / out["render_fwd_bwd_ms"]
    # the two draw the same silhouette, up to the coverage cut at 8 sigma (2e-4)
    out["render_dense_max_abs_diff"] = float((sil - sil_dense).abs().max())
    out.update(jacobian_timing(r, x0, reps))
    return out


def jacobian_timing(r, x0, reps: int) -> dict:
    """One LM linearisation (silhouette + closed-form Jacobian, σ = 0.5 px, the tracker's ``jac_tol``)
    of the first true pose:
    pixels of each capsule's screen band (the tracker's) against its whole screen box (the reference)."""
    from snaketrack.models.chain import point_jacobian
    from snaketrack.tracker.refine import RefineConfig
    from snaketrack.tracker.render import SilhouetteSettings, render_with_jacobian

    lay = r.layout
    x = torch.as_tensor(x0, dtype=torch.float64)
    q, R0, t0 = lay.to_fk(x[None])
    pts, G = point_jacobian(r.robot, r.model, q[0], R0[0], t0[0])
    roi = r.screen_roi(x[None], 8.0)
    s = SilhouetteSettings(sigma_px=0.5)
    radii = torch.as_tensor(r.model.radius, dtype=torch.float64)
    out = {}
    for name, band in (("jacobian_band_ms", True), ("jacobian_box_ms", False)):
        def once():
            return render_with_jacobian(pts[None, :, 0], pts[None, :, 1], radii, r.K.double(), roi, G, s,
                                        with_offset=True, tol=RefineConfig().jac_tol / 0.5, compute_dtype=torch.float32,
                                        image_size=(r.width, r.height), band=band)
        for _ in range(3):
            once()
        t0_ = time.perf_counter()
        for _ in range(reps):
            once()
        out[name] = (time.perf_counter() - t0_) / reps * 1e3
    out["jacobian_band_speedup_x"] = out["jacobian_box_ms"] / out["jacobian_band_ms"]
    return out


def main(argv=None) -> int:
    import measure_iou_ceiling  # scripts/, beside this file
    from snaketrack.commands.track import run_tracking
    from snaketrack.io import read_json

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="/work/data", help="folder of the datasets (generated when absent)")
    ap.add_argument("--out", default="bench_out/tracker", help="folder for the tracks")
    ap.add_argument("--frames", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--scenes", nargs="+", default=["static", "handheld", "drone"])
    ap.add_argument("--robots", nargs="+", default=["planar-snake-11", "arcsnake-4"])
    ap.add_argument("--refine-steps", type=int, default=10)
    ap.add_argument("--no-reacquire", action="store_true", help="skip the hidden-robot runs")
    ap.add_argument("--hide-start", type=int, default=60, help="first hidden frame of the re-acquisition run")
    ap.add_argument("--threads", type=int, default=2,
                    help="torch intra-op threads (default 2, the issue's two cores)")
    ap.add_argument("--up", default="none", choices=["none", "sim-imu"],
                    help="the tracker's up direction: none, or the simulated IMU of snaketrack.tracker.gravity")
    ap.add_argument("--no-static-camera", action="store_true",
                    help="do not tell the tracker that the static scene's camera is fixed (--static-camera of "
                         "snaketrack track, which needs --up)")
    ap.add_argument("--no-track-ground", action="store_true",
                    help="do not follow the moving cameras' height over the ground (handheld and drone scenes; "
                         "snaketrack track --track-ground, which needs --up)")
    ap.add_argument("--hold-frames", type=int, default=60,
                    help="first frames held until the body wave settles the reading (snaketrack track --hold-frames)")
    ap.add_argument("--silhouette", default="visual", choices=["visual", "visual-capsule", "capsules"],
                    help="the tracker's silhouette model (snaketrack track --silhouette)")
    ap.add_argument("--timing-reps", type=int, default=20,
                    help="repetitions of each timed renderer pass (the dense reference runs a quarter of them)")
    ap.add_argument("--reacquire-tail", type=int, default=60,
                    help="frames tracked after the robot reappears in the re-acquisition run")
    args = ap.parse_args(argv)
    torch.set_num_threads(max(1, min(args.threads, os.cpu_count() or 1)))
    data, out = Path(args.data), Path(args.out)
    results: dict = {}
    for scene in args.scenes:
        for robot in args.robots:
            key = f"{scene}/{robot}"
            ds = ensure_dataset(dataset_dir(data, scene, robot, args.seed), scene, robot, args.seed, args.frames)
            seed = int(read_json(ds / "meta.json").get("seed", args.seed))
            run_dir = out / f"{scene}-{SHORT.get(robot, robot)}"
            opts = bench_options(scene, seed, args.frames, up=args.up, refine_steps=args.refine_steps,
                                 hold_frames=args.hold_frames, silhouette=args.silhouette,
                                 static_camera=not args.no_static_camera, track_ground=not args.no_track_ground)
            fixed, moving = opts.static_camera, opts.track_ground
            t0 = time.perf_counter()
            s = run_tracking(ds, robot, run_dir, options=opts)
            res = {k: s.get(k) for k in ("base_position_error_m", "joint_error_rad", "joint_error_l2_rad", "iou",
                                         "iou_no_offset", "iou_truth", "fps", "fps_excluding_search", "search_s",
                                         "frames_lost", "frames", "head_position_error_m", "flips",
                                         "reread_frames")}
            res["wall_s"] = time.perf_counter() - t0
            # what the true silhouette itself scores against the same corrupted masks (the iou's ceiling)
            ceiling = measure_iou_ceiling.measure(ds, frames=args.frames, model=True)
            res["iou_ceiling"], res["iou_model_ceiling"] = ceiling["iou_ceiling"], ceiling["iou_model_ceiling"]
            res["static_camera"] = fixed
            res["track_ground"] = moving
            res["silhouette"] = args.silhouette
            if not args.no_reacquire:
                hide = (args.hide_start, args.hide_start + HIDE_FRAMES)
                ensure_dataset(ds, scene, robot, args.seed, hide[1] + args.reacquire_tail)
                hopts = replace(opts, max_frames=hide[1] + args.reacquire_tail, hide=(hide,))
                t1 = time.perf_counter()
                run_tracking(ds, robot, run_dir / "hidden", options=hopts)
                res["reacquire_frames"] = reacquire_frames(run_dir / "hidden" / "track.csv", hide[1])
                res["reacquire_hidden_frames"] = list(hide)
                res["reacquire_wall_s"] = time.perf_counter() - t1
            results[key] = res
            print(f"{key}: {json.dumps(res)}", file=sys.stderr)
    timing = render_timing(dataset_dir(data, "drone", "planar-snake-11", args.seed)
                           if (dataset_dir(data, "drone", "planar-snake-11", args.seed) / "meta.json").is_file()
                           else ensure_dataset(dataset_dir(data, args.scenes[0], args.robots[0], args.seed),
                                               args.scenes[0], args.robots[0], args.seed, args.frames),
                           reps=max(1, args.timing_reps))
    summary = {"per_scene": results, **timing,
               "mean_fps": float(np.mean([r["fps"] for r in results.values()])) if results else None,
               "refine_steps": args.refine_steps, "frames": args.frames, "torch_threads": torch.get_num_threads(),
               "up": args.up, "hold_frames": args.hold_frames}
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
