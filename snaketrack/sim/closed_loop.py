"""A closed loop in the obstacle world that steers by vision (``snaketrack sim closed-loop``).

Processes and links:

- **simulator** (this process): the obstacle world (:class:`~snaketrack.sim.oal_live.OALStepper`),
  its camera and renderer (:class:`~snaketrack.sim.video.VideoRenderer`, the ``sim video`` scene,
  camera path and image degradations), paced against the wall clock;
- **tracking service** (threads of this process): a
  :class:`~snaketrack.service.service.TrackingService` fed by a
  :class:`~snaketrack.service.capture.PushSource`, serving states on its real WebSocket on the
  loopback. The observed masks are MuJoCo's robot masks, corrupted like a segmenter's
  (``PipelineConfig(corrupt_masks=True)``): a segmenter is too slow to run live on a CPU;
- **controller** (its own OS process, started with ``spawn``):
  :func:`~snaketrack.sim.loop_controller.controller_main`, which reads only the streamed states
  and the camera's own pose, learns Ĵ with the UKF and sends
  :class:`~snaketrack.sim.steering.GaitCommand` back on the robot's command link (a queue).

With ``states="truth"`` the same controller reads the simulator's own states from a queue at the
same frame times and pacing instead (the reference run); nothing is rendered or tracked.

Pacing: frame k shows simulated time ``t_k = start_time + k / fps`` and is handed over at wall
time ``k / fps · time_scale`` after the start, so the vision path's latency is real, scaled by
``time_scale`` (wall seconds per simulated second). Commands take effect from the next frame's
physics step on. The camera flies the path framed from the open-loop gait of the same seed (a
drone's flight plan over the expected route).
"""
from __future__ import annotations

import math
import queue
import time
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from snaketrack.errors import InputError
from snaketrack.sim.steering import SteeringConfig

STATE_SOURCES = ("truth", "tracked")
DEFAULT_TARGETS = ((0.6, 0.0), (1.2, 0.0), (1.8, 0.0))


@dataclass(frozen=True)
class ClosedLoopConfig:
    """One closed-loop run.

    scene: camera, ``drone`` or ``static``; default ``drone``.
    targets: waypoints (x, y) in the world [m], in order; default (0.6, 0), (1.2, 0), (1.8, 0).
    states: where the controller's states come from, ``tracked`` or ``truth``; default ``tracked``.
    seed: seeds the world, scene, camera path, image noise and mask corruption; default 0.
    fps: camera frame rate [1/s, simulated]; default 15.
    width, height: image size [px]; default 320 x 180.
    body_width_px: the body's nominal width in the image [px] (sets the focal length); default 6.
    time_scale: wall seconds per simulated second; default 3.
    duration: the longest run [s, simulated, from the gait's start]; default 12.
    start_time: [s] of simulated time before the camera and controller start (the gait's ramp); default 1.
    refine_steps: the tracker's refinement iterations per frame; default 4.
    steering: :class:`~snaketrack.sim.steering.SteeringConfig`.
    robot: shipped robot name or robot YAML; default ``planar-snake-11``.
    """

    scene: str = "drone"
    targets: tuple[tuple[float, float], ...] = DEFAULT_TARGETS
    states: str = "tracked"
    seed: int = 0
    fps: float = 15.0
    width: int = 320
    height: int = 180
    body_width_px: float = 6.0
    time_scale: float = 3.0
    duration: float = 12.0
    start_time: float = 1.0
    refine_steps: Optional[int] = 4
    steering: SteeringConfig = field(default_factory=SteeringConfig)
    robot: str = "planar-snake-11"

    def __post_init__(self):
        if self.scene not in ("drone", "static"):
            raise InputError(f"--scene {self.scene!r}; expected drone or static")
        if self.states not in STATE_SOURCES:
            raise InputError(f"--states {self.states!r}; expected one of {', '.join(STATE_SOURCES)}")
        t = np.asarray(self.targets, float)
        if t.ndim != 2 or t.shape[1] != 2 or len(t) == 0 or not np.all(np.isfinite(t)):
            raise InputError(f"--targets {self.targets!r}; expected X,Y;X,Y;... in metres")
        for name in ("fps", "time_scale", "duration"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise InputError(f"--{name.replace('_', '-')} {v!r}; expected a positive number")
        if not 0 <= self.start_time < self.duration:
            raise InputError(f"start_time {self.start_time!r} s; expected 0 <= start_time < duration")

    @property
    def frames(self) -> int:
        """Frames the camera can show: from ``start_time`` to ``duration``."""
        return max(2, int(math.floor((self.duration - self.start_time) * self.fps)) + 1)


def parse_targets(text: str) -> tuple[tuple[float, float], ...]:
    """``"0.6,0;1.2,0.05"`` → ((0.6, 0.0), (1.2, 0.05)) metres; InputError otherwise.

    >>> parse_targets("0.6,0;1.2,0.05")
    ((0.6, 0.0), (1.2, 0.05))
    """
    out = []
    for part in str(text).split(";"):
        xy = part.split(",")
        try:
            if len(xy) != 2:
                raise ValueError
            x, y = float(xy[0]), float(xy[1])
        except ValueError:
            raise InputError(f"--targets {text!r}; expected X,Y;X,Y;... in metres, e.g. 0.6,0;1.2,0") from None
        if not (math.isfinite(x) and math.isfinite(y)):
            raise InputError(f"--targets {text!r}; expected finite coordinates")
        out.append((x, y))
    return tuple(out)


def _truth_state(stepper, frame: int, t: float, c: np.ndarray, R: np.ndarray):
    """The simulator's state of ``frame`` as a RobotState in the camera frame (the truth-fed link)."""
    from snaketrack.service.client import RobotState
    from snaketrack.sim.video import _mat2quat

    d = stepper.data
    import mujoco

    b = mujoco.mj_name2id(stepper.model, mujoco.mjtObj.mjOBJ_BODY, "link_1")
    now = time.time()
    return RobotState(frame=frame, t=t, q=stepper.phi, qdot=stepper.phidot,
                      base_position=R.T @ (d.xpos[b] - c), base_quat=_mat2quat(R.T @ d.xmat[b].reshape(3, 3)),
                      head=R.T @ (stepper.head() - c), status="tracked", iou=1.0, capture_time=now,
                      publish_time=now, received_time=now, row={})


def _reach(targets: np.ndarray, heads: np.ndarray, times: np.ndarray, tol: float) -> list[Optional[float]]:
    """First times [s] the head path (T, 2) comes within ``tol`` of each waypoint, in order.

    >>> _reach(np.array([[1.0, 0], [2.0, 0]]), np.array([[0.0, 0], [0.95, 0], [1.5, 0]]), np.arange(3.0), 0.1)
    [1.0, None]
    """
    out: list[Optional[float]] = [None] * len(targets)
    i = 0
    for t, p in zip(times, heads):
        while i < len(targets) and float(np.hypot(*(targets[i] - p))) <= tol:
            out[i] = float(t)
            i += 1
    return out


def run_closed_loop(config: ClosedLoopConfig, progress: bool = False) -> dict:
    """Run one closed loop (module doc); returns its record for
    :func:`~snaketrack.sim.closed_loop_outputs.write_run`: ``config``, ``truth`` (per frame: t, head
    (x, y), offset δ, qpos), ``controller`` (the controller's log), ``service`` (the service's figures,
    tracked only), ``command_age_s`` (simulated age of each command when applied), ``frames``
    (rendered RGB and masks, tracked only), ``K`` and the camera path."""
    import multiprocessing as mp

    from snaketrack.sim.loop_controller import controller_main
    from snaketrack.sim.oal import OALConfig
    from snaketrack.sim.oal_live import OALStepper
    from snaketrack.sim.video import VideoConfig, VideoRenderer, robot_motion

    cfg = config
    targets = np.asarray(cfg.targets, float)
    stepper = OALStepper(OALConfig(seed=cfg.seed, robot=cfg.robot))
    vcfg = VideoConfig(scene=cfg.scene, robot=cfg.robot, frames=cfg.frames, seed=cfg.seed, width=cfg.width,
                       height=cfg.height, fps=cfg.fps, start_time=cfg.start_time,
                       target_width_px=cfg.body_width_px)
    renderer = VideoRenderer(vcfg, robot_motion(vcfg))
    path = renderer.path
    tracked = cfg.states == "tracked"
    ctx = mp.get_context("spawn")
    commands, results = ctx.Queue(), ctx.Queue()
    service = source = truth_link = None
    if tracked:
        from snaketrack.service import PushSource, ServiceConfig, TrackingService
        from snaketrack.tracker.camera import Camera
        from snaketrack.tracker.pipeline import PipelineConfig

        source = PushSource(cfg.width, cfg.height, cfg.fps)
        pipeline = PipelineConfig(hold_frames=0, track_ground=cfg.scene == "drone",
                                  static_camera=cfg.scene == "static", corrupt_masks=True,
                                  corrupt_seed=cfg.seed, refine_steps=cfg.refine_steps)
        service = TrackingService(source, stepper.robot, Camera.from_K(renderer.K, cfg.width, cfg.height),
                                  pipeline=pipeline, config=ServiceConfig(host="127.0.0.1", port=0))
        service.start()
        link = service.url
    else:
        truth_link = ctx.Queue()
        link = truth_link
    proc = ctx.Process(target=controller_main, name="snaketrack-controller", daemon=True,
                       args=(link, commands, results, path.positions, path.rotations, targets, stepper.robot.dof,
                             cfg.steering))
    log: dict = {}
    truth = {"frame": [], "t": [], "head": [], "delta": [], "qpos": []}
    ages: list[float] = []
    frames: list[tuple[np.ndarray, np.ndarray]] = []
    try:
        proc.start()
        kind, _ = results.get(timeout=120)
        if kind != "ready":
            raise InputError(f"the controller did not start ({kind})")
        time.sleep(0.5)  # the client subscribes on the server's first advertisement
        stepper.advance(cfg.start_time)
        halted, done_at = False, None
        wall0 = time.monotonic()
        up_world = np.array([0.0, 0.0, 1.0])
        for k in range(cfg.frames):
            t = cfg.start_time + k / cfg.fps
            while True:  # the newest command wins; each applies from this frame's physics on
                try:
                    cmd = commands.get_nowait()
                except queue.Empty:
                    break
                stepper.set_offset(cmd.offset)
                ages.append(t - cmd.t)
                halted = halted or cmd.halt
            stepper.advance(t)
            c, R = path.positions[k], path.rotations[k]
            head = stepper.head()
            truth["frame"].append(k)
            truth["t"].append(t)
            truth["head"].append(head[:2])
            truth["delta"].append(float(stepper.offset[-1]))
            truth["qpos"].append(stepper.qpos)
            if halted:
                break
            if tracked:
                rgb, mask, _ = renderer.frame(k, qpos=stepper.qpos)
                source.push(rgb, mask, t=t, up=R.T @ up_world, index=k)
                frames.append((rgb, mask))
            else:
                truth_link.put(_truth_state(stepper, k, t, c, R))
            if done_at is None and _reach(targets, np.array(truth["head"]), np.array(truth["t"]),
                                          cfg.steering.tolerance)[-1] is not None:
                done_at = t
            if done_at is not None and t - done_at >= 1.0:
                break  # every waypoint reached; the controller has had a second to see it
            if progress and k % int(cfg.fps) == 0:
                print(f"t = {t:5.2f} s  head ({head[0]:+.3f}, {head[1]:+.3f}) m  "
                      f"delta {stepper.offset[-1]:+.3f} rad", flush=True)
            wait = wall0 + (k + 1) / cfg.fps * cfg.time_scale - time.monotonic()
            if wait > 0:
                time.sleep(wait)
    finally:
        figures = service.stop() if service is not None else None
        if truth_link is not None:
            truth_link.put(None)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                kind, payload = results.get(timeout=1.0)
            except queue.Empty:
                if not proc.is_alive():
                    break
                continue
            if kind == "log":
                log = payload
                break
        proc.join(timeout=10)
        if proc.is_alive():
            proc.terminate()
        renderer.close()
    return {"config": cfg, "truth": {k: np.asarray(v) for k, v in truth.items()}, "controller": log,
            "service": figures, "command_age_s": np.asarray(ages), "frames": frames, "K": renderer.K,
            "camera_positions": path.positions, "camera_rotations": path.rotations,
            "robot": stepper.robot, "start_head": np.asarray(truth["head"][0]) if truth["head"] else None}
