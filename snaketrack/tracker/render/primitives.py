"""The silhouette model: capsules, spheres and cylinders fixed to a robot's link frames.

A primitive is an axis segment ``A→B`` in its link's frame and a radius
``r`` [m]: a capsule (a sphere when ``A = B``) or, where flagged, a
flat-ended cylinder. :class:`CapsuleModel` holds them for one robot
(:meth:`CapsuleModel.capsules`: one capsule per link, the kinematic model;
:meth:`CapsuleModel.from_visual`: the robot as it looks, with its joint
housings and end caps) and places them in the camera frame from the link
frames of forward kinematics. The renderer draws their silhouettes
(:mod:`snaketrack.tracker.render.silhouette`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch

from snaketrack.errors import InputError
from snaketrack.models.robot import Robot

# The head cap, an ellipsoid of semi-axes (1.6c, c, 0.9c), as a capsule of
# radius 0.88c along x from -0.66c to +0.66c: the capsule of best mean IoU
# (0.922) over the ellipsoid's two views, from above and from the side.
HEAD_RADIUS = 0.88
HEAD_HALF_LENGTH = 0.66


@dataclass(frozen=True)
class CapsuleModel:
    """Silhouette primitives fixed to link frames.

    link: (M,) link index (0-based) each primitive is attached to.
    a_local, b_local: (M, 3) end points of the axis segment in the link frame [m].
    radius: (M,) radius [m].
    cylinders: optional (M,) bool: the primitive is a flat-ended cylinder from
        ``a_local`` to ``b_local`` (the renderer draws its own edge,
        :func:`~snaketrack.tracker.render.edges.cylinder_edge_px`), not a capsule; None: none is.
    """

    link: np.ndarray
    a_local: np.ndarray
    b_local: np.ndarray
    radius: np.ndarray
    cylinders: Optional[np.ndarray] = None

    @property
    def n(self) -> int:
        return int(len(self.link))

    @classmethod
    def capsules(cls, robot: Robot) -> "CapsuleModel":
        """One capsule per link, the description's length and radius (the kinematic model)."""
        n = robot.n_links
        a = np.zeros((n, 3))
        b = np.zeros((n, 3))
        b[:, 0] = robot.lengths
        return cls(link=np.arange(n), a_local=a, b_local=b, radius=robot.radii.astype(float))

    @classmethod
    def named(cls, robot: Robot, model: str) -> "CapsuleModel":
        """The silhouette model a tracker setting names (``TrackerConfig.model``): ``visual`` (the visual
        bodies, cylindrical housings as cylinders), ``visual-capsule`` (housings as capsules) or
        ``capsules`` (the kinematic capsules)."""
        if model == "capsules":
            return cls.capsules(robot)
        return cls.from_visual(robot, "capsule" if model == "visual-capsule" else "cylinder")

    @classmethod
    def from_visual(cls, robot: Robot, housings: str = "cylinder") -> "CapsuleModel":
        """The robot as it looks (``robot.visual``), approximated by capsules, spheres and cylinders.

        Per link a capsule of the visual body radius. At each joint the
        housing: a sphere of the housing radius, or for a cylindrical housing
        (radius R, half-length h) along the joint axis, with
        ``housings="cylinder"`` the cylinder itself, drawn with its own edge
        (``cylinders``, :func:`~snaketrack.tracker.render.edges.cylinder_edge_px`),
        and with ``housings="capsule"`` a capsule of radius R from −h/2 to
        +h/2 (a rougher outline: against rendered masks at the true pose, IoU
        about 0.94–0.97 where the cylinders give 0.99, and tracks that sit too
        deep). A sphere for the tail cap; for the ellipsoidal head cap
        (semi-axes 1.6c, c, 0.9c along x, y, z at the head end) a capsule
        along x (:data:`HEAD_RADIUS`, :data:`HEAD_HALF_LENGTH`).

        The body cylinders end flat; a capsule's half disc would reach past
        the flat end wherever the cap there is narrower than the body (the
        arcsnake's tail: body 0.026 m, cap 0.024 m), and a silhouette too
        long sits too deep. So the two free ends' body capsules are pulled
        in by the inset of :func:`free_end_inset`, which makes the end cover
        the flat-ended cylinder's area with its cap (seen square-on to the
        link's axis).
        """
        vis = robot.visual
        c = vis.cap_radius
        L_head = robot.lengths[-1]
        r_tail, r_head = vis.body_radius[0], vis.body_radius[-1]
        disc = lambda rad: (lambda x, y: x * x + y * y <= rad * rad)  # noqa: E731
        inset_tail = free_end_inset(r_tail, [disc(c)], [disc(c)])
        inset_head = free_end_inset(
            r_head,
            # the head ellipsoid seen from above (semi-axes 1.6c, c) and from the side (1.6c, 0.9c)
            [lambda x, y: (x / (1.6 * c)) ** 2 + (y / c) ** 2 <= 1,
             lambda x, y: (x / (1.6 * c)) ** 2 + (y / (0.9 * c)) ** 2 <= 1],
            [_capsule_2d(-HEAD_HALF_LENGTH * c, HEAD_HALF_LENGTH * c, HEAD_RADIUS * c)] * 2)
        n = robot.n_links
        if n == 1:  # one link: both insets on it, never past its middle
            inset_tail = min(inset_tail, 0.5 * L_head)
            inset_head = min(inset_head, 0.5 * L_head)
        if housings not in ("cylinder", "capsule"):
            raise InputError(f"housings {housings!r}; expected 'cylinder' or 'capsule'")
        links, A, B, R, cyl = [], [], [], [], []
        for i, L in enumerate(robot.lengths):
            links.append(i)
            A.append([inset_tail if i == 0 else 0.0, 0, 0])
            B.append([L - inset_head if i == n - 1 else L, 0, 0])
            R.append(vis.body_radius[i])
        unit = {"x": np.array([1.0, 0, 0]), "y": np.array([0, 1.0, 0]), "z": np.array([0, 0, 1.0])}
        for i in range(1, robot.n_links):  # housing attached to the child link, at its origin
            links.append(i)
            if vis.housing_shape == "cylinder" and housings == "cylinder":
                a = vis.housing_half_length * unit[robot.joints[i - 1].axes[0]]
                A.append(list(-a))
                B.append(list(a))
                cyl.append(len(R))
            elif vis.housing_shape == "cylinder":
                # a capsule along the joint axis, half the housing's half-length each way
                a = 0.5 * vis.housing_half_length * unit[robot.joints[i - 1].axes[0]]
                A.append(list(-a))
                B.append(list(a))
            else:
                A.append([0.0, 0, 0])
                B.append([0.0, 0, 0])
            R.append(vis.housing_radius)
        links.append(0)
        A.append([0.0, 0, 0])
        B.append([0.0, 0, 0])
        R.append(vis.cap_radius)
        L = robot.lengths[-1]
        links.append(robot.n_links - 1)
        A.append([L - HEAD_HALF_LENGTH * c, 0, 0])
        B.append([L + HEAD_HALF_LENGTH * c, 0, 0])
        R.append(HEAD_RADIUS * c)
        is_cyl = np.zeros(len(R), bool)
        is_cyl[cyl] = True
        return cls(link=np.array(links), a_local=np.array(A, float), b_local=np.array(B, float),
                   radius=np.array(R, float), cylinders=is_cyl if is_cyl.any() else None)

    def place(self, rotations: torch.Tensor, origins: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Primitive end points (B, M, 3) in the camera frame from link frames (B, N, 3, 3), (B, N, 3)."""
        dt = origins.dtype
        idx = torch.as_tensor(self.link, device=origins.device)
        Rk = rotations[:, idx]
        ok = origins[:, idx]
        a = torch.as_tensor(self.a_local, dtype=dt, device=origins.device)
        b = torch.as_tensor(self.b_local, dtype=dt, device=origins.device)
        return ok + (Rk @ a[..., None])[..., 0], ok + (Rk @ b[..., None])[..., 0]


def _capsule_2d(x0: float, x1: float, r: float):
    """Indicator of a 2-D capsule (segment x0→x1 on the x axis, radius r [m]) on grids x, y."""
    return lambda x, y: (np.maximum(np.maximum(x0 - x, x - x1), 0.0) ** 2 + y * y) <= r * r


def free_end_inset(r: float, truth_caps, model_caps, cells_per_radius: int = 40) -> float:
    """Inset δ [m] of a body capsule's free end that matches a flat-ended cylinder's area.

    Seen square-on to its axis, a flat-ended cylinder of radius ``r`` [m]
    ending at x = 0 (body on x < 0) is a band; with its end cap it covers
    ``band ∪ cap``. The model's capsule, ending at x = −δ, covers
    ``capsule ∪ model cap``. The result is the δ in [0, r] at which the two
    areas agree (0 if the capsule is not larger even at δ = 0), found by
    bisection on a grid of ``r / cells_per_radius`` cells.

    ``truth_caps``, ``model_caps``: one indicator ``f(x, y) -> bool array``
    per view (same length); the areas are summed over the views.

    >>> none = lambda x, y: np.zeros(np.shape(x), bool)   # no cap: the half disc's area is a band πr/4 long
    >>> abs(free_end_inset(0.02, [none], [none]) - np.pi * 0.02 / 4) < 2e-5
    True
    >>> disc = lambda rad: (lambda x, y: x * x + y * y <= rad * rad)
    >>> round(free_end_inset(0.026, [disc(0.024)], [disc(0.024)]), 3)   # the arcsnake's tail
    0.007
    >>> free_end_inset(0.016, [disc(0.019)], [disc(0.019)])   # a cap wider than the body hides its end
    0.0
    """
    h = r / cells_per_radius
    reach = 4.0 * r
    for f in list(truth_caps) + list(model_caps):  # widen the grid until no cap touches its edge
        while True:
            ext = np.arange(-reach, reach, h) + 0.5 * h
            X, Y = np.meshgrid(ext, ext)
            m = f(X, Y)
            if not (m[0].any() or m[-1].any() or m[:, -1].any()):
                break
            reach *= 1.5
    x = np.arange(-2.0 * r, reach, h) + 0.5 * h  # cell centres
    y = np.arange(-reach, reach, h) + 0.5 * h
    X, Y = np.meshgrid(x, y)
    band = (X <= 0) & (np.abs(Y) <= r)
    target = sum(int((band | t(X, Y)).sum()) for t in truth_caps)
    caps = [m(X, Y) for m in model_caps]

    def area(d: float) -> int:
        body = _capsule_2d(-4.0 * r, -d, r)(X, Y)
        return sum(int((body | m).sum()) for m in caps)

    if area(0.0) <= target:
        return 0.0
    lo, hi = 0.0, r
    for _ in range(30):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if area(mid) > target else (lo, mid)
    return 0.5 * (lo + hi)
