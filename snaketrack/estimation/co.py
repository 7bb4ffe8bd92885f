"""The convex-optimisation (CO) Jacobian estimator: closed form and cvxpy reference.

Problem (5) of *Improved Jacobian matrix estimation applied to snake robots*
(Løwer, Varagnolo, Stavdahl 2023), after Yip & Camarillo::

    minimise ‖ΔJ‖   subject to   Ĵ_{n+1} = Ĵ_n + ΔJ,   ṙ_n = Ĵ_{n+1} φ̇_n

The paper's "Euclidean norm" of the matrix ΔJ is read as the Frobenius norm
(the Euclidean norm of vec(ΔJ)); with it the problem has the unique
minimiser (Broyden's rank-one update)::

    ΔJ = (ṙ_n − Ĵ_n φ̇_n) φ̇_nᵀ / (φ̇_nᵀ φ̇_n)

:func:`broyden_update` computes it (batched); :class:`CvxpyCO` solves (5) with
cvxpy, the reference the tests compare against (to 1e-6) and the benchmark
times. (With the spectral norm the optimum value is the same but the
minimiser is not unique; Broyden's update is one of them.)

Behaviour near a halt, which the paper discusses (Sec. 4, 8.2):

- ``φ̇ = 0`` exactly: (5) is infeasible unless ṙ = 0, and the formula divides
  by zero. Both solvers then leave Ĵ unchanged (the only guard that is
  always on).
- small ‖φ̇‖: the update scales like ‖ṙ − Ĵφ̇‖/‖φ̇‖, so measurement noise on
  ṙ makes Ĵ diverge while the robot stands still. This is the paper's
  behaviour and the default. ``COConfig.min_phidot > 0`` skips updates while
  ‖φ̇‖ < min_phidot.
- ``COConfig.reset_after_halt``: the paper's suggested fix (Sec. 8.2), reset
  Ĵ to Ĵ₀ (zeros) when the robot starts moving again after a halt. A halt is
  at least ``halt_min_steps`` consecutive steps with ‖φ̇‖ < ``halt_speed``;
  the reset happens at the first step above it, before that step's update.

Both options are off by default, so the paper's behaviour reproduces.

>>> import numpy as np
>>> J = np.zeros((2, 3)); phidot = np.array([1.0, 2.0, 2.0]); rdot = np.array([0.9, -0.3])
>>> J1 = broyden_update(J, phidot, rdot)
>>> np.allclose(J1 @ phidot, rdot)
True
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from snaketrack.errors import InputError
from snaketrack.estimation.base import JacobianEstimator, as_vector


def broyden_update(J: np.ndarray, phidot: np.ndarray, rdot: np.ndarray, min_phidot: float = 0.0) -> np.ndarray:
    """Closed-form minimiser of problem (5): Ĵ + (ṙ − Ĵφ̇)φ̇ᵀ/(φ̇ᵀφ̇).

    J: (..., 2, N_j) current estimate [m/rad]; phidot: (..., N_j) [rad/s];
    rdot: (..., 2) [m/s]. Returns the new estimate, same shape as J.
    Where ‖φ̇‖ = 0 or ‖φ̇‖ < min_phidot the estimate is returned unchanged.
    """
    J = np.asarray(J, dtype=float)
    phidot = np.asarray(phidot, dtype=float)
    rdot = np.asarray(rdot, dtype=float)
    nn = np.einsum("...j,...j->...", phidot, phidot)
    resid = rdot - np.einsum("...ij,...j->...i", J, phidot)
    ok = (nn > 0.0) & (nn >= min_phidot * min_phidot)
    scale = np.where(ok, 1.0 / np.where(ok, nn, 1.0), 0.0)
    return J + (resid * scale[..., None])[..., :, None] * phidot[..., None, :]


class CvxpyCO:
    """Problem (5) solved by cvxpy: the reference for the closed form.

    Written as the paper states it: variables Ĵ_{n+1} and ΔJ, constraints
    Ĵ_{n+1} = Ĵ_n + ΔJ and ṙ_n = Ĵ_{n+1} φ̇_n, objective ‖ΔJ‖²_F (same minimiser as
    ‖ΔJ‖_F, and a QP). ``parametrised=True`` builds the problem once with cvxpy
    Parameters (DPP) and re-solves it; ``False`` rebuilds it every call (as a
    straightforward implementation would). solver: any installed cvxpy solver
    (default CLARABEL, an interior-point solver accurate to ~1e-9 here).
    """

    def __init__(self, n_joints: int, solver: str = "CLARABEL", parametrised: bool = True, **solver_options):
        import cvxpy as cp  # deferred: the module imports without cvxpy

        self.cp = cp
        self.n_joints = int(n_joints)
        self.solver = solver
        self.parametrised = parametrised
        self.options = solver_options
        if parametrised:
            self._J = cp.Parameter((2, self.n_joints))
            self._phidot = cp.Parameter(self.n_joints)
            self._rdot = cp.Parameter(2)
            self._vars, self._problem = self._build(self._J, self._phidot, self._rdot)

    def _build(self, J, phidot, rdot):
        cp = self.cp
        J_next = cp.Variable((2, self.n_joints))
        dJ = cp.Variable((2, self.n_joints))
        problem = cp.Problem(cp.Minimize(cp.sum_squares(dJ)), [J_next == J + dJ, J_next @ phidot == rdot])
        return (J_next, dJ), problem

    def solve(self, J: np.ndarray, phidot: np.ndarray, rdot: np.ndarray) -> Optional[np.ndarray]:
        """Ĵ_{n+1} (2, N_j) from Ĵ_n (2, N_j), φ̇_n (N_j,), ṙ_n (2,); None if the solver finds no solution."""
        if self.parametrised:
            self._J.value, self._phidot.value, self._rdot.value = J, phidot, rdot
            (J_next, _), problem = self._vars, self._problem
        else:
            (J_next, _), problem = self._build(J, phidot, rdot)
        try:
            problem.solve(solver=self.solver, **self.options)
        except self.cp.error.SolverError:
            return None
        if problem.status not in ("optimal", "optimal_inaccurate") or J_next.value is None:
            return None
        return np.array(J_next.value)


@dataclass(frozen=True)
class COConfig:
    """Options of the CO estimator (the defaults are the paper's behaviour).

    min_phidot: skip updates while ‖φ̇‖ < min_phidot [rad/s]; default 0 (only exact zeros).
    reset_after_halt: reset Ĵ to Ĵ₀ when motion resumes after a halt; default False.
    halt_speed: ‖φ̇‖ below this counts as halted [rad/s]; default 0.05.
    halt_min_steps: consecutive halted steps that make a halt; default 24.
    j0: initial Ĵ (2, N_j) [m/rad]; default None (zeros).
    solver: "closed_form" (Broyden, default) or "cvxpy" (:class:`CvxpyCO`, slow, the reference).
    """

    min_phidot: float = 0.0
    reset_after_halt: bool = False
    halt_speed: float = 0.05
    halt_min_steps: int = 24
    j0: Optional[np.ndarray] = None
    solver: str = "closed_form"


class COEstimator(JacobianEstimator):
    """CO (Broyden) Jacobian estimator (:class:`~snaketrack.estimation.base.JacobianEstimator`).

    n_joints: N_j. co: :class:`COConfig`. ``jacobian`` (2, N_j) [m/rad];
    ``covariance`` is None (the method has none). ``resets`` counts resets after halts.
    """

    name = "co"
    configs = ("co",)

    def __init__(self, n_joints: int, co: COConfig = COConfig()):
        if int(n_joints) < 1:
            raise InputError(f"n_joints = {n_joints}; expected a positive joint count")
        config = co
        if config.solver not in ("closed_form", "cvxpy"):
            raise InputError(f"COConfig.solver = {config.solver!r}; expected 'closed_form' or 'cvxpy'")
        if config.min_phidot < 0 or config.halt_speed < 0 or config.halt_min_steps < 1:
            raise InputError("COConfig: min_phidot and halt_speed must be >= 0 and halt_min_steps >= 1")
        self.n_joints = int(n_joints)
        self.config = config
        if config.j0 is None:
            self._J0 = np.zeros((2, self.n_joints))
        else:
            self._J0 = np.asarray(config.j0, dtype=float).copy()
            if self._J0.shape != (2, self.n_joints):
                raise InputError(f"COConfig.j0: shape {self._J0.shape}; expected (2, {self.n_joints})")
        self._cvx = CvxpyCO(self.n_joints) if config.solver == "cvxpy" else None
        self.reset()

    def reset(self) -> None:
        """Back to Ĵ₀ and forget any halt in progress."""
        self.J = self._J0.copy()
        self._still = 0
        self.resets = 0

    def update(self, phidot: np.ndarray, rdot: np.ndarray) -> None:
        """One step of problem (5) with φ̇ (N_j,) [rad/s] and ṙ (2,) [m/s]."""
        p = as_vector(phidot, self.n_joints, "phidot")
        r = as_vector(rdot, 2, "rdot")
        c = self.config
        nn = float(p @ p)
        if c.reset_after_halt:
            if nn < c.halt_speed * c.halt_speed:
                self._still += 1
            else:
                if self._still >= c.halt_min_steps:
                    self.J = self._J0.copy()
                    self.resets += 1
                self._still = 0
        if nn == 0.0 or nn < c.min_phidot * c.min_phidot:
            return
        if self._cvx is None:
            # Broyden: J += (r - J p) p' / (p' p)  (same as broyden_update, without its batching)
            self.J += np.multiply.outer((r - self.J @ p) / nn, p)
        else:
            J = self._cvx.solve(self.J, p, r)
            if J is not None:
                self.J = J

    @property
    def jacobian(self) -> np.ndarray:
        """Current Ĵ (2, N_j) [m/rad]; a copy."""
        return self.J.copy()
