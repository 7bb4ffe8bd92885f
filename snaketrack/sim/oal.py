"""The obstacle-aided-locomotion (OAL) world of the Jacobian paper, simulated in MuJoCo.

Scene (paper eq. 8): vertical cylinders of radius 0.05 m at (0.5k + 0.25, 0.1)
and (0.5k, −0.1) m for k = −3..10, on a flat floor. The robot starts straight
along +x, head point at the origin (θ_N = 0, r = 0, φ = 0, up to an optional
tiny seeded perturbation), and follows the gait of :mod:`snaketrack.sim.gait`
(eq. 9, wave sign for tail-to-head numbering) under a joint PD law run in
Python every step:

    τ = kp (φ_d − φ) + kd (φ̇_d − φ̇),   clipped to the motor's torque–speed limits

(torque motors; no MuJoCo ``kv``: its damping resists the actual joint speed
instead of following the reference's rate, and saturates the joints). The
clip is a DC-motor line with stall torque ``torque_limit`` = 5 N·m and no-load speed
``motor_speed`` = 10 rad/s (a hobby servo's "0.10 s/60°"): the gait needs at
most A·ω = 4.2 rad/s and ≤ 1.5 N·m (99th percentile), so normal locomotion is
unaffected, but when ``resume="reference"`` makes the references jump the
joints do not whip round at 40–65 rad/s as they do under a plain torque clip,
where they buck the light chain off the floor (tail 7–44 cm up) and throw it
out of the obstacle channel in about one run in three.

Contacts (tuned, see docs/oal.md): free-joint root (the ground carries the
weight), elliptic friction cone (isotropic Coulomb friction on the ground),
floor μ = 0.5, snake and obstacle μ = 0.1; MuJoCo takes the larger of two
geoms' friction, so snake–floor contacts see 0.5 and snake–obstacle 0.1.
(Floor μ = 1.0 advances as far among the obstacles but drifts 0.44 m (18 %)
without them, and after a halt with ``resume="reference"`` it leaves the
channel in most seeds; μ = 0.5 drifts 0.14–0.18 m (6–7 %). Sweep in
docs/oal.md.)
Keep dt ≤ 1/240 s: the PD law is explicit (one step of delay) and goes
unstable at 1/120 s with kp = 20.

Recorded per step n = 0..T−1 at t = n·dt (the state *before* that step's
integration, i.e. the state the controller saw): joint angles φ and speeds φ̇
(robot file order), link angles θ, head point (centre of the head link)
position and velocity in the world frame, and MuJoCo's full ``qpos``.

>>> res = simulate_oal(OALConfig(duration=0.05))
>>> res.phi.shape, res.theta.shape, res.head_xy.shape, res.qpos.shape
((12, 10), (12, 11), (12, 2), (12, 17))
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
from tqdm import tqdm

from snaketrack.errors import ConvergenceError, InputError
from snaketrack.io import atomic_write_text
from snaketrack.models.kinematics import planar_link_angles
from snaketrack.models.robot import Robot, load_robot
from snaketrack.sim.gait import RESUME_MODES, Gait, GaitParams
from snaketrack.sim.mjcf import (
    ContactParams,
    WheelParams,
    build_world,
    joint_dof_addresses,
    joint_qpos_addresses,
    load_model,
    obstacle_positions,
    to_xml,
)


@dataclass(frozen=True)
class OALConfig:
    """Settings of one OAL run. Defaults are the tuned, measured configuration (docs/oal.md).

    duration: simulated time [s]; T = round(duration / dt) recorded steps.
    dt: MuJoCo time step [s] (the paper's 1/240).
    halt: (t_stop, t_resume) [s] to freeze the undulation (paper's experiment 2: (5, 7)), or None.
    resume: after a halt, ``"reference"`` (references jump back to φ_d(t)) or
        ``"phase"`` (the wave continues from the frozen phase); see :mod:`snaketrack.sim.gait`.
    obstacles: True for the paper's obstacle rows, False for an empty floor.
    seed: seeds the initial perturbation (same seed → same states, bit for bit).
    robot: shipped robot name or a robot YAML path.
    amplitude, omega, phase_lag: gait A [rad], ω [rad/s], δ [rad] (eq. 9; δ > 0
        for tail-to-head numbering).
    ramp_time: [s] amplitude smoothstep ramp at the start (0 = none).
    pitch_amplitude: [rad] pitch wave on 2-DOF robots (0 = planar undulation).
    kp: [N·m/rad] joint stiffness. kd: [N·m·s/rad] gain on (φ̇_d − φ̇).
    torque_limit: [N·m] per joint coordinate (the motor's stall torque τ_s).
    motor_speed: [rad/s] no-load speed ω_0 of a DC-motor torque–speed line:
        the torque is limited to [max(−τ_s, −τ_s(1 + φ̇/ω_0)), min(τ_s, τ_s(1 − φ̇/ω_0))],
        so a joint cannot be driven faster than ω_0 (braking stays available).
        ``inf`` = a plain ±torque_limit clip.
    floor_friction, snake_friction, obstacle_friction: sliding μ (max of a pair is used);
        floor 0.5 is the tuned value (module doc).
    cone: ``"elliptic"`` (isotropic) or ``"pyramidal"`` friction cone.
    obstacle_radius, obstacle_height: [m].
    init_noise: std [rad] of the seeded Gaussian perturbation of the initial
        joint angles (0 = exactly straight, the paper's φ = 0; default 1 mrad,
        far too small to touch the obstacles).
    wheels: passive wheels under the links (:class:`~snaketrack.sim.mjcf.WheelParams`: they roll
        along each link and grip across it), or None (default: the links slide on the floor).
    """

    duration: float = 10.0
    dt: float = 1 / 240
    halt: Optional[tuple[float, float]] = None
    resume: str = "reference"
    obstacles: bool = True
    seed: int = 0
    robot: str = "planar-snake-11"
    amplitude: float = math.pi / 3
    omega: float = 4.0
    phase_lag: float = math.pi / 3
    ramp_time: float = 1.0
    pitch_amplitude: float = 0.0
    kp: float = 20.0
    kd: float = 0.33
    torque_limit: float = 5.0
    motor_speed: float = 10.0
    floor_friction: float = 0.5
    snake_friction: float = 0.1
    obstacle_friction: float = 0.1
    cone: str = "elliptic"
    obstacle_radius: float = 0.05
    obstacle_height: float = 0.10
    init_noise: float = 1e-3
    wheels: Optional[WheelParams] = None

    def __post_init__(self) -> None:
        def pos(name: str, allow_zero: bool = False) -> None:
            v = getattr(self, name)
            ok = isinstance(v, (int, float)) and math.isfinite(v) and (v > 0 or (allow_zero and v == 0))
            if not ok:
                raise InputError(f"OALConfig.{name} = {v!r}; "
                                 f"expected a {'non-negative' if allow_zero else 'positive'} number")

        for name in ("duration", "dt", "omega", "torque_limit", "floor_friction", "snake_friction",
                     "obstacle_friction", "obstacle_radius", "obstacle_height"):
            pos(name)
        if not (isinstance(self.motor_speed, (int, float)) and self.motor_speed > 0):
            raise InputError(f"OALConfig.motor_speed = {self.motor_speed!r}; expected a positive number [rad/s] or inf")
        for name in ("amplitude", "ramp_time", "pitch_amplitude", "kp", "kd", "init_noise"):
            pos(name, allow_zero=True)
        if self.dt > self.duration:
            raise InputError(f"OALConfig.dt = {self.dt!r} s; expected at most duration = {self.duration!r} s")
        if self.resume not in RESUME_MODES:
            raise InputError(f"OALConfig.resume = {self.resume!r}; expected one of {', '.join(RESUME_MODES)}")
        if self.cone not in ("elliptic", "pyramidal"):
            raise InputError(f"OALConfig.cone = {self.cone!r}; expected 'elliptic' or 'pyramidal'")
        if not isinstance(self.seed, (int, np.integer)) or self.seed < 0:
            raise InputError(f"OALConfig.seed = {self.seed!r}; expected a non-negative integer")
        if self.halt is not None:
            h = tuple(self.halt)
            if (len(h) != 2 or not all(isinstance(x, (int, float)) and math.isfinite(x) for x in h)
                    or not (0 <= h[0] < h[1])):
                raise InputError(f"OALConfig.halt = {self.halt!r}; "
                                 "expected (t_stop, t_resume) with 0 <= t_stop < t_resume [s]")
            if h[0] >= self.duration:
                raise InputError(f"--halt {h[0]:g}:{h[1]:g}: starts at or after the run's end, --duration "
                                 f"{self.duration:g} s; the halt would never happen")

    @property
    def steps(self) -> int:
        """Number of recorded steps T."""
        return max(1, int(round(self.duration / self.dt)))

    def gait_params(self) -> GaitParams:
        return GaitParams(amplitude=self.amplitude, omega=self.omega, phase_lag=self.phase_lag,
                          ramp_time=self.ramp_time, pitch_amplitude=self.pitch_amplitude,
                          halt=None if self.halt is None else (float(self.halt[0]), float(self.halt[1])),
                          resume=self.resume)

    def contact_params(self) -> ContactParams:
        return ContactParams(snake_friction=self.snake_friction, floor_friction=self.floor_friction,
                             obstacle_friction=self.obstacle_friction, cone=self.cone)


def _robot(config: OALConfig) -> Robot:
    return load_robot(config.robot)


def oal_world_xml(config: OALConfig = OALConfig()) -> str:
    """The MJCF text of the OAL world for ``config`` (obstacles, contacts, robot, motors)."""
    return to_xml(_world(config, _robot(config)))


def _world(config: OALConfig, robot: Robot):
    return build_world(
        robot,
        obstacles=obstacle_positions() if config.obstacles else None,
        obstacle_radius=config.obstacle_radius,
        obstacle_height=config.obstacle_height,
        timestep=config.dt,
        contact=config.contact_params(),
        torque_limit=config.torque_limit,
        wheels=config.wheels,
    )


def oal_model(config: OALConfig = OALConfig()):
    """The compiled ``(mujoco.MjModel, Robot)`` that :func:`simulate_oal` uses for ``config``.

    Replay a run for rendering by writing ``result.qpos[n]`` into ``data.qpos``
    and calling ``mujoco.mj_forward`` (or ``mj_kinematics``).
    """
    robot = _robot(config)
    return load_model(_world(config, robot)), robot


@dataclass(frozen=True)
class OALResult:
    """States of one OAL run, one row per recorded step (T steps, J joint coordinates, N links).

    t: (T,) time [s].
    phi: (T, J) joint angles [rad], robot file order.
    phidot: (T, J) joint speeds [rad/s] (measured, not the references).
    phi_ref: (T, J) joint references φ_d [rad]; phidot_ref: (T, J) their rates [rad/s].
    theta: (T, N) link angles [rad] (yaw of each link, continuous in time; for
        planar robots θ_1 is link 1's yaw and θ_{i+1} = θ_i + φ_i exactly).
    head_xy: (T, 2) head point (centre of the head link) in the world frame [m].
    head_vxy: (T, 2) its velocity in the world frame [m/s].
    qpos: (T, nq) MuJoCo's full qpos (free joint x y z qw qx qy qz, then joints).
    qvel: (T, nv) MuJoCo's full qvel (free joint: linear [m/s] in the world frame,
        angular [rad/s] in link 1's frame; then joint speeds).
    torque: (T, J) applied joint torques [N·m].
    config: the run's settings. joint_names: (J,). n_links: N.
    """

    t: np.ndarray
    phi: np.ndarray
    phidot: np.ndarray
    phi_ref: np.ndarray
    phidot_ref: np.ndarray
    theta: np.ndarray
    head_xy: np.ndarray
    head_vxy: np.ndarray
    qpos: np.ndarray
    qvel: np.ndarray
    torque: np.ndarray
    config: OALConfig
    joint_names: tuple[str, ...] = field(default=())

    @property
    def columns(self) -> list[str]:
        """states.csv columns (docs/conventions.md)."""
        J, N = self.phi.shape[1], self.theta.shape[1]
        return (["t"] + [f"phi_{j}" for j in range(1, J + 1)] + [f"phidot_{j}" for j in range(1, J + 1)]
                + [f"theta_{i}" for i in range(1, N + 1)] + ["head_x", "head_y", "head_vx", "head_vy"])

    def states_table(self) -> np.ndarray:
        """(T, 1 + 2J + N + 4) array in :attr:`columns` order."""
        return np.column_stack([self.t, self.phi, self.phidot, self.theta, self.head_xy, self.head_vxy])

    def write_states_csv(self, path: str | os.PathLike) -> None:
        """Write ``states.csv`` (t, phi_*, phidot_*, theta_*, head_x/y, head_vx/vy), atomically.

        Numbers are written with ``repr`` precision, so the same run gives the same bytes.
        """
        lines = [",".join(self.columns)]
        lines += [",".join(repr(float(v)) for v in row) for row in self.states_table()]
        atomic_write_text(path, "\n".join(lines) + "\n")

    def summary(self) -> dict:
        """Headline figures.

        head_displacement_m: net straight-line head displacement, last minus first step [m].
        head_displacement_x_m: its x component (forward progress along the obstacle rows) [m].
        mean_speed_m_s: mean head speed |v| over the run [m/s].
        path_length_m: head path length [m]. tracking_rms_rad: RMS of φ − φ_d.
        """
        d = self.head_xy[-1] - self.head_xy[0]
        speed = np.linalg.norm(self.head_vxy, axis=1)
        seg = np.linalg.norm(np.diff(self.head_xy, axis=0), axis=1)
        c = self.config
        return {
            "head_displacement_m": float(np.linalg.norm(d)),
            "head_displacement_x_m": float(d[0]),
            "head_displacement_y_m": float(d[1]),
            "mean_speed_m_s": float(speed.mean()),
            "path_length_m": float(seg.sum()),
            "tracking_rms_rad": float(np.sqrt(np.mean((self.phi - self.phi_ref) ** 2))),
            "max_joint_speed_rad_s": float(np.abs(self.phidot).max()),
            "duration_s": float(self.t[-1] + c.dt),
            "steps": int(self.t.shape[0]),
            "robot": c.robot,
            "obstacles": bool(c.obstacles),
            "halt": None if c.halt is None else [float(c.halt[0]), float(c.halt[1])],
            "resume": c.resume,
            "seed": int(c.seed),
        }


def _yaw_of_x_axis(xmat: np.ndarray) -> np.ndarray:
    """Yaw [rad] of each body's x axis from MuJoCo ``xmat`` rows (..., 9)."""
    return np.arctan2(xmat[..., 3], xmat[..., 0])


def simulate_oal(config: OALConfig = OALConfig(), progress: bool = False) -> OALResult:
    """Run the OAL world for ``config.duration`` seconds and return the recorded states.

    progress: show a tqdm bar. Deterministic: the same config (and seed) gives
    the same arrays bit for bit on the same machine and MuJoCo build.
    """
    import mujoco  # deferred: the module imports without MuJoCo

    model, robot = oal_model(config)
    data = mujoco.MjData(model)
    qadr = joint_qpos_addresses(model, robot)
    vadr = joint_dof_addresses(model, robot)
    act = np.array([mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_ACTUATOR, f"motor_{n}") for n in robot.joint_names])
    if not np.array_equal(act, np.arange(len(act))):
        raise InputError(f"{robot.name}: actuators are not in joint order ({act.tolist()})")
    head_id = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, "head_site")
    link_ids = np.array([mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, f"link_{i + 1}")
                         for i in range(robot.n_links)])

    T, J = config.steps, robot.dof
    t = np.arange(T) * config.dt
    phi_ref, phidot_ref = Gait(robot, config.gait_params()).reference(t)

    rng = np.random.default_rng(config.seed)
    if config.init_noise > 0:
        data.qpos[qadr] = np.clip(rng.normal(0.0, config.init_noise, J), robot.lower, robot.upper)
    mujoco.mj_forward(model, data)

    def _index(addr: np.ndarray):
        """A slice (a view, cheap per step) when the addresses are contiguous."""
        if len(addr) and np.array_equal(addr, np.arange(addr[0], addr[0] + len(addr))):
            return slice(int(addr[0]), int(addr[0]) + len(addr))
        return addr

    qi, vi, li = _index(qadr), _index(vadr), _index(link_ids)
    torque = np.empty((T, J))
    qpos = np.empty((T, model.nq))
    qvel = np.empty((T, model.nv))
    head = np.empty((T, 3))
    head_v = np.empty((T, 6))
    xmat = np.empty((T, robot.n_links, 9))
    kp, kd, lim = config.kp, config.kd, config.torque_limit
    speed_limited = math.isfinite(config.motor_speed)
    lim_w = lim / config.motor_speed if speed_limited else 0.0
    feedforward = kp * phi_ref + kd * phidot_ref  # (T, J): the reference part of the PD law
    ctrl = data.ctrl
    site_xpos, dxmat, dqpos, dqvel = data.site_xpos, data.xmat, data.qpos, data.qvel
    step1, step2, object_velocity = mujoco.mj_step1, mujoco.mj_step2, mujoco.mj_objectVelocity
    site = mujoco.mjtObj.mjOBJ_SITE
    minimum, maximum = np.minimum, np.maximum
    it = range(T)
    if progress:
        it = tqdm(it, desc="sim oal", unit="step", mininterval=0.5)
    for n in it:
        # state at t_n: positions, velocities and everything derived from them
        step1(model, data)
        qd = dqvel[vi]
        u = feedforward[n] - kp * dqpos[qi] - kd * qd
        if speed_limited:
            # DC-motor torque–speed line: τ ∈ [−τ_s(1 + φ̇/ω_0), τ_s(1 − φ̇/ω_0)] ∩ [−τ_s, τ_s]
            w = lim_w * qd
            minimum(u, minimum(lim - w, lim), out=u)
            maximum(u, maximum(-lim - w, -lim), out=u)
        else:
            minimum(maximum(u, -lim, out=u), lim, out=u)
        ctrl[:] = u
        torque[n] = u
        qpos[n] = dqpos
        qvel[n] = dqvel
        head[n] = site_xpos[head_id]
        xmat[n] = dxmat[li]
        object_velocity(model, data, site, head_id, head_v[n], 0)
        step2(model, data)

    phi = qpos[:, qadr]
    phidot = qvel[:, vadr]
    yaw = np.unwrap(_yaw_of_x_axis(xmat), axis=0)
    if robot.is_planar:
        theta = planar_link_angles(robot, phi, yaw[:, 0])
    else:
        theta = yaw
    if not np.all(np.isfinite(qpos)):
        raise ConvergenceError(f"OAL simulation of {robot.name} became non-finite; reduce dt or torque_limit")
    return OALResult(t=t, phi=phi, phidot=phidot, phi_ref=phi_ref, phidot_ref=phidot_ref, theta=theta,
                     head_xy=head[:, :2].copy(), head_vxy=head_v[:, 3:5].copy(), qpos=qpos, qvel=qvel, torque=torque,
                     config=config, joint_names=robot.joint_names)
