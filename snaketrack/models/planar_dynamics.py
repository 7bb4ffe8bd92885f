"""Planar snake robot dynamics: Liljebäck's centre-of-mass model and the head-position model.

Two forms of the same robot moving on a flat surface with anisotropic viscous
friction (the planar head-tracking paper of Sibilska-Mroziewicz, Możaryn,
Hameed, Molina Fernandez and Ordys, eqs. 1–29, built on Liljebäck et al.,
*Snake Robots*, ch. 2):

- :class:`PlanarSnakeModel` with ``reference="com"``: the generalised
  position is ``q = [φ̄, p_x, p_y]`` where ``p`` is the robot's centre of mass
  (mean of the link centres, eq. 30), and the translational equation is
  ``N m p̈ = eᵀ f_R`` (Liljebäck).
- ``reference="head"``: ``p`` is the centre of the head link (link N, eq. 6)
  and the translational equation is eq. 19,
  ``m p̈₀ − M_P θ̈ − W_P θ̇² − G_P f_R = 0``; assembled as eqs. 24–29.

In both, ``φ̄ = [φ_1 … φ_{N−1}, θ_N]`` (eq. 2, ``θ = H φ̄``) and the link-angle
equations are eq. 13, ``M_θ θ̈ + W θ̇² − l S_θ K f_x + l C_θ K f_y = Dᵀ u``,
pre-multiplied by ``Hᵀ`` (eq. 16/26). The two models share the friction
(eq. 14) and kinematics (eqs. 3–12) code; they differ only in which point of
the body the translational coordinates ``p`` name.

Sign convention (important). Inside this module the joint angles follow the
**paper**: ``φ_i = θ_i − θ_{i+1}`` (eq. 1), links 1..N from tail to head. The
rest of snaketrack (docs/conventions.md, Jacobian paper, robot YAML files) uses
``φ_i = θ_{i+1} − θ_i``, i.e. the opposite sign. Convert at the boundary with
:func:`paper_to_design_joints` / :func:`design_to_paper_joints` (both just
negate); the simulator (:mod:`snaketrack.sim.planar`) writes every joint angle
in its outputs in snaketrack's convention.

Inputs. ``tau`` (shape ``(..., N−1)``, N·m) is the joint torque of eq. 13:
``Dᵀ tau`` acts on the links, so ``tau_i`` drives the paper's ``φ_i``.
The paper's controllers command joint *accelerations* instead (partial
feedback linearisation, as in the authors' code): :meth:`PlanarSnakeModel.
accelerations` with ``joint_acc=`` imposes ``φ̈ = joint_acc`` and solves the
three unactuated rows (``θ_N``, ``p_x``, ``p_y``) for the rest.

Units: metres, kilograms, seconds, radians, newtons. Arrays may carry any
leading batch dimensions; the last axis is the one named in each docstring.

>>> import numpy as np
>>> m = PlanarSnakeModel(SnakeParams(), reference="head")
>>> q = np.zeros(m.n_q); qd = np.zeros(m.n_q)
>>> xy = m.link_positions(q)
>>> xy.shape, round(float(xy[-1, 0]), 6), round(float(xy[0, 0]), 3)
((10, 2), 0.0, -1.26)
>>> m.accelerations(q, qd, joint_acc=np.ones(9))[:9].tolist() == [1.0] * 9
True
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from snaketrack.errors import InputError

__all__ = [
    "SnakeParams",
    "PlanarSnakeModel",
    "friction_forces",
    "paper_to_design_joints",
    "design_to_paper_joints",
]


@dataclass(frozen=True)
class SnakeParams:
    """Physical parameters of the planar snake (defaults: the authors' MATLAB code).

    n_links: N, number of links (joints = N − 1).
    mass_kg: m, mass of one link [kg].
    half_length_m: l, half the length of one link [m] (link length 2l).
    c_t: tangential viscous friction coefficient [N·s/m].
    c_n: normal viscous friction coefficient [N·s/m].
    inertia_kgm2: J, moment of inertia of one link about its centre
        [kg·m²]; ``None`` means ``m l² / 3`` (the authors' value).
    """

    n_links: int = 10
    mass_kg: float = 1.0
    half_length_m: float = 0.07
    c_t: float = 1.0
    c_n: float = 10.0
    inertia_kgm2: Optional[float] = None

    def __post_init__(self) -> None:
        if int(self.n_links) != self.n_links or self.n_links < 2:
            raise InputError(f"SnakeParams.n_links = {self.n_links!r}; expected an integer >= 2")
        for name in ("mass_kg", "half_length_m"):
            v = getattr(self, name)
            if not np.isfinite(v) or v <= 0:
                raise InputError(f"SnakeParams.{name} = {v!r}; expected a positive number")
        for name in ("c_t", "c_n"):
            v = getattr(self, name)
            if not np.isfinite(v) or v < 0:
                raise InputError(f"SnakeParams.{name} = {v!r}; expected a non-negative number")
        if self.inertia_kgm2 is not None and not (self.inertia_kgm2 > 0):
            raise InputError(f"SnakeParams.inertia_kgm2 = {self.inertia_kgm2!r}; expected > 0 or None")

    @property
    def inertia(self) -> float:
        """J [kg·m²]."""
        if self.inertia_kgm2 is not None:
            return float(self.inertia_kgm2)
        return self.mass_kg * self.half_length_m**2 / 3.0


def paper_to_design_joints(phi_paper: np.ndarray) -> np.ndarray:
    """Joint angles from the paper's ``θ_i − θ_{i+1}`` to snaketrack's ``θ_{i+1} − θ_i`` (negation)."""
    return -np.asarray(phi_paper, dtype=float)


def design_to_paper_joints(phi_design: np.ndarray) -> np.ndarray:
    """Joint angles from snaketrack's ``θ_{i+1} − θ_i`` to the paper's ``θ_i − θ_{i+1}`` (negation)."""
    return -np.asarray(phi_design, dtype=float)


def friction_forces(
    theta: np.ndarray, xdot: np.ndarray, ydot: np.ndarray, c_t: float, c_n: float
) -> tuple[np.ndarray, np.ndarray]:
    """Anisotropic viscous ground friction on every link, eq. 14 (global frame).

    theta, xdot, ydot: ``(..., N)`` link angles [rad] and link-centre velocities [m/s].
    Returns ``(f_x, f_y)``, each ``(..., N)`` [N]: ``−c_t`` times the velocity
    along the link plus ``−c_n`` times the velocity across it.

    >>> fx, fy = friction_forces(np.zeros(1), np.ones(1), np.ones(1), 1.0, 10.0)
    >>> float(fx[0]), float(fy[0])
    (-1.0, -10.0)
    """
    s = np.sin(theta)
    c = np.cos(theta)
    s2, c2, sc = s * s, c * c, s * c
    fx = -((c_t * c2 + c_n * s2) * xdot + (c_t - c_n) * sc * ydot)
    fy = -((c_t - c_n) * sc * xdot + (c_t * s2 + c_n * c2) * ydot)
    return fx, fy


class PlanarSnakeModel:
    """Equations of motion of the planar snake in ``q = [φ̄ (N), p_x, p_y]`` (size N+2).

    reference: ``"com"`` (Liljebäck's centre-of-mass model) or ``"head"``
    (the paper's head-position model, eqs. 24–29).
    head_mass: the mass on the head model's translational rows, ``"link"``
        (``m``, as eqs. 19 and 24 print it and Newton's law for the head link
        gives) or ``"robot"`` (``N m``, as the authors' MATLAB code has it;
        this divides the head's translational acceleration by N, so it is not
        the same robot as the centre-of-mass model). Ignored for ``"com"``.
    Constant matrices
    (A, D, H, V, K, V_P, G_P, the position map) are built once here; every
    evaluation is a handful of vectorised numpy products on ``(..., N)``
    arrays. All joint angles are in the paper's convention (module docstring).
    """

    def __init__(self, params: SnakeParams = SnakeParams(), reference: str = "com", head_mass: str = "link"):
        if reference not in ("com", "head"):
            raise InputError(f"PlanarSnakeModel.reference = {reference!r}; expected 'com' or 'head'")
        if head_mass not in ("link", "robot"):
            raise InputError(f"PlanarSnakeModel.head_mass = {head_mass!r}; expected 'link' or 'robot'")
        self.params = params
        self.reference = reference
        self.head_mass = head_mass
        n = params.n_links
        self.n_links = n
        self.n_joints = n - 1
        self.n_q = n + 2
        self.m = params.mass_kg
        self.l = params.half_length_m
        self.J = params.inertia
        self.c_t = params.c_t
        self.c_n = params.c_n
        # mass on the head model's translational rows [kg]: m (eq. 19) or N m (authors' code)
        self.m_head = self.m * (n if head_mass == "robot" else 1)

        # eq. 5: A (sum) and D (difference), (N−1)×N; e, a (head selector)
        eye = np.eye(n)
        self.A = eye[:-1] + eye[1:]
        self.D = eye[:-1] - eye[1:]
        self.e = np.ones(n)
        self.a = eye[-1]
        # eq. 2: θ = H φ̄, H upper-triangular ones
        self.H = np.triu(np.ones((n, n)))
        dd_inv = np.linalg.inv(self.D @ self.D.T)
        # eq. 15
        self.V = self.A.T @ dd_inv @ self.A
        self.K = self.A.T @ dd_inv @ self.D
        # eqs. 20, 23 (head translational equation)
        self.V_P = self.a @ self.D.T @ dd_inv @ self.A
        self.G_P = self.a - self.a @ self.D.T @ dd_inv @ self.D
        # Link centres relative to the reference point: x = −l R cos θ + e p_x.
        # com: R = Kᵀ (Liljebäck, from T = [D; eᵀ/N]); head: R = C A (eq. 11, T = [D; aᵀ]).
        if reference == "com":
            T = np.vstack([self.D, self.e / n])
        else:
            T = np.vstack([self.D, self.a])
        Tinv = np.linalg.inv(T)
        self.R = Tinv[:, :-1] @ self.A
        # torque map onto φ̄ rows: Hᵀ Dᵀ = [I_{N−1}; 0] (eq. 29)
        self.B = np.vstack([np.eye(n - 1), np.zeros((3, n - 1))])
        self._act = np.arange(n - 1)
        self._unact = np.arange(n - 1, n + 2)

    # ----------------------------------------------------------------- kinematics
    def _check_q(self, q: np.ndarray, name: str) -> np.ndarray:
        q = np.asarray(q, dtype=float)
        if q.shape[-1:] != (self.n_q,):
            raise InputError(f"{name} has shape {q.shape}; expected (..., {self.n_q}) = [φ̄ (N), p_x, p_y]")
        return q

    def link_angles(self, q: np.ndarray) -> np.ndarray:
        """θ (..., N) [rad] from q (..., N+2); eq. 2, ``θ = H φ̄``."""
        q = self._check_q(q, "q")
        return q[..., : self.n_links] @ self.H.T

    def link_positions(self, q: np.ndarray) -> np.ndarray:
        """Link-centre positions (..., N, 2) [m] from q; eq. 11 (head) / Liljebäck 2.11 (com)."""
        q = self._check_q(q, "q")
        th = q[..., : self.n_links] @ self.H.T
        x = -self.l * np.cos(th) @ self.R.T + q[..., -2:-1]
        y = -self.l * np.sin(th) @ self.R.T + q[..., -1:]
        return np.stack([x, y], axis=-1)

    def link_velocities(self, q: np.ndarray, qd: np.ndarray) -> np.ndarray:
        """Link-centre velocities (..., N, 2) [m/s]; eq. 12."""
        q = self._check_q(q, "q")
        qd = self._check_q(qd, "qd")
        th = q[..., : self.n_links] @ self.H.T
        thd = qd[..., : self.n_links] @ self.H.T
        xd = self.l * (np.sin(th) * thd) @ self.R.T + qd[..., -2:-1]
        yd = -self.l * (np.cos(th) * thd) @ self.R.T + qd[..., -1:]
        return np.stack([xd, yd], axis=-1)

    def com_position(self, q: np.ndarray) -> np.ndarray:
        """Centre of mass (..., 2) [m], eq. 30."""
        return self.link_positions(q).mean(axis=-2)

    def head_position(self, q: np.ndarray) -> np.ndarray:
        """Head-link centre (..., 2) [m], eq. 6."""
        return self.link_positions(q)[..., -1, :]

    def heading(self, q: np.ndarray) -> np.ndarray:
        """Mean link angle θ̄ (...,) [rad], eq. 35."""
        return self.link_angles(q).mean(axis=-1)

    def kinetic_energy(self, q: np.ndarray, qd: np.ndarray) -> np.ndarray:
        """Total kinetic energy (...,) [J]: Σ ½ m |v_i|² + ½ J θ̇_i²."""
        v = self.link_velocities(q, qd)
        thd = self.link_angles(qd)  # H is linear: θ̇ = H φ̄̇
        return 0.5 * self.m * (v**2).sum(axis=(-1, -2)) + 0.5 * self.J * (thd**2).sum(axis=-1)

    # ----------------------------------------------------------------- dynamics
    def terms(self, q: np.ndarray, qd: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(M̄, n̄)`` with ``M̄ q̈ + n̄ = B̄ τ`` (eq. 24; n̄ = W̄ + Ḡ f_R).

        q, qd: (..., N+2). Returns M̄ (..., N+2, N+2) and n̄ (..., N+2).
        For ``reference="com"`` the last two rows are ``N m p̈ − eᵀ f_R = 0``.
        """
        q = self._check_q(q, "q")
        qd = self._check_q(qd, "qd")
        n, m, l = self.n_links, self.m, self.l
        th = q[..., :n] @ self.H.T
        thd = qd[..., :n] @ self.H.T
        s, c = np.sin(th), np.cos(th)
        # friction from link velocities (eqs. 12, 14)
        xd = l * (s * thd) @ self.R.T + qd[..., -2:-1]
        yd = -l * (c * thd) @ self.R.T + qd[..., -1:]
        fx, fy = friction_forces(th, xd, yd, self.c_t, self.c_n)
        # eq. 15: M_θ = J I + m l² V∘cos(θ_i − θ_j), W = m l² V∘sin(θ_i − θ_j)
        cd = c[..., :, None] * c[..., None, :] + s[..., :, None] * s[..., None, :]
        sd = s[..., :, None] * c[..., None, :] - c[..., :, None] * s[..., None, :]
        Mth = self.J * np.eye(n) + (m * l * l) * self.V * cd
        W = (m * l * l) * self.V * sd
        # eq. 13 non-inertial terms: W θ̇² − l S K f_x + l C K f_y
        nth = (
            np.einsum("...ij,...j->...i", W, thd * thd)
            - l * s * (fx @ self.K.T)
            + l * c * (fy @ self.K.T)
        )
        batch = th.shape[:-1]
        M = np.zeros(batch + (n + 2, n + 2))
        nbar = np.empty(batch + (n + 2,))
        M[..., :n, :n] = self.H.T @ Mth @ self.H  # eq. 26
        nbar[..., :n] = nth @ self.H  # Hᵀ n_θ
        if self.reference == "com":
            M[..., n, n] = n * m
            M[..., n + 1, n + 1] = n * m
            nbar[..., n] = -fx.sum(axis=-1)
            nbar[..., n + 1] = -fy.sum(axis=-1)
        else:
            # eqs. 19–22: m p̈ − M_P θ̈ − W_P θ̇² − G_P f = 0, θ̈ = H φ̄̈
            vs = self.V_P * s
            vc = self.V_P * c
            M[..., n, :n] = -(m * l) * vs @ self.H
            M[..., n + 1, :n] = (m * l) * vc @ self.H
            M[..., n, n] = self.m_head
            M[..., n + 1, n + 1] = self.m_head
            t2 = thd * thd
            nbar[..., n] = -(m * l) * (vc * t2).sum(-1) - fx @ self.G_P
            nbar[..., n + 1] = -(m * l) * (vs * t2).sum(-1) - fy @ self.G_P
        return M, nbar

    def accelerations(
        self,
        q: np.ndarray,
        qd: np.ndarray,
        tau: Optional[np.ndarray] = None,
        joint_acc: Optional[np.ndarray] = None,
        fast: bool = True,
        passive: Optional[np.ndarray] = None,
    ) -> np.ndarray:
        """q̈ (..., N+2) from the state and either joint torques or joint accelerations.

        tau: (..., N−1) joint torques [N·m] (full forward dynamics, one
            ``(N+2)×(N+2)`` solve); ``None`` with ``joint_acc=None`` means zero torque.
        joint_acc: (..., N−1) commanded ``φ̈`` [rad/s²] (partial feedback
            linearisation): the joint rows are imposed and the 3 unactuated
            rows (θ_N, p_x, p_y) are solved, ``M_uu q̈_u = −n_u − M_ua φ̈``.
        fast: for a single state with ``joint_acc``, use :meth:`_pfl_single`
            (the same equations reduced by hand to O(N²) vector products);
            ``False`` forces the generic block solve (tests compare the two).
        passive: optional (N−1,) bool mask, with ``joint_acc`` only: these
            joints get zero *torque* (a free hinge) instead of their commanded
            acceleration, and their accelerations join the unknowns.
        """
        if tau is not None and joint_acc is not None:
            raise InputError("accelerations: give tau or joint_acc, not both")
        k = self.n_joints
        if joint_acc is not None:
            ja = np.asarray(joint_acc, dtype=float)
            if ja.shape[-1:] != (k,):
                raise InputError(f"joint_acc has shape {ja.shape}; expected (..., {k})")
            if passive is not None and np.any(passive):
                return self._pfl_partial(q, qd, ja, np.asarray(passive, dtype=bool))
            if fast and ja.ndim == 1 and np.ndim(q) == 1 and np.ndim(qd) == 1:
                return self._pfl_single(self._check_q(q, "q"), self._check_q(qd, "qd"), ja)
        M, nbar = self.terms(q, qd)
        if joint_acc is None:
            rhs = -nbar
            if tau is not None:
                tau = np.asarray(tau, dtype=float)
                if tau.shape[-1:] != (k,):
                    raise InputError(f"tau has shape {tau.shape}; expected (..., {k})")
                rhs = rhs + tau @ self.B.T
            return np.linalg.solve(M, rhs[..., None])[..., 0]
        Muu = M[..., k:, k:]
        Mua = M[..., k:, :k]
        rhs = -nbar[..., k:] - np.einsum("...ij,...j->...i", Mua, ja)
        qu = np.linalg.solve(Muu, rhs[..., None])[..., 0]
        ja_b = np.broadcast_to(ja, qu.shape[:-1] + (k,))
        return np.concatenate([ja_b, qu], axis=-1)

    def _pfl_partial(self, q: np.ndarray, qd: np.ndarray, ja: np.ndarray, passive: np.ndarray) -> np.ndarray:
        """PFL with some joints passive (zero torque): block solve over passive joints + θ_N + p."""
        k = self.n_joints
        if passive.shape != (k,):
            raise InputError(f"passive has shape {passive.shape}; expected ({k},)")
        M, nbar = self.terms(q, qd)
        act = np.flatnonzero(~passive)
        unk = np.concatenate([np.flatnonzero(passive), np.arange(k, self.n_q)])
        ja_b = np.broadcast_to(ja, nbar.shape[:-1] + (k,))
        ua = ja_b[..., act]
        Muu = M[..., unk[:, None], unk[None, :]]
        Mua = M[..., unk[:, None], act[None, :]]
        rhs = -nbar[..., unk] - np.einsum("...ij,...j->...i", Mua, ua)
        x = np.linalg.solve(Muu, rhs[..., None])[..., 0]
        out = np.empty(nbar.shape)
        out[..., act] = ua
        out[..., unk] = x
        return out

    def _pfl_single(self, q: np.ndarray, qd: np.ndarray, u: np.ndarray) -> np.ndarray:
        """PFL accelerations of one state, (N+2,), without forming M̄.

        The θ_N row of eq. 24 is ``Hᵀ``'s last row, ``eᵀ``: the total angular
        balance ``eᵀ(M_θ θ̈ + n_θ) = 0`` with ``θ̈ = H[u; 0] + e θ̈_N``, so
        ``θ̈_N = −(r·θ̈_a + eᵀn_θ) / Σr`` with ``r = eᵀM_θ = J + m l²(c∘Vc + s∘Vs)``
        (V symmetric). The translational rows then give p̈ directly:
        com ``p̈ = eᵀf / (N m)``; head (eq. 19)
        ``p̈_x = l V_P·(s∘θ̈ + c∘θ̇²) + G_P·f_x / m``,
        ``p̈_y = l V_P·(−c∘θ̈ + s∘θ̇²) + G_P·f_y / m``.
        """
        n, m, l = self.n_links, self.m, self.l
        th = np.cumsum(q[n - 1 :: -1])[::-1]  # θ = H φ̄
        thd = np.cumsum(qd[n - 1 :: -1])[::-1]
        s, c = np.sin(th), np.cos(th)
        R = self.R
        xd = l * (R @ (s * thd)) + qd[n]
        yd = -l * (R @ (c * thd)) + qd[n + 1]
        fx, fy = friction_forces(th, xd, yd, self.c_t, self.c_n)
        V = self.V
        Vc, Vs = V @ c, V @ s
        mll = m * l * l
        r = self.J + mll * (c * Vc + s * Vs)
        t2 = thd * thd
        # eᵀ n_θ = m l² [ (Vs)·(c θ̇²) − (Vc)·(s θ̇²) ] − l s·(K f_x) + l c·(K f_y)
        en = mll * (Vs @ (c * t2) - Vc @ (s * t2)) - l * (s @ (self.K @ fx)) + l * (c @ (self.K @ fy))
        tha = np.empty(n)
        tha[:-1] = np.cumsum(u[::-1])[::-1]  # H [u; 0]
        tha[-1] = 0.0
        thNdd = -(r @ tha + en) / r.sum()
        thdd = tha + thNdd
        out = np.empty(n + 2)
        out[: n - 1] = u
        out[n - 1] = thNdd
        if self.reference == "com":
            out[n] = fx.sum() / (n * m)
            out[n + 1] = fy.sum() / (n * m)
        else:
            vp = self.V_P
            scale = m / self.m_head  # 1, or 1/N with head_mass="robot"
            out[n] = scale * (l * (vp @ (s * thdd + c * t2)) + (self.G_P @ fx) / m)
            out[n + 1] = scale * (l * (vp @ (-c * thdd + s * t2)) + (self.G_P @ fy) / m)
        return out

    def joint_torques(self, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray) -> np.ndarray:
        """Inverse dynamics: the torques τ (..., N−1) [N·m] that produce ``qdd``.

        Only meaningful for accelerations the robot can have (the unactuated
        rows of ``M̄ q̈ + n̄`` vanish), e.g. those returned by :meth:`accelerations`.
        """
        M, nbar = self.terms(q, qd)
        return (np.einsum("...ij,...j->...i", M, qdd) + nbar)[..., : self.n_joints]

    def state_from(self, theta: np.ndarray, point: np.ndarray, theta_dot=None, point_dot=None):
        """Build ``(q, qd)`` from link angles θ (N) and the reference point (2).

        Convenience for initial conditions; ``point`` is the CoM for
        ``reference="com"`` and the head-link centre for ``"head"``.
        """
        theta = np.asarray(theta, dtype=float)
        if theta.shape[-1:] != (self.n_links,):
            raise InputError(f"theta has shape {theta.shape}; expected (..., {self.n_links})")
        Hinv = np.linalg.inv(self.H)
        q = np.concatenate([theta @ Hinv.T, np.asarray(point, dtype=float)], axis=-1)
        td = np.zeros_like(theta) if theta_dot is None else np.asarray(theta_dot, dtype=float)
        pd = np.zeros(theta.shape[:-1] + (2,)) if point_dot is None else np.asarray(point_dot, dtype=float)
        qd = np.concatenate([td @ Hinv.T, pd], axis=-1)
        return q, qd
