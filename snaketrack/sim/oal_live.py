"""The obstacle world stepped live under a gait command: :class:`OALStepper`.

:func:`~snaketrack.sim.oal.simulate_oal` runs a whole clip with the references
known in advance; a closed loop needs the world advanced a little at a time,
with the gait changed between advances by a controller. The stepper is the
same world (:func:`~snaketrack.sim.oal.oal_model`), the same initial
perturbation and the same joint PD law with the DC-motor torque–speed clip
(module doc of :mod:`snaketrack.sim.oal`), with the references

    φ_d(t) = φ_gait(t) + Δφ,   φ̇_d(t) = φ̇_gait(t)

where φ_gait is :class:`~snaketrack.sim.gait.Gait`'s undulation and Δφ (J,)
[rad] the command's joint offset (a uniform Δφ turns the robot), held until
the next command. With Δφ = 0 it reproduces ``simulate_oal`` step for step.

>>> s = OALStepper(OALConfig(duration=1.0))
>>> s.advance(0.1); s.n, s.phi.shape, s.head_xy.shape
(24, (10,), (2,))
"""
from __future__ import annotations

import math

import numpy as np

from snaketrack.errors import ConvergenceError, InputError
from snaketrack.sim.gait import Gait
from snaketrack.sim.mjcf import joint_dof_addresses, joint_qpos_addresses
from snaketrack.sim.oal import OALConfig, oal_model


class OALStepper:
    """The OAL world of ``config`` (its duration is ignored), advanced by :meth:`advance`.

    Attributes after each advance (the state at the current time ``t`` [s]):
    ``phi`` (J,) joint angles [rad], ``phidot`` (J,) [rad/s], ``qpos`` (nq,) MuJoCo's qpos,
    ``head_xy`` (2,) head point in the world [m], ``offset`` (J,) the joint offset Δφ [rad] in force.
    """

    def __init__(self, config: OALConfig = OALConfig()):
        import mujoco  # deferred: the module imports without MuJoCo

        self.config = config
        self.model, self.robot = oal_model(config)
        self.data = mujoco.MjData(self.model)
        self.qadr = joint_qpos_addresses(self.model, self.robot)
        self.vadr = joint_dof_addresses(self.model, self.robot)
        self.head_id = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_SITE, "head_site")
        self.gait = Gait(self.robot, config.gait_params())
        J = self.robot.dof
        rng = np.random.default_rng(config.seed)
        if config.init_noise > 0:
            self.data.qpos[self.qadr] = np.clip(rng.normal(0.0, config.init_noise, J),
                                                self.robot.lower, self.robot.upper)
        mujoco.mj_forward(self.model, self.data)
        self.offset = np.zeros(J)
        self.n = 0

    @property
    def t(self) -> float:
        """Current simulated time [s]."""
        return self.n * self.config.dt

    def set_offset(self, offset: np.ndarray) -> None:
        """Hold the joint offset Δφ (J,) [rad] from the next step on (clipped to the joint limits)."""
        o = np.asarray(offset, float)
        if o.shape != self.offset.shape or not np.all(np.isfinite(o)):
            raise InputError(f"gait offset: shape {o.shape}; expected finite ({self.offset.shape[0]},) [rad]")
        self.offset = np.clip(o, self.robot.lower, self.robot.upper)

    def advance(self, until: float) -> None:
        """Step the world until the simulated time reaches ``until`` [s] (nothing when already there)."""
        import mujoco  # deferred: the module imports without MuJoCo

        c = self.config
        steps = int(round(until / c.dt)) - self.n
        if steps <= 0:
            return
        m, d = self.model, self.data
        qa, va = self.qadr, self.vadr
        lim = c.torque_limit
        lim_w = lim / c.motor_speed if math.isfinite(c.motor_speed) else 0.0
        t = (self.n + np.arange(steps)) * c.dt
        phi_ref, phidot_ref = self.gait.reference(t)
        ff = c.kp * (phi_ref + self.offset) + c.kd * phidot_ref
        for k in range(steps):
            mujoco.mj_step1(m, d)
            qd = d.qvel[va]
            u = ff[k] - c.kp * d.qpos[qa] - c.kd * qd
            w = lim_w * qd  # DC-motor torque–speed line, as simulate_oal
            u = np.maximum(np.minimum(u, np.minimum(lim - w, lim)), np.maximum(-lim - w, -lim))
            d.ctrl[:] = u
            mujoco.mj_step2(m, d)
        self.n += steps
        mujoco.mj_kinematics(m, d)
        if not np.all(np.isfinite(d.qpos)):
            raise ConvergenceError(f"OAL world became non-finite at t = {self.t:.3f} s")

    @property
    def phi(self) -> np.ndarray:
        return self.data.qpos[self.qadr].copy()

    @property
    def phidot(self) -> np.ndarray:
        return self.data.qvel[self.vadr].copy()

    @property
    def qpos(self) -> np.ndarray:
        return self.data.qpos.copy()

    @property
    def head_xy(self) -> np.ndarray:
        return self.data.site_xpos[self.head_id, :2].copy()

    def head(self) -> np.ndarray:
        """Head point (3,) in the world [m]."""
        return self.data.site_xpos[self.head_id].copy()

