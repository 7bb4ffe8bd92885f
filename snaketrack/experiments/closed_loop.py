"""A closed loop that steers a snake robot by vision (``snaketrack sim closed-loop``).

Processes and links:

- **simulator** (this process): the world stepped live (:class:`~snaketrack.sim.oal_live.OALStepper`):
  ``floor``, an open floor with the robot on passive wheels (MuJoCo's rolling contacts: low friction
  along each link, μ = 1 across it), or ``channel``, the obstacle world of the Jacobian paper; its
  camera and renderer (:class:`~snaketrack.sim.video.VideoRenderer`, the ``sim video`` scene, camera
  path and image degradations);
- **tracking service** (threads of this process): a
  :class:`~snaketrack.service.service.TrackingService` fed by a
  :class:`~snaketrack.service.capture.PushSource`, serving states on its real WebSocket on the
  loopback. The observed masks are MuJoCo's robot masks, corrupted like a segmenter's
  (``PipelineConfig(corrupt_masks=True)``): a segmenter would need a model trained on the scene's own
  labels first, and would share the CPU with the renderer and the tracker;
- **controller** (its own OS process, started with ``spawn``):
  :func:`~snaketrack.experiments.loop_controller.controller_main`, which reads only the streamed states
  and the camera's own pose, checks which end is the head, learns Ĵ with the UKF and sends
  :class:`~snaketrack.experiments.steering.GaitCommand` back on the robot's command link (a queue).

With ``states="truth"`` the same controller reads the simulator's own states from a queue at the
same frame times and pacing instead (the reference run); nothing is rendered or tracked. With
``states="none"`` no controller runs: the plain gait, open loop.

Pacing: frame k shows simulated time ``t_k = start_time + k / fps``.

- ``lockstep``: the simulator hands frame k over and waits (at most ``step_timeout`` wall seconds)
  until the controller has answered that frame's state; the answer acts from ``t_{k+1}`` on. The
  vision path's latency is one frame of simulated time however loaded the CPU, and nothing is
  dropped; its wall-clock latency is still measured.
- ``wall``: frame k is handed over at wall time ``k / fps · time_scale`` after the start; the service
  takes the newest frame and drops the rest, and each command acts from the first frame after it
  arrived, so the robot feels the real latency divided by ``time_scale``.

Camera: a drone (or tripod) over the route planned for the robot. In the channel the plan is the
open-loop gait of the same seed (the channel sets the route); on the floor it is the route the
same controller steers on the simulator's states with no latency (:func:`planned_motion`), since
the plain gait goes elsewhere. The controller is given the camera's pose per frame, as a drone's
navigation would give it, never the robot's.
"""
from __future__ import annotations

import math
import multiprocessing as mp
import queue
import time
from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch

from snaketrack.errors import InputError
from snaketrack.experiments.loop_controller import LoopController, controller_main
from snaketrack.experiments.steering import SteeringConfig
from snaketrack.service import PushSource, ServiceConfig, TrackingService
from snaketrack.service.client import RobotState
from snaketrack.sim.mjcf import WheelParams
from snaketrack.sim.oal import OALConfig, oal_world_xml
from snaketrack.sim.oal_live import OALStepper
from snaketrack.sim.video import Motion, VideoConfig, VideoRenderer, _mat2quat, robot_motion
from snaketrack.tracker.calib.camera import Camera
from snaketrack.tracker.run.pipeline import PipelineConfig

STATE_SOURCES = ("none", "truth", "tracked")
WORLDS = ("floor", "channel")
PACINGS = ("lockstep", "wall")
SCENES = ("drone", "static")
#: default waypoints (x, y) [m] per world: on the floor they need turns both ways; in the channel
#: they lie along it
DEFAULT_TARGETS = {"floor": ((0.7, 0.4), (1.4, -0.2), (2.0, 0.5)),
                   "channel": ((0.6, 0.0), (1.2, 0.0), (1.8, 0.0))}
#: default longest run [s, simulated] per world
DEFAULT_DURATION = {"floor": 20.0, "channel": 12.0}


def _check_choice(flag: str, value, choices) -> None:
    if value not in choices:
        raise InputError(f"{flag} {value!r}; expected one of {', '.join(choices)}")


@dataclass(frozen=True)
class ClosedLoopConfig:
    """One closed-loop run.

    world: ``floor`` (open floor, passive wheels) or ``channel`` (the obstacle world); default floor.
    scene: camera, ``drone`` or ``static``; default ``drone``.
    targets: waypoints (x, y) in the world [m], in order; default per world (``DEFAULT_TARGETS``).
    states: where the controller's states come from: ``tracked``, ``truth`` or ``none`` (no
        controller: open loop); default ``tracked``.
    pacing: ``lockstep`` or ``wall`` (module doc); default lockstep.
    seed: seeds the world, scene, camera path, image noise and mask corruption; default 0.
    fps: camera frame rate [1/s, simulated]; default 15.
    width, height: image size [px]; default 320 x 180.
    body_width_px: the body's nominal width in the image [px] (sets the focal length); default 6.
    time_scale: with ``wall`` pacing, wall seconds per simulated second; default 3.
    step_timeout: with ``lockstep``, the longest wait for the controller's answer to a frame [s, wall];
        default 10 (the first frame waits up to 60: the tracker's first search).
    duration: the longest run [s, simulated, from the gait's start]; default per world (floor 20, channel 12).
    start_time: [s] of simulated time before the camera and controller start (the gait's ramp); default 1.
    refine_steps: the tracker's refinement iterations per frame; default 10.
    steering: :class:`~snaketrack.experiments.steering.SteeringConfig`; default per world (floor: the
        defaults; channel: ``SteeringConfig.channel()``).
    robot: shipped robot name or robot YAML; default ``planar-snake-11``.
    tolerance: a waypoint is reached when the simulator's head comes within this distance [m]; default 0.1.
    """

    world: str = "floor"
    scene: str = "drone"
    targets: Optional[tuple[tuple[float, float], ...]] = None
    states: str = "tracked"
    pacing: str = "lockstep"
    seed: int = 0
    fps: float = 15.0
    width: int = 320
    height: int = 180
    body_width_px: float = 6.0
    time_scale: float = 3.0
    step_timeout: float = 10.0
    duration: Optional[float] = None
    start_time: float = 1.0
    refine_steps: Optional[int] = 10
    steering: Optional[SteeringConfig] = None
    robot: str = "planar-snake-11"
    tolerance: float = 0.1

    def __post_init__(self):
        _check_choice("--world", self.world, WORLDS)
        _check_choice("--scene", self.scene, SCENES)
        _check_choice("--states", self.states, STATE_SOURCES)
        _check_choice("--pacing", self.pacing, PACINGS)
        if self.targets is None:
            object.__setattr__(self, "targets", DEFAULT_TARGETS[self.world])
        if self.duration is None:
            object.__setattr__(self, "duration", DEFAULT_DURATION[self.world])
        if self.steering is None:
            steering = SteeringConfig() if self.world == "floor" else SteeringConfig.channel()
            object.__setattr__(self, "steering", steering)
        t = np.asarray(self.targets, float)
        if t.ndim != 2 or t.shape[1] != 2 or len(t) == 0 or not np.all(np.isfinite(t)):
            raise InputError(f"--targets {self.targets!r}; expected X,Y;X,Y;... in metres")
        for name in ("fps", "time_scale", "duration", "step_timeout", "tolerance"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise InputError(f"--{name.replace('_', '-')} {v!r}; expected a positive number")
        if not isinstance(self.seed, (int, np.integer)) or self.seed < 0:
            raise InputError(f"--seed {self.seed!r}; expected a non-negative integer")
        if not 0 <= self.start_time < self.duration:
            raise InputError(f"--duration {self.duration!r}: not past the {self.start_time!r} s of the gait's ramp "
                             "before the camera starts; expected a longer run")

    @property
    def frames(self) -> int:
        """Frames the camera can show: from ``start_time`` to ``duration``."""
        return max(2, int(math.floor((self.duration - self.start_time) * self.fps)) + 1)

    def oal_config(self):
        """The world's :class:`~snaketrack.sim.oal.OALConfig`: the floor without posts and with
        passive wheels, or the channel as ``sim oal`` runs it."""
        if self.world == "floor":
            return OALConfig(seed=self.seed, robot=self.robot, obstacles=False, wheels=WheelParams())
        return OALConfig(seed=self.seed, robot=self.robot)


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


def _link1_pose(stepper) -> tuple[np.ndarray, np.ndarray]:
    """Link 1's origin (3,) [m] and rotation (3, 3) in the world, from the stepper's MuJoCo data."""
    import mujoco  # deferred: the module imports without MuJoCo

    b = mujoco.mj_name2id(stepper.model, mujoco.mjtObj.mjOBJ_BODY, "link_1")
    return stepper.data.xpos[b].copy(), stepper.data.xmat[b].reshape(3, 3).copy()


def _truth_state(stepper, frame: int, t: float, c: np.ndarray, R: np.ndarray):
    """The simulator's state of ``frame`` as a RobotState in the camera frame (the truth-fed link);
    camera centre ``c`` (3,) [m] and rotation ``R`` (3, 3) (``R_wc``)."""
    p, Rb = _link1_pose(stepper)
    now = time.time()
    return RobotState(frame=frame, t=t, q=stepper.phi, qdot=stepper.phidot,
                      base_position=R.T @ (p - c), base_quat=_mat2quat(R.T @ Rb),
                      head=R.T @ (stepper.head() - c), status="tracked", iou=1.0, capture_time=now,
                      publish_time=now, received_time=now, row={})


def frame_times(config: ClosedLoopConfig) -> np.ndarray:
    """(F,) simulated times [s] of the camera's frames: ``start_time + k / fps``."""
    return config.start_time + np.arange(config.frames) / config.fps


def planned_motion(config: ClosedLoopConfig):
    """The route planned for the robot, for the camera to fly over (module doc): the world of
    ``config`` stepped frame by frame with the controller's logic
    (:class:`~snaketrack.experiments.loop_controller.LoopController`) fed the simulator's states directly,
    each command acting from the next frame on. A :class:`~snaketrack.sim.video.Motion` at the frame
    times (qpos (F, nq))."""
    oal = config.oal_config()
    stepper = OALStepper(oal)
    ctl = LoopController(np.asarray(config.targets, float), stepper.robot, config.steering)
    times = frame_times(config)
    qpos, pending = [], None
    for k, t in enumerate(times):
        stepper.advance(t)
        if pending is not None:
            stepper.set_offset(pending.offset)
        qpos.append(stepper.qpos)
        p, Rb = _link1_pose(stepper)
        pending, _ = ctl.step(t, k, stepper.phi, stepper.phidot, stepper.head(), p, _mat2quat(Rb), "tracked",
                              lambda x: x)
    return Motion(times=times - times[0], sim_times=times, qpos=np.array(qpos),
                  source=f"planned route (world {config.world}, seed {config.seed})", xml=oal_world_xml(oal))


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


def _await_command(commands, frame: int, timeout: float):
    """The controller's answer to ``frame`` from ``commands`` within ``timeout`` [s, wall]: (command or
    the newest older one or None, whether it timed out)."""
    deadline = time.monotonic() + timeout
    newest = None
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return newest, True
        try:
            cmd = commands.get(timeout=left)
        except queue.Empty:
            return newest, True
        newest = cmd
        if cmd.frame >= frame:
            return cmd, False


def run_closed_loop(config: ClosedLoopConfig, progress: bool = False) -> dict:
    """Run one closed loop (module doc); returns its record for
    :func:`~snaketrack.experiments.closed_loop_outputs.write_run`: ``config``, ``truth`` (per frame: t, head
    (x, y), offset δ on the head joint, qpos), ``controller`` (the controller's log; empty open loop),
    ``service`` (the service's figures, tracked only), ``command_age_s`` (simulated age of each command
    when applied), ``lockstep_timeouts`` (frames the simulator stopped waiting for), ``frames``
    (rendered RGB and masks, tracked only), ``K`` and the camera path (None open loop)."""
    cfg = config
    targets = np.asarray(cfg.targets, float)
    stepper = OALStepper(cfg.oal_config())
    times = frame_times(cfg)
    truth: dict = {"frame": [], "t": [], "head": [], "delta": [], "qpos": []}
    ages: list[float] = []
    frames: list[tuple[np.ndarray, np.ndarray]] = []
    log: dict = {}
    timeouts = 0
    lockstep = cfg.pacing == "lockstep"

    def record(k: int, t: float) -> None:
        truth["frame"].append(k)
        truth["t"].append(t)
        truth["head"].append(stepper.head()[:2])
        truth["delta"].append(float(stepper.offset[-1]))
        truth["qpos"].append(stepper.qpos)

    def finished(t: float, done_at: Optional[float]) -> tuple[bool, Optional[float]]:
        if done_at is None and _reach(targets, np.array(truth["head"]), np.array(truth["t"]),
                                      cfg.tolerance)[-1] is not None:
            done_at = t
        return done_at is not None and t - done_at >= 1.0, done_at  # the controller has had a second to see it

    def report(k: int, t: float) -> None:
        if progress and k % int(cfg.fps) == 0:
            h = stepper.head()
            print(f"t = {t:5.2f} s  head ({h[0]:+.3f}, {h[1]:+.3f}) m  delta {stepper.offset[-1]:+.3f} rad",
                  flush=True)

    if cfg.states == "none":  # the plain gait: no camera, no controller
        done_at = None
        for k, t in enumerate(times):
            stepper.advance(t)
            record(k, t)
            report(k, t)
            stop, done_at = finished(t, done_at)
            if stop:
                break
        return {"config": cfg, "truth": {k: np.asarray(v) for k, v in truth.items()}, "controller": {},
                "service": None, "command_age_s": np.zeros(0), "lockstep_timeouts": 0, "frames": [], "K": None,
                "camera_positions": None, "camera_rotations": None, "robot": stepper.robot}

    vcfg = VideoConfig(scene=cfg.scene, robot=cfg.robot, frames=cfg.frames, seed=cfg.seed, width=cfg.width,
                       height=cfg.height, fps=cfg.fps, start_time=cfg.start_time,
                       target_width_px=cfg.body_width_px, obstacles=cfg.world == "channel")
    motion = planned_motion(cfg) if cfg.world == "floor" else robot_motion(vcfg)
    renderer = VideoRenderer(vcfg, motion, effects=lockstep)  # wall pacing: the renderer keeps up
    path = renderer.path
    tracked = cfg.states == "tracked"
    ctx = mp.get_context("spawn")
    commands, results = ctx.Queue(), ctx.Queue()
    service = source = truth_link = None
    threads = None
    if tracked:
        # one intra-op thread: the renderer and the controller share the cores, and torch's threads
        # spinning against them made each tracked frame 100x slower on a two-core machine
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
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
                       args=(link, commands, results, path.positions, path.rotations, targets, stepper.robot,
                             cfg.steering))
    up_world = np.array([0.0, 0.0, 1.0])
    try:
        proc.start()
        kind, _ = results.get(timeout=120)
        if kind != "ready":
            raise InputError(f"the controller did not start ({kind})")
        time.sleep(0.5)  # the client subscribes on the server's first advertisement
        stepper.advance(cfg.start_time)
        done_at, pending = None, None
        wall0 = time.monotonic()
        for k, t in enumerate(times):
            t = float(t)
            if lockstep:  # the answer to frame k - 1 acts from t_k on
                stepper.advance(t)
                if pending is not None:
                    stepper.set_offset(pending.offset)
                    ages.append(t - pending.t)
                    pending = None
            else:  # the newest command that has arrived acts from this frame's physics on
                if pending is not None:
                    stepper.set_offset(pending.offset)
                    ages.append(t - pending.t)
                    pending = None
                while True:
                    try:
                        cmd = commands.get_nowait()
                    except queue.Empty:
                        break
                    stepper.set_offset(cmd.offset)
                    ages.append(t - cmd.t)
                stepper.advance(t)
            c, R = path.positions[k], path.rotations[k]
            record(k, t)
            if tracked:
                rgb, mask, _ = renderer.frame(k, qpos=stepper.qpos)
                source.push(rgb, mask, t=t, up=R.T @ up_world, index=k)
                frames.append((rgb, mask))
            else:
                truth_link.put(_truth_state(stepper, k, t, c, R))
            stop, done_at = finished(t, done_at)
            report(k, t)
            if stop:
                if lockstep and tracked:  # lockstep waits for every frame handed over, the last one too
                    timeouts += int(_await_command(commands, k, cfg.step_timeout)[1])
                break
            if lockstep:
                pending, timed_out = _await_command(commands, k, 60.0 if k == 0 else cfg.step_timeout)
                timeouts += int(timed_out)
            else:
                if k == 0:  # the first frame's pose search, a one-time cost: the clock starts once it is answered
                    pending, timed_out = _await_command(commands, 0, 60.0)
                    timeouts += int(timed_out)
                    wall0 = time.monotonic() - 1.0 / cfg.fps * cfg.time_scale
                wait = wall0 + (k + 1) / cfg.fps * cfg.time_scale - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
    finally:
        figures = service.stop() if service is not None else None
        if truth_link is not None:
            truth_link.put(None)
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline:
            try:
                kind, payload = results.get(timeout=1.0)
            except queue.Empty:
                if proc.pid is None or not proc.is_alive():
                    break
                continue
            if kind == "log":
                log = payload
                break
        if proc.pid is not None:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.terminate()
        renderer.close()
        if threads is not None:
            torch.set_num_threads(threads)
    return {"config": cfg, "truth": {k: np.asarray(v) for k, v in truth.items()}, "controller": log,
            "service": figures, "command_age_s": np.asarray(ages), "lockstep_timeouts": timeouts,
            "frames": frames, "K": renderer.K, "camera_positions": path.positions,
            "camera_rotations": path.rotations, "robot": stepper.robot}
