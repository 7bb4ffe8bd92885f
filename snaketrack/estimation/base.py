"""The interface every Jacobian estimator shares: :class:`JacobianEstimator`.

An estimator follows the head Jacobian Ĵ (2 × J) [m/rad] of a robot with J
joints: the map from the joint velocities φ̇ (J,) [rad/s] to the planar
head velocity ṙ (2,) [m/s], ṙ ≈ Ĵ φ̇. An estimator keeps its state between calls:

- ``step(phidot, rdot) -> jacobian``: fuse one measured pair (φ̇_n, ṙ_n) and
  return Ĵ_n, (2, J) [m/rad], a copy;
- ``predict(phidot) -> rdot_hat``: Ĵ φ̇ (2,) [m/s] from the current estimate
  (the paper's metric predicts ṙ_{n+1} = Ĵ_n φ̇_{n+1} before step n+1);
- ``reset()``: back to the initial estimate Ĵ₀;
- ``jacobian``: the current Ĵ (2, J); ``covariance``: the (2J, 2J)
  covariance of vec(Ĵ) (row-major) [(m/rad)²], or None for an estimator
  without one.

A subclass implements ``reset``, ``update`` (the in-place fusion that
``step`` calls) and ``jacobian``; ``predict`` and ``covariance`` have
defaults. ``name`` is the estimator's registry name; ``configs`` names the
settings records its constructor takes by keyword (``"kf"``, ``"co"``,
``"sigma"``), which :func:`snaketrack.estimation.registry.make_estimator`
hands it.

>>> import numpy as np
>>> class Frozen(JacobianEstimator):
...     name = "frozen"
...     def __init__(self, n_joints):
...         self.n_joints = n_joints
...     def reset(self):
...         pass
...     def update(self, phidot, rdot):
...         pass
...     @property
...     def jacobian(self):
...         return np.ones((2, self.n_joints))
>>> Frozen(3).step(np.zeros(3), np.zeros(2)).shape
(2, 3)
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Optional

import numpy as np

from snaketrack.errors import InputError


def as_vector(a: np.ndarray, width: int, name: str) -> np.ndarray:
    """``a`` as a float64 vector of shape (width,); InputError naming ``name`` otherwise."""
    if type(a) is not np.ndarray or a.dtype != np.float64:
        a = np.asarray(a, dtype=float)
    if a.shape != (width,):
        raise InputError(f"{name}: shape {a.shape}; expected ({width},)")
    return a


class JacobianEstimator(ABC):
    """An estimator of the 2 × J head Jacobian from (φ̇, ṙ) pairs (see the module doc).

    Attributes: ``name`` (registry name), ``n_joints`` (J), ``configs``
    (settings records the constructor takes by keyword).
    """

    name: str = "estimator"
    n_joints: int
    configs: tuple[str, ...] = ()

    @abstractmethod
    def reset(self) -> None:
        """Back to the initial estimate Ĵ₀ (and its covariance, where there is one)."""

    @abstractmethod
    def update(self, phidot: np.ndarray, rdot: np.ndarray) -> None:
        """Fuse one measurement in place: φ̇ (J,) [rad/s], ṙ (2,) [m/s]."""

    @property
    @abstractmethod
    def jacobian(self) -> np.ndarray:
        """Current Ĵ (2, J) [m/rad]; a copy."""

    def step(self, phidot: np.ndarray, rdot: np.ndarray) -> np.ndarray:
        """Fuse φ̇_n (J,) [rad/s] and the measured ṙ_n (2,) [m/s]; return Ĵ_n (2, J) [m/rad], a copy."""
        self.update(phidot, rdot)
        return self.jacobian

    def predict(self, phidot: np.ndarray) -> np.ndarray:
        """Predicted head velocity Ĵ φ̇ (2,) [m/s] for joint velocities φ̇ (J,) [rad/s]."""
        return self.jacobian @ as_vector(phidot, self.n_joints, "phidot")

    @property
    def covariance(self) -> Optional[np.ndarray]:
        """Covariance of vec(Ĵ) (2J, 2J) [(m/rad)²], or None where the method has none."""
        return None
