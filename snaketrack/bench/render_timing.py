"""How long the tracker's silhouette renderer and its Jacobian take, beside slower references.

:func:`render_timing` times one forward and backward pass of the soft
silhouette renderer at 640×360 (its own ROI, σ = 0.5 px) at a clip's first
true pose (``render_fwd_bwd_ms``), and in the same run:

- the same pass with the same camera in a frame of 2560×1440, 16 times the
  pixels with the robot the same size (``render_fwd_bwd_ms_16x_frame``), and
  their ratio ``render_16x_frame_cost_x``: about 1 when the cost follows the
  robot's size in the image and not the frame's, 16 for a renderer that
  visits every pixel;
- the reference ``render_dense_fwd_bwd_ms``: the same arithmetic over every
  pixel of the 640×360 frame against every primitive (no ROI, no pixel
  bands), with ``render_dense_speedup_x`` and the largest difference between
  the two silhouettes, ``render_dense_max_abs_diff`` (the renderer cuts its
  coverage at 8 σ, so about 2e-4 at most);
- :func:`jacobian_timing`: one LM linearisation on each primitive's band
  (``jacobian_band_ms``) against its whole screen box (``jacobian_box_ms``).

Times are means over the repetitions after a warm-up, in milliseconds.
"""
from __future__ import annotations

import time
from pathlib import Path

import torch

#: The timed frame (width, height) [px], whatever the clip's size.
SIZE = (640, 360)


def render_timing(data_path: Path, reps: int = 20) -> dict:
    """The renderer's timings (module doc) at the first true pose of the clip ``data_path`` (needs
    ``truth.jsonl``); ``reps`` repetitions of each pass, a quarter of them for the dense reference.
    Returns a dict of figures [ms, ratios]."""
    from snaketrack.datasets.layout import Dataset
    from snaketrack.models.robot import load_robot
    from snaketrack.tracker.calib.camera import Camera
    from snaketrack.tracker.render.silhouette import SilhouetteRenderer
    from snaketrack.tracker.state import StateLayout

    W, H = SIZE
    ds = Dataset(data_path)
    robot = load_robot(ds.meta.get("robot", "planar-snake-11"))
    cam = Camera.from_meta(ds.meta)
    if cam.size != SIZE:
        cam = cam.resized(W, H)
    r = SilhouetteRenderer(robot, cam.K, W, H)
    # the same camera in a frame 4x as wide and high (16x the pixels), the robot where it lies relative
    # to the principal point: the same pixels of robot, 16x the pixels of frame
    K_big = cam.K.copy()
    K_big[0, 2] += 1.5 * W
    K_big[1, 2] += 1.5 * H
    r_big = SilhouetteRenderer(robot, K_big, 4 * W, 4 * H)
    tr = ds.truth[0]
    x0 = StateLayout.for_robot(robot).from_quat(tr["joint_angles"], tr["base_quat_cam"], tr["base_position_cam"])

    # the reference: every pixel of the frame against every primitive (no ROI, no bands: the
    # primitives' margin reaches past the frame), the same arithmetic as the renderer's
    r_dense = r.with_settings(margin_sigmas=2.0 * (W + H) / r.settings.sigma_px)

    def once(rr, roi, target):
        x = torch.as_tensor(x0, dtype=torch.float32)[None].clone().requires_grad_(True)
        sil, roi_used = rr(x, roi)
        u0, v0, w, h = roi_used
        loss = ((sil[0] - target[v0:v0 + h, u0:u0 + w]) ** 2).sum()
        loss.backward()

    xt = torch.as_tensor(x0)[None].float()
    with torch.no_grad():
        sil, sil_dense = r.full_image(xt)[0], r_dense.full_image(xt)[0]
        target, target_big = (sil > 0.5).float(), (r_big.full_image(xt)[0] > 0.5).float()
    out = {}
    for name, rr, roi, tgt, n in (("render_fwd_bwd_ms", r, None, target, reps),
                                  ("render_fwd_bwd_ms_16x_frame", r_big, None, target_big, reps),
                                  ("render_dense_fwd_bwd_ms", r_dense, (0, 0, W, H), target, max(reps // 4, 1))):
        for _ in range(2):
            once(rr, roi, tgt)
        t0 = time.perf_counter()
        for _ in range(n):
            once(rr, roi, tgt)
        out[name] = (time.perf_counter() - t0) / n * 1e3
    out["render_16x_frame_cost_x"] = out["render_fwd_bwd_ms_16x_frame"] / out["render_fwd_bwd_ms"]
    out["render_dense_speedup_x"] = out["render_dense_fwd_bwd_ms"] / out["render_fwd_bwd_ms"]
    out["render_dense_max_abs_diff"] = float((sil - sil_dense).abs().max())
    out.update(jacobian_timing(r, x0, reps))
    return out


def jacobian_timing(r, x0, reps: int) -> dict:
    """One LM linearisation (silhouette and closed-form Jacobian, σ = 0.5 px, the tracker's ``jac_tol``) at the
    pose vector ``x0`` (D,) with the renderer ``r``: the pixels of each capsule's screen band (the tracker's)
    against its whole screen box (the reference). Returns ``jacobian_band_ms``, ``jacobian_box_ms`` and
    ``jacobian_band_speedup_x``."""
    from snaketrack.models.chain import point_jacobian
    from snaketrack.tracker.config import RefineConfig
    from snaketrack.tracker.render.silhouette import SilhouetteSettings, render_with_jacobian

    lay = r.layout
    x = torch.as_tensor(x0, dtype=torch.float64)
    q, R0, t0 = lay.to_fk(x[None])
    pts, G = point_jacobian(r.robot, r.model, q[0], R0[0], t0[0])
    roi = r.screen_roi(x[None], 8.0)
    s = SilhouetteSettings(sigma_px=0.5)
    radii = torch.as_tensor(r.model.radius, dtype=torch.float64)
    out = {}
    for name, band in (("jacobian_band_ms", True), ("jacobian_box_ms", False)):
        def once(band=band):
            return render_with_jacobian(pts[None, :, 0], pts[None, :, 1], radii, r.K.double(), roi, G, s,
                                        with_offset=True, tol=RefineConfig().jac_tol / 0.5, compute_dtype=torch.float32,
                                        image_size=(r.width, r.height), band=band)
        for _ in range(3):
            once()
        t0_ = time.perf_counter()
        for _ in range(reps):
            once()
        out[name] = (time.perf_counter() - t0_) / reps * 1e3
    out["jacobian_band_speedup_x"] = out["jacobian_box_ms"] / out["jacobian_band_ms"]
    return out
