"""The 3-D shape of a statics solution as an image, rendered in memory (the caller writes it)."""
from __future__ import annotations

import io

import numpy as np

from snaketrack.models.statics.kinematics import backbone_points

IMAGE_FORMATS = ("png", "pdf", "svg", "jpg", "jpeg")


def shape_image(robot, res, ref, title: str, fmt: str = "png") -> bytes:
    """The backbone of ``res`` (with gravity) over ``ref`` (no gravity) in 3-D, axes in mm, as image bytes.

    robot: the :class:`~snaketrack.models.statics.robot.StaticsRobot` both were solved for.
    res, ref: :class:`~snaketrack.models.statics.solver.StaticsResult`; when ``res is ref``
    only the no-gravity shape is drawn. fmt: one of :data:`IMAGE_FORMATS`
    (120 dpi for the raster ones). The base is at the origin; the axes are equal and
    span the shapes with 10 % margin.
    """
    import matplotlib  # deferred: the module imports without matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # deferred: the module imports without matplotlib

    if fmt not in IMAGE_FORMATS:
        raise ValueError(f"image format {fmt!r}; expected one of {', '.join(IMAGE_FORMATS)}")
    fig = plt.figure(figsize=(6, 6))
    ax = fig.add_subplot(projection="3d")
    shapes = [(ref, "no gravity", "tab:gray", "--")]
    if res is not ref:
        shapes.append((res, "with gravity", "tab:blue", "-"))
    allp = []
    for r_, label, color, ls in shapes:
        pts = backbone_points(robot, r_.bending_angles) * 1e3
        allp.append(pts)
        ax.plot(pts[:, 0], pts[:, 1], pts[:, 2], ls, color=color, lw=2, label=label)
        ax.scatter(pts[1:-1:2, 0], pts[1:-1:2, 1], pts[1:-1:2, 2], color=color, s=10)
        ax.scatter(*pts[-1], color=color, s=40, marker="o")
    ax.scatter(0, 0, 0, color="k", s=50, marker="s", label="base")
    allp = np.concatenate(allp + [np.zeros((1, 3))])
    c = 0.5 * (allp.max(0) + allp.min(0))
    half = 0.5 * max(float(np.ptp(allp, axis=0).max()), 1e-3) * 1.1
    ax.set_xlim(c[0] - half, c[0] + half)
    ax.set_ylim(c[1] - half, c[1] + half)
    ax.set_zlim(c[2] - half, c[2] + half)
    ax.set_xlabel("x (mm)")
    ax.set_ylabel("y (mm)")
    ax.set_zlabel("z (mm)")
    ax.set_title(title, fontsize=9)
    ax.legend(loc="upper left", fontsize=8)
    buf = io.BytesIO()
    fig.savefig(buf, format="jpeg" if fmt == "jpg" else fmt, dpi=120)
    plt.close(fig)
    return buf.getvalue()
