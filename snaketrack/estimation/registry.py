"""The Jacobian estimators by name: :data:`ESTIMATORS` and :func:`make_estimator`.

- ``"ukf"``: :class:`~snaketrack.estimation.ukf.UKFEstimator`; settings ``kf`` (KFConfig), ``sigma`` (SigmaConfig).
- ``"co"``: :class:`~snaketrack.estimation.co.COEstimator`; settings ``co`` (COConfig).
- ``"kf"``: :class:`~snaketrack.estimation.kf.KalmanJacobianEstimator`; settings ``kf`` (KFConfig), ``batch``.

:func:`make_estimator` hands each estimator the settings records it names in
its ``configs`` (``kf``, ``co``, ``sigma``) and ignores the others, so one call
site can pass every record and choose the estimator by name; any other keyword
goes to the constructor as it is.

>>> import numpy as np
>>> from snaketrack.estimation.co import COConfig
>>> est = make_estimator("co", 3, co=COConfig(min_phidot=0.01), sigma=None)
>>> est.name, est.step(np.ones(3), np.array([0.3, 0.0])).shape
('co', (2, 3))
>>> make_estimator("ekf", 3)
Traceback (most recent call last):
...
snaketrack.errors.InputError: estimator 'ekf': unknown; expected one of ukf, co, kf
"""
from __future__ import annotations

import inspect

from snaketrack.errors import InputError
from snaketrack.estimation.base import JacobianEstimator
from snaketrack.estimation.co import COEstimator
from snaketrack.estimation.kf import KalmanJacobianEstimator
from snaketrack.estimation.ukf import UKFEstimator

ESTIMATORS: dict[str, type[JacobianEstimator]] = {
    "ukf": UKFEstimator,
    "co": COEstimator,
    "kf": KalmanJacobianEstimator,
}

# settings records some estimator reads; an estimator that does not read one ignores it
_SHARED = frozenset(c for cls in ESTIMATORS.values() for c in cls.configs)


def make_estimator(name: str, n_joints: int, **kw) -> JacobianEstimator:
    """A fresh estimator ``name`` (a key of :data:`ESTIMATORS`) for ``n_joints`` joints.

    kw: settings records (``kf=KFConfig(...)``, ``co=COConfig(...)``,
    ``sigma=SigmaConfig(...)``; those the estimator does not use are ignored,
    None means the default) and other constructor keywords (``batch`` for
    ``"kf"``). InputError for an unknown name or a keyword the estimator does
    not take.
    """
    cls = ESTIMATORS.get(name)
    if cls is None:
        raise InputError(f"estimator {name!r}: unknown; expected one of {', '.join(ESTIMATORS)}")
    own = {k: v for k, v in kw.items() if (k in cls.configs and v is not None) or k not in _SHARED}
    params = inspect.signature(cls).parameters
    bad = [k for k in own if k == "n_joints" or k not in params]
    if bad:
        raise InputError(f"estimator {name!r}: no setting {', '.join(bad)}; "
                         f"it takes {', '.join(p for p in params if p != 'n_joints')}")
    return cls(n_joints, **own)
