"""The coverage term's Gauss–Newton terms as one compiled loop over the skeleton's samples (numba).

The same terms as :func:`snaketrack.tracker.fit.refine_terms.coverage_terms` (its numpy implementation is
the reference; tests/tracker/test_coverage_kernel.py compares the two): each sample's nearest point on
the projected primitive axes, pulled to the sample by its distance beyond the body's image radius. One
pass over (sample, primitive) pairs, accumulating ``JᵀJ`` and ``Jᵀe`` as it goes, where the reference
builds (samples × primitives) arrays in some forty numpy operations.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from snaketrack.jit import available, jit  # noqa: F401  (available: this module's kernels can run)


@jit
def _coverage(K, radii, P, G, skel, margin_px, max_px, weight):
    """(H (D, D), g (D,), cost) of the coverage term; the arguments as
    :func:`~snaketrack.tracker.fit.refine_terms.coverage_terms` takes them (P (M, 2, 3), G (M, 2, 3, D),
    skel (n, 2), all float64)."""
    M = P.shape[0]
    D = G.shape[3]
    H = np.zeros((D, D))
    g = np.zeros(D)
    cost = 0.0
    fx, fy = K[0, 0], K[1, 1]
    # the primitives' projected end points; a primitive with an end behind the camera takes no sample
    ok = np.empty(M, np.bool_)
    ua = np.empty((M, 2))
    dvec = np.empty((M, 2))
    dd = np.empty(M)
    for m in range(M):
        A, B = P[m, 0], P[m, 1]
        ok[m] = A[2] > 1e-6 and B[2] > 1e-6
        if not ok[m]:
            continue
        for c in range(2):
            pa = (K[c, 0] * A[0] + K[c, 1] * A[1] + K[c, 2] * A[2]) / A[2]
            pb = (K[c, 0] * B[0] + K[c, 1] * B[1] + K[c, 2] * B[2]) / B[2]
            ua[m, c] = pa
            dvec[m, c] = pb - pa
        dd[m] = max(dvec[m, 0] ** 2 + dvec[m, 1] ** 2, 1e-12)
    Jf = np.empty((2, D))
    X = np.empty(3)
    for s in range(skel.shape[0]):
        sx, sy = skel[s, 0], skel[s, 1]
        best, bm, bl = np.inf, -1, 0.0
        for m in range(M):
            if not ok[m]:
                continue
            rx, ry = sx - ua[m, 0], sy - ua[m, 1]
            lam = min(max((rx * dvec[m, 0] + ry * dvec[m, 1]) / dd[m], 0.0), 1.0)
            ex, ey = rx - lam * dvec[m, 0], ry - lam * dvec[m, 1]
            dist = math.sqrt(ex * ex + ey * ey)
            if dist < best:
                best, bm, bl = dist, m, lam
        if bm < 0:
            continue
        for c in range(3):
            X[c] = (1.0 - bl) * P[bm, 0, c] + bl * P[bm, 1, c]
        r_px = fx * radii[bm] / X[2] + margin_px
        if not (best > r_px and best < max_px):
            continue
        u = (K[0, 0] * X[0] + K[0, 1] * X[1] + K[0, 2] * X[2]) / X[2]
        v = (K[1, 0] * X[0] + K[1, 1] * X[1] + K[1, 2] * X[2]) / X[2]
        efx, efy = u - sx, v - sy  # the model point minus the sample
        nrm = max(math.sqrt(efx * efx + efy * efy), 1e-9)
        f = 1.0 - r_px / nrm
        ex, ey = efx * f, efy * f  # beyond the body's edge
        Z = X[2]
        for k in range(D):
            dx = (1.0 - bl) * G[bm, 0, 0, k] + bl * G[bm, 1, 0, k]
            dy = (1.0 - bl) * G[bm, 0, 1, k] + bl * G[bm, 1, 1, k]
            dz = (1.0 - bl) * G[bm, 0, 2, k] + bl * G[bm, 1, 2, k]
            Jf[0, k] = fx / Z * dx - fx * X[0] / (Z * Z) * dz
            Jf[1, k] = fy / Z * dy - fy * X[1] / (Z * Z) * dz
        ux, uy = efx / nrm, efy / nrm
        q = r_px / nrm
        # e = e_f (1 − r/|e_f|): de = (1 − r/|e_f|) de_f + r e_f e_fᵀ de_f / |e_f|³ (r held fixed)
        for k in range(D):
            proj = ux * Jf[0, k] + uy * Jf[1, k]
            Jf[0, k] = f * Jf[0, k] + q * ux * proj
            Jf[1, k] = f * Jf[1, k] + q * uy * proj
        for a in range(D):
            g[a] += weight * (Jf[0, a] * ex + Jf[1, a] * ey)
            for b in range(a, D):
                H[a, b] += weight * (Jf[0, a] * Jf[0, b] + Jf[1, a] * Jf[1, b])
        cost += weight * (ex * ex + ey * ey)
    for a in range(D):
        for b in range(a):
            H[a, b] = H[b, a]
    return H, g, cost


def coverage_terms_compiled(config, K: np.ndarray, radii: np.ndarray, pts: torch.Tensor, G: torch.Tensor,
                            skel: np.ndarray, nP: int):
    """:func:`~snaketrack.tracker.fit.refine_terms.coverage_terms` by the compiled loop: the same arguments
    and result ``(H (nP, nP), g (nP,), cost)``."""
    P = np.ascontiguousarray(pts.detach().numpy(), dtype=np.float64)
    Gn = np.ascontiguousarray(G.detach().numpy(), dtype=np.float64)
    H, g, cost = _coverage(np.ascontiguousarray(K, dtype=np.float64), np.ascontiguousarray(radii, dtype=np.float64),
                           P, Gn, np.ascontiguousarray(skel, dtype=np.float64), float(config.cover_margin_px),
                           float(config.cover_max_px), float(config.cover_weight))
    D = Gn.shape[-1]
    Hc = torch.zeros(nP, nP, dtype=torch.float64)
    gc = torch.zeros(nP, dtype=torch.float64)
    Hc[:D, :D] = torch.from_numpy(H)
    gc[:D] = torch.from_numpy(g)
    return Hc, gc, float(cost)
