"""The robot's axis in a mask: the first frame's search reads the body from it.

:func:`mask_axis` takes the longest path through the skeleton of the mask's largest component
(scikit-image's ``skeletonize``, the path by Dijkstra over the 8-connected skeleton pixels), smooths
it (the pixel chain's zigzag lengthens it), optionally extends both ends along their tangents to the
mask's boundary (the skeleton stops about a body radius short of each end), chains on other large
components across gaps (a post that cuts the body in two), and resamples it to ``n_points`` evenly
spaced points (u, v) [px]. :func:`mask_axes` does the same for several gap bounds at once.
Used by :meth:`snaketrack.tracker.tracker.Tracker.initialise`.
"""
from __future__ import annotations

import math
from typing import Optional, Sequence

import cv2
import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import dijkstra
from skimage.morphology import skeletonize


def _component_axis(comp: np.ndarray, smooth_px: int, extend: bool) -> Optional[np.ndarray]:
    """The longest skeleton path (n, 2) [px] of one connected component (bool (H, W)), unresampled."""
    sk = skeletonize(comp)
    vv, uu = np.nonzero(sk)
    if len(uu) < 2:
        return np.array([[uu[0], vv[0]]] * 2, float) if len(uu) else None
    idx = -np.ones(sk.shape, int)
    idx[vv, uu] = np.arange(len(uu))
    rows, cols, wts = [], [], []
    H, W = sk.shape
    for dv, du in ((0, 1), (1, 0), (1, 1), (1, -1)):
        v2, u2 = vv + dv, uu + du
        ok = (v2 >= 0) & (v2 < H) & (u2 >= 0) & (u2 < W)
        j = np.full(len(uu), -1)
        j[ok] = idx[v2[ok], u2[ok]]
        good = j >= 0
        rows += list(np.nonzero(good)[0])
        cols += list(j[good])
        wts += [math.hypot(dv, du)] * int(good.sum())
    G = csr_matrix((wts, (rows, cols)), shape=(len(uu), len(uu)))
    G = G + G.T
    d0 = dijkstra(G, indices=0)
    a = int(np.nanargmax(np.where(np.isfinite(d0), d0, -1)))
    da, pred = dijkstra(G, indices=a, return_predecessors=True)
    b = int(np.nanargmax(np.where(np.isfinite(da), da, -1)))
    path = [b]
    while path[-1] != a and pred[path[-1]] >= 0:
        path.append(int(pred[path[-1]]))
    P = np.stack([uu[path], vv[path]], 1).astype(float)
    if len(P) >= 5 and smooth_px > 0:
        # the 8-connected pixel chain zigzags, which adds length (and the depth is set from the
        # length): smooth it with a moving average, ends kept in place
        k = int(max(1, min(smooth_px, (len(P) - 1) // 2)))
        pad = np.concatenate([np.repeat(P[:1], k, 0), P, np.repeat(P[-1:], k, 0)])
        ker = np.ones(2 * k + 1) / (2 * k + 1)
        P = np.stack([np.convolve(pad[:, 0], ker, "valid"), np.convolve(pad[:, 1], ker, "valid")], 1)
    if extend and len(P) >= 3:
        # the skeleton stops about a body radius short of each end: extend both ends along their
        # tangent to the mask's boundary
        ends = []
        for tip, inner in ((P[0], P[min(len(P) - 1, 6)]), (P[-1], P[max(0, len(P) - 7)])):
            d = tip - inner
            nd = np.linalg.norm(d)
            ext = [tip]
            if nd > 0:
                d = d / nd
                for step in np.arange(0.5, 200.0, 0.5):
                    u, v = tip + step * d
                    iu, iv = int(round(u)), int(round(v))
                    if not (0 <= iu < W and 0 <= iv < H) or not comp[iv, iu]:
                        break
                    ext.append(tip + step * d)
            ends.append(np.array(ext[-1]))
        P = np.concatenate([ends[0][None], P, ends[1][None]])
    return P


def mask_axis(mask: np.ndarray, n_points: int = 64, smooth_px: int = 4, extend: bool = False,
              join_min_frac: float = 0.0, join_max_gap: float = 0.5) -> Optional[np.ndarray]:
    """The longest path through the skeleton of the mask's largest component, (n, 2) pixels (u, v).

    ``smooth_px``: half-width [samples ≈ px] of the moving average that takes the
    pixel chain's zigzag out (0: none). ``extend``: prolong both ends along
    their tangent to the mask's boundary (the skeleton stops about a body
    radius short of each end). ``join_min_frac`` > 0: other components of at
    least this fraction of the largest one's area are chained on (nearest
    ends first) while the gap is under ``join_max_gap`` × the path's length
    (a hole in the mask can cut the body in two).

    Resampled to ``n_points`` points evenly spaced along the path; None when
    the mask is empty. Both ends of the path are the ends of the robot's
    axis (which end is the head is not known).
    """
    axes = mask_axes(mask, (join_max_gap,), n_points, smooth_px, extend, join_min_frac)
    return axes[0] if axes else None


def mask_axes(mask: np.ndarray, join_max_gaps: Sequence[float] = (0.5,), n_points: int = 64,
              smooth_px: int = 4, extend: bool = False, join_min_frac: float = 0.0) -> list[np.ndarray]:
    """:func:`mask_axis` for each gap bound in ``join_max_gaps``, the distinct paths only ((n, 2) each).

    The components are skeletonised once; a path is kept when it chains on a
    different number of components than the paths before it. Empty list for
    an empty mask.
    """
    m = np.asarray(mask) > 0
    if not m.any():
        return []
    n, lab, stats, _ = cv2.connectedComponentsWithStats(m.astype(np.uint8), connectivity=8)
    areas = stats[1:, cv2.CC_STAT_AREA]
    order = 1 + np.argsort(-areas)
    first = _component_axis(lab == order[0], smooth_px, extend)
    if first is None:
        return []
    parts = []
    if join_min_frac > 0 and len(order) > 1:
        # a segmentation hole can cut the body in two: the other large components' axes
        parts = [_component_axis(lab == c, smooth_px, extend) for c in order[1:]
                 if areas[c - 1] >= join_min_frac * areas[order[0] - 1]]
        parts = [q for q in parts if q is not None and len(q) >= 2]
    out, joined_counts = [], []
    for gap in join_max_gaps:
        P, k = _chain_parts(first, parts, gap)
        if k not in joined_counts:
            joined_counts.append(k)
            out.append(_resample(P, n_points))
    return out


def _chain_parts(P: np.ndarray, parts: list, max_gap: float) -> tuple[np.ndarray, int]:
    """Chain ``parts`` (axes (m, 2) [px]) onto path ``P`` (n, 2), nearest ends first, while the gap is under
    ``max_gap`` × the path's length; returns the path and how many parts it took."""
    parts = list(parts)
    k = 0
    while parts:
        L = float(np.linalg.norm(np.diff(P, axis=0), axis=1).sum())
        best = None
        for j, q in enumerate(parts):
            for end_p, end_q in ((0, 0), (0, -1), (-1, 0), (-1, -1)):
                gap = float(np.linalg.norm(P[end_p] - q[end_q]))
                if best is None or gap < best[0]:
                    best = (gap, j, end_p, end_q)
        gap, j, end_p, end_q = best
        if gap > max_gap * max(L, 1.0):
            break
        q = parts.pop(j)
        if end_q == -1:
            q = q[::-1]  # q now starts at the end that meets P
        P = np.concatenate([P, q]) if end_p == -1 else np.concatenate([q[::-1], P])
        k += 1
    return P, k


def _resample(P: np.ndarray, n_points: int) -> np.ndarray:
    """Polyline ``P`` (m, 2) resampled to ``n_points`` points evenly spaced along it."""
    s = np.concatenate([[0], np.cumsum(np.linalg.norm(np.diff(P, axis=0), axis=1))])
    if s[-1] <= 0:
        return P
    t = np.linspace(0, s[-1], n_points)
    return np.stack([np.interp(t, s, P[:, 0]), np.interp(t, s, P[:, 1])], 1)
