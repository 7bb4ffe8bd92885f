"""The silhouette and its Jacobian as one compiled loop over (pixel, primitive) pairs (numba).

The same quantities as :func:`snaketrack.tracker.render.silhouette.render_with_jacobian`
(its torch implementation is the reference; tests/tracker/test_render_kernel.py
compares the two, values and derivatives): per pair the signed edge distance
``e`` [px] of :mod:`snaketrack.tracker.render.edges` (capsule or flat-ended cylinder)
and, only where the pair's weight ``(1 − o) c / σ`` exceeds ``tol``, its
closed-form derivatives ``∂e/∂A``, ``∂e/∂B``, chained at once with the end
points' Jacobian into the rows of ``∂o/∂θ``. Two loops over the pairs and no
intermediate arrays, where the torch version runs a hundred vector operations
over all pairs: :func:`silhouette_edges` (the silhouette, all a cost needs)
and :func:`jacobian_rows` (the derivatives, run only for a linearisation that
is used); :func:`silhouette_jacobian` runs both. The pixel rays are computed
from ``K`` once per pixel. Computed in float64.

:func:`available` says whether numba is importable; the renderer falls back
to the torch implementation without it.
"""
from __future__ import annotations

import math

import numpy as np

from snaketrack.jit import available, jit  # noqa: F401  (available: this module's kernels can run)


@jit
def _ray(p, w, u0, v0, fx, fy, cx, cy, skew):
    """Unit ray (3-tuple) through the centre of ROI pixel ``p`` (row-major, ROI width ``w``)."""
    u = float(p % w + u0)
    v = float(p // w + v0)
    y = (v - cy) / fy
    x = (u - cx - skew * y) / fx
    n = 1.0 / math.sqrt(x * x + y * y + 1.0)
    return (x * n, y * n, n)


@jit
def _capsule(A, B, r, d, f, min_depth):
    """Edge distance [px] of a capsule (end points A, B, radius r) along unit ray d (3-tuples) and
    ∂e/∂A, ∂e/∂B (the closed form of edges.capsule_edge_px_grad)."""
    Ex, Ey, Ez = B[0] - A[0], B[1] - A[1], B[2] - A[2]
    Ad = A[0] * d[0] + A[1] * d[1] + A[2] * d[2]
    Ed = Ex * d[0] + Ey * d[1] + Ez * d[2]
    apx, apy, apz = A[0] - Ad * d[0], A[1] - Ad * d[1], A[2] - Ad * d[2]
    epx, epy, epz = Ex - Ed * d[0], Ey - Ed * d[1], Ez - Ed * d[2]
    a = epx * epx + epy * epy + epz * epz
    bq = apx * epx + apy * epy + apz * epz
    ok = a > 1e-12
    a_safe = a if ok else 1.0
    s_raw = -bq / a_safe
    s = min(max(s_raw, 0.0), 1.0) if ok else 0.0
    free = ok and s_raw > 0.0 and s_raw < 1.0
    ppx, ppy, ppz = apx + s * epx, apy + s * epy, apz + s * epz
    dist = math.sqrt(ppx * ppx + ppy * ppy + ppz * ppz + 1e-14)
    z = Ad + s * Ed
    front = z > min_depth
    zc = max(z, min_depth)
    e_raw = f * (r - dist) / zc
    e = e_raw if front else -1e3
    k = -1.0 / zc if front else 0.0
    fd = f / dist
    c = Ed * e_raw / a_safe if free else 0.0
    ca = c * (2.0 * s - 1.0)
    cb = c * 2.0 * s
    nx, ny, nz = ppx * fd + e_raw * d[0], ppy * fd + e_raw * d[1], ppz * fd + e_raw * d[2]
    gA = (k * ((1.0 - s) * nx + c * apx + ca * epx), k * ((1.0 - s) * ny + c * apy + ca * epy),
          k * ((1.0 - s) * nz + c * apz + ca * epz))
    gB = (k * (s * nx - (c * apx + cb * epx)), k * (s * ny - (c * apy + cb * epy)),
          k * (s * nz - (c * apz + cb * epz)))
    return e, gA, gB


@jit
def _dot(a, b):
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


@jit
def _cross(a, b):
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


@jit
def _axpy(s, a, b):
    """s a + b for 3-tuples."""
    return (s * a[0] + b[0], s * a[1] + b[1], s * a[2] + b[2])


@jit
def _scale(s, a):
    return (s * a[0], s * a[1], s * a[2])


@jit
def _cylinder_frame(A, B):
    """The ray-independent frame of a cylinder with axis A→B (3-tuples) [m]: its centre m, half axis w and
    its length h, |m| (zm), the unit axis u and view direction v = m/|m|, their cosine c and |c| held above
    0.05 (ca), the axis's part across the view p, its length sn, and the outline's frame y = p/|p|, x = v × y."""
    eps = 1e-12
    m = (0.5 * (A[0] + B[0]), 0.5 * (A[1] + B[1]), 0.5 * (A[2] + B[2]))
    w = (0.5 * (B[0] - A[0]), 0.5 * (B[1] - A[1]), 0.5 * (B[2] - A[2]))
    h = math.sqrt(_dot(w, w) + eps)
    zm = math.sqrt(_dot(m, m) + eps)
    u = _scale(1.0 / h, w)
    v = _scale(1.0 / zm, m)
    c = _dot(u, v)
    ca = max(abs(c), 0.05)
    p = _axpy(-c, v, u)
    sn = math.sqrt(_dot(p, p) + eps)
    y = _scale(1.0 / sn, p)
    x = _cross(v, y)
    return m, w, h, zm, u, v, c, ca, p, sn, y, x


@jit
def _cylinder(A, B, r, d, f, min_depth):
    """Edge distance [px] of a flat-ended cylinder (axis A→B, radius r) along unit ray d (3-tuples) and
    ∂e/∂A, ∂e/∂B (the adjoint steps of edges.cylinder_edge_px_grad)."""
    eps = 1e-12
    m, w, h, zm, u, v, c, ca, p, sn, y, x = _cylinder_frame(A, B)
    dd = d
    dv = _dot(dd, v)
    dvc = max(dv, 1e-6)
    kk = zm / dvc
    q = _axpy(kk, dd, _scale(-1.0, m))
    qx = _dot(q, x)
    qy = _dot(q, y)
    ys = qy / ca
    L = h * sn / ca
    dy = ys - max(min(ys, L), -L)
    D = qx * qx + dy * dy + eps
    sq = math.sqrt(D)
    N = qx * qx + dy * dy / (ca * ca) + eps
    g = math.sqrt(D / N)
    e_raw = f * ((r - sq) * g) / zm
    front = zm > min_depth and dv > 0.0
    e = e_raw if front else -1e3
    one = 1.0 if front else 0.0
    b_em = one * f / zm
    b_zm = -one * e_raw / zm
    b_sq = -g * b_em
    b_g = (r - sq) * b_em
    b_D = b_sq / (2.0 * sq) + b_g * g / (2.0 * D)
    b_N = -b_g * g / (2.0 * N)
    b_qx = 2.0 * qx * (b_D + b_N)
    b_dy = 2.0 * dy * (b_D + b_N / (ca * ca))
    b_ca = -2.0 * dy * dy / (ca * ca * ca) * b_N
    out = 1.0 if (ys > L or ys < -L) else 0.0
    sgn_ys = 1.0 if ys > 0.0 else (-1.0 if ys < 0.0 else 0.0)
    b_ys = out * b_dy
    b_L = -out * sgn_ys * b_dy
    b_h = b_L * sn / ca
    b_sn = b_L * h / ca
    b_ca = b_ca - b_L * L / ca - b_ys * ys / ca
    b_qy = b_ys / ca
    b_q = _axpy(b_qx, x, _scale(b_qy, y))
    b_x = _scale(b_qx, q)
    b_y = _scale(b_qy, q)
    b_k = _dot(b_q, dd)
    b_m = _scale(-1.0, b_q)
    b_zm = b_zm + b_k / dvc
    b_dv = -b_k * zm / (dvc * dvc) if dv > 1e-6 else 0.0
    b_v = _axpy(b_dv, dd, _cross(y, b_x))
    b_y = _axpy(1.0, b_y, _cross(b_x, v))
    b_p = _scale(1.0 / sn, b_y)
    b_sn = b_sn - _dot(b_y, p) / (sn * sn)
    b_p = _axpy(b_sn / sn, p, b_p)
    sgn_c = 1.0 if c > 0.0 else (-1.0 if c < 0.0 else 0.0)
    b_c = -_dot(b_p, v) + (b_ca * sgn_c if abs(c) > 0.05 else 0.0)
    b_v = _axpy(b_c, u, _axpy(-c, b_p, b_v))
    b_u = _axpy(b_c, v, b_p)
    b_m = _axpy(1.0 / zm, b_v, b_m)
    b_zm = b_zm - _dot(b_v, m) / (zm * zm)
    b_m = _axpy(b_zm / zm, m, b_m)
    b_w = _scale(1.0 / h, b_u)
    b_h = b_h - _dot(b_u, w) / (h * h)
    b_w = _axpy(b_h / h, w, b_w)
    gA = (0.5 * (b_m[0] - b_w[0]), 0.5 * (b_m[1] - b_w[1]), 0.5 * (b_m[2] - b_w[2]))
    gB = (0.5 * (b_m[0] + b_w[0]), 0.5 * (b_m[1] + b_w[1]), 0.5 * (b_m[2] + b_w[2]))
    return e, gA, gB


@jit
def _primitive_table(S, E, cyl):
    """Per primitive, the quantities of its edge distance that do not depend on the ray: (M, 16).

    Capsules: A (3), B − A (3), A·A, A·(B − A), |B − A|². Cylinders: the centre m (3), its distance
    |m|, v = m/|m| (3), the outline frame x (3) and y (3), |cos θ| held above 0.05 and the stadium's
    stretched half length L (:func:`_cylinder`)."""
    M = S.shape[0]
    T = np.zeros((M, 16))
    for i in range(M):
        A = (S[i, 0], S[i, 1], S[i, 2])
        B = (E[i, 0], E[i, 1], E[i, 2])
        if not cyl[i]:
            Ev = (B[0] - A[0], B[1] - A[1], B[2] - A[2])
            T[i, 0:3] = A
            T[i, 3:6] = Ev
            T[i, 6] = _dot(A, A)
            T[i, 7] = _dot(A, Ev)
            T[i, 8] = _dot(Ev, Ev)
            continue
        m, _, h, zm, _, v, _, ca, _, sn, y, x = _cylinder_frame(A, B)
        T[i, 0:3] = m
        T[i, 3] = zm
        T[i, 4:7] = v
        T[i, 7:10] = x
        T[i, 10:13] = y
        T[i, 13] = ca
        T[i, 14] = h * sn / ca
    return T


@jit
def _edge_table(T, i, cyl, r, d, f, min_depth):
    """:func:`_edge`'s value from primitive ``i``'s row of :func:`_primitive_table` (the same arithmetic,
    the ray-independent part done once per primitive)."""
    if not cyl:
        Ad = T[i, 0] * d[0] + T[i, 1] * d[1] + T[i, 2] * d[2]
        Ed = T[i, 3] * d[0] + T[i, 4] * d[1] + T[i, 5] * d[2]
        a = T[i, 8] - Ed * Ed
        bq = T[i, 7] - Ad * Ed
        c = T[i, 6] - Ad * Ad
        s = min(max(-bq / a, 0.0), 1.0) if a > 1e-12 else 0.0
        dist = math.sqrt(max(a * s * s + 2.0 * bq * s + c, 0.0) + 1e-14)
        z = Ad + s * Ed
        if z > min_depth:
            return f * (r - dist) / z
        return -1e3
    eps = 1e-12
    zm = T[i, 3]
    dv = d[0] * T[i, 4] + d[1] * T[i, 5] + d[2] * T[i, 6]
    if not (zm > min_depth and dv > 0.0):
        return -1e3
    kk = zm / max(dv, 1e-6)
    qx = kk * (d[0] * T[i, 7] + d[1] * T[i, 8] + d[2] * T[i, 9]) - (
        T[i, 0] * T[i, 7] + T[i, 1] * T[i, 8] + T[i, 2] * T[i, 9])
    qy = kk * (d[0] * T[i, 10] + d[1] * T[i, 11] + d[2] * T[i, 12]) - (
        T[i, 0] * T[i, 10] + T[i, 1] * T[i, 11] + T[i, 2] * T[i, 12])
    ca = T[i, 13]
    L = T[i, 14]
    ys = qy / ca
    dy = ys - max(min(ys, L), -L)
    D = qx * qx + dy * dy + eps
    sq = math.sqrt(D)
    N = qx * qx + dy * dy / (ca * ca) + eps
    return f * ((r - sq) * math.sqrt(D / N)) / zm


@jit
def _edge(A, B, r, cyl, d, f, min_depth):
    if cyl:
        return _cylinder(A, B, r, d, f, min_depth)
    return _capsule(A, B, r, d, f, min_depth)


@jit
def _sigmoid(x):
    if x >= 0.0:
        return 1.0 / (1.0 + math.exp(-x))
    z = math.exp(x)
    return z / (1.0 + z)


@jit
def silhouette_jacobian(pix, prim, roi, cam, S, E, rad, cyl, f, min_depth, sig, offset, tol, G6, with_offset):
    """The ROI's soft silhouette and the non-zero rows of its Jacobian, for one state.

    pix, prim: (Q,) int64 pairs (ROI pixel, primitive); roi: (4,) int64 (u0, v0, w, h);
    cam: (5,) float64 (fx, fy, cx, cy, skew); S, E: (M, 3) end points [m]; rad: (M,) [m]; cyl: (M,) bool;
    f: focal length [px]; min_depth [m]; sig: σ [px]; offset: edge offset [px]; tol: derivative threshold;
    G6: (M, 6, D) end-point Jacobian; with_offset: add the edge offset's column.
    Returns sil (P,), rows (R,) int64 in increasing order, jac (R, D[+1]): :func:`silhouette_edges`
    followed by :func:`jacobian_rows`.
    """
    sil, e_all, rays = silhouette_edges(pix, prim, roi, cam, S, E, rad, cyl, f, min_depth, sig, offset)
    rows, jac = jacobian_rows(pix, prim, roi, S, E, rad, cyl, f, min_depth, sig, tol, G6, with_offset,
                              sil, e_all, rays)
    return sil, rows, jac


@jit
def silhouette_edges(pix, prim, roi, cam, S, E, rad, cyl, f, min_depth, sig, offset):
    """The ROI's soft silhouette sil (P,), each pair's signed edge distance e_all (Q,) [px, the edge
    offset added] and the pixels' unit rays (P, 3) (set at the pairs' pixels only; arguments as
    :func:`silhouette_jacobian`): the first half of its work, all a cost needs."""
    u0, v0, w, h = roi[0], roi[1], roi[2], roi[3]
    fx, fy, cx, cy, skew = cam[0], cam[1], cam[2], cam[3], cam[4]
    Q = pix.shape[0]
    P = w * h
    L = np.ones(P)  # the product over the pixel's pairs of the probability that the primitive misses it
    e_all = np.empty(Q)
    T = _primitive_table(S, E, cyl)
    # a pixel lies in the bands of several primitives: its ray is computed once
    rays = np.empty((P, 3))
    have = np.zeros(P, np.bool_)
    for i in range(Q):
        m = prim[i]
        p = pix[i]
        if have[p]:
            d = (rays[p, 0], rays[p, 1], rays[p, 2])
        else:
            d = _ray(p, w, u0, v0, fx, fy, cx, cy, skew)
            rays[p, 0], rays[p, 1], rays[p, 2] = d[0], d[1], d[2]
            have[p] = True
        e = _edge_table(T, m, cyl[m], rad[m], d, f, min_depth) + offset
        e_all[i] = e
        L[p] *= _sigmoid(-e / sig)
    sil = np.zeros(P)
    for p in range(P):
        if L[p] != 1.0:  # most of the ROI lies outside every primitive's band: 0 there
            sil[p] = 1.0 - L[p]
    return sil, e_all, rays


@jit
def jacobian_rows(pix, prim, roi, S, E, rad, cyl, f, min_depth, sig, tol, G6, with_offset, sil, e_all, rays):
    """The non-zero rows of the silhouette's Jacobian, rows (R,) int64 and jac (R, D[+1]), from the
    silhouette ``sil``, edge distances ``e_all`` and rays of :func:`silhouette_edges` (other arguments as
    :func:`silhouette_jacobian`): the second half of its work, needed only where a linearisation is used."""
    Q = pix.shape[0]
    P = sil.shape[0]
    Dp = G6.shape[2]
    wk = np.zeros(Q)
    lut = np.full(P, -1, np.int64)
    for i in range(Q):
        wgt = (1.0 - sil[pix[i]]) * _sigmoid(e_all[i] / sig) / sig
        if wgt > tol:
            wk[i] = wgt
            lut[pix[i]] = 0
    n_rows = 0
    for p in range(P):
        if lut[p] == 0:
            n_rows += 1
    rows = np.empty(n_rows, np.int64)
    n = 0
    for p in range(P):
        if lut[p] == 0:
            lut[p] = n
            rows[n] = p
            n += 1
    D = Dp + 1 if with_offset else Dp
    jac = np.zeros((n_rows, D))
    for i in range(Q):
        wgt = wk[i]
        if wgt == 0.0:
            continue
        m = prim[i]
        p = pix[i]
        d = (rays[p, 0], rays[p, 1], rays[p, 2])
        A = (S[m, 0], S[m, 1], S[m, 2])
        B = (E[m, 0], E[m, 1], E[m, 2])
        _, gA, gB = _edge(A, B, rad[m], cyl[m], d, f, min_depth)
        a0, a1, a2 = gA[0] * wgt, gA[1] * wgt, gA[2] * wgt
        b0, b1, b2 = gB[0] * wgt, gB[1] * wgt, gB[2] * wgt
        row = lut[pix[i]]
        for k in range(Dp):
            jac[row, k] += (a0 * G6[m, 0, k] + a1 * G6[m, 1, k] + a2 * G6[m, 2, k]
                            + b0 * G6[m, 3, k] + b1 * G6[m, 4, k] + b2 * G6[m, 5, k])
        if with_offset:
            jac[row, Dp] += wgt
    return rows, jac


@jit
def _row_span(au, av, bu, bv, half, vv):
    """The span [lo, hi] (float) where row ``vv`` meets the band within ``half`` px of the segment a→b
    (:func:`snaketrack.tracker.render.bands._band_spans` for one row; lo > hi when it misses)."""
    lo = np.inf
    hi = -np.inf
    for k in range(2):
        cu = au if k == 0 else bu
        cv = av if k == 0 else bv
        dv = vv - cv
        if abs(dv) <= half:
            du = math.sqrt(max(half * half - dv * dv, 0.0))
            lo = min(lo, cu - du)
            hi = max(hi, cu + du)
    eu, ev = bu - au, bv - av
    L = np.hypot(eu, ev)
    ok = L > 1e-9
    Ls = L if ok else 1.0
    ex, ey = eu / Ls, ev / Ls
    dv = vv - av
    rlo = -np.inf
    rhi = np.inf
    for k in range(2):
        coef = ex if k == 0 else -ey
        offs = ey * dv if k == 0 else ex * dv
        b0 = 0.0 if k == 0 else -half
        b1 = L if k == 0 else half
        if abs(coef) > 1e-12:
            t1, t2 = (b0 - offs) / coef, (b1 - offs) / coef
            rlo = max(rlo, min(t1, t2))
            rhi = min(rhi, max(t1, t2))
        else:
            ok = ok and offs >= b0 and offs <= b1
    if ok and rlo <= rhi:
        lo = min(lo, au + rlo)
        hi = max(hi, au + rhi)
    return lo, hi


@jit
def _primitive_band(A, B, r, K, f, u0, v0, w, h, pad_px):
    """One primitive's band in a ROI (u0, v0, w, h): its end points projected into ROI pixels (ua, va, ub,
    vb), the band's half-width [px] (:func:`snaketrack.tracker.render.bands._projected`), its integer box
    clipped to the ROI (u_lo, v_lo, u_hi, v_hi; u_lo = 0 and u_hi = −1 when it misses the ROI, as
    :func:`snaketrack.tracker.render.bands.primitive_boxes` gives it) and whether an end lies behind the
    camera (the band then unbounded)."""
    pa, qa, zca = _project(A, K)
    pb, qb, zcb = _project(B, K)
    rho2 = max((pa - K[0, 2]) ** 2 + (qa - K[1, 2]) ** 2, (pb - K[0, 2]) ** 2 + (qb - K[1, 2]) ** 2)
    ua, va, ub, vb = pa - u0, qa - v0, pb - u0, qb - v0
    rpx = f * r / min(zca, zcb)
    mag = math.sqrt(1.0 + (math.sqrt(rho2) + rpx) ** 2 / f ** 2)
    half = rpx * mag + pad_px * mag * mag + 1.0
    ulo = math.floor(min(ua, ub) - half)
    uhi = math.ceil(max(ua, ub) + half)
    vlo = math.floor(min(va, vb) - half)
    vhi = math.ceil(max(va, vb) + half)
    out = uhi < 0 or ulo > w - 1 or max(A[2], B[2]) < 1e-3 or vhi < 0 or vlo > h - 1
    b0 = 0 if out else int(min(max(min(max(ulo, 0.0), w - 1.0), -1e6), 1e6))
    b1 = int(min(max(min(max(vlo, 0.0), h - 1.0), -1e6), 1e6))
    b2 = -1 if out else int(min(max(min(max(uhi, -1.0), w - 1.0), -1e6), 1e6))
    b3 = int(min(max(min(max(vhi, -1.0), h - 1.0), -1e6), 1e6))
    return ua, va, ub, vb, half, b0, b1, b2, b3, min(A[2], B[2]) < 1e-3


@jit
def _project(P, K):
    """Point P (3,) [m] projected to image pixels (u, v) (its depth clamped to 1 mm) and that depth."""
    zc = max(P[2], 1e-3)
    return K[0, 0] * P[0] / zc + K[0, 1] * P[1] / zc + K[0, 2], K[1, 1] * P[1] / zc + K[1, 2], zc


@jit
def band_pairs(S, E, rad, K, roi, pad_px):
    """The (ROI pixel, primitive) pairs of one state, int64 arrays (Q,), (Q,): the same pairs, in the same
    order, as :func:`snaketrack.tracker.render.bands.primitive_pixels` (band=True) for a batch of one.

    S, E: (M, 3) end points [m]; rad: (M,) [m]; K: (3, 3) [px]; roi: (4,) int64; pad_px [px]."""
    u0, v0, w, h = roi[0], roi[1], roi[2], roi[3]
    M = S.shape[0]
    f = 0.5 * (K[0, 0] + K[1, 1])
    U = np.empty((M, 2))
    V = np.empty((M, 2))
    half = np.empty(M)
    box = np.empty((M, 4), np.int64)
    unbounded = np.empty(M, np.bool_)
    for i in range(M):
        U[i, 0], V[i, 0], U[i, 1], V[i, 1], half[i], b0, b1, b2, b3, unbounded[i] = _primitive_band(
            S[i], E[i], rad[i], K, f, u0, v0, w, h, pad_px)
        box[i, 0], box[i, 1], box[i, 2], box[i, 3] = b0, b1, b2, b3
    total = 0
    for sweep in range(2):  # count, then fill
        if sweep == 1:
            pix = np.empty(total, np.int64)
            prim = np.empty(total, np.int64)
            q = 0
        for i in range(M):
            if box[i, 2] < box[i, 0]:
                continue
            for vi in range(box[i, 1], box[i, 3] + 1):
                ul, uh = box[i, 0], box[i, 2]
                if unbounded[i]:
                    lo, hi = ul, uh
                else:
                    flo, fhi = _row_span(U[i, 0], V[i, 0], U[i, 1], V[i, 1], half[i], float(vi))
                    if not (fhi >= flo) or math.ceil(flo) > uh or math.floor(fhi) < ul:
                        continue
                    lo, hi = max(int(math.ceil(flo)), ul), min(int(math.floor(fhi)), uh)
                if hi < lo:
                    continue
                if sweep == 0:
                    total += hi - lo + 1
                else:
                    for uu in range(lo, hi + 1):
                        pix[q] = vi * w + uu
                        prim[q] = i
                        q += 1
    return pix, prim


@jit
def roi_box(S, E, rad, K, W, H, pad_px):
    """The image box (u0, v0, w, h) [px] holding every primitive's silhouette band of one state, int64 (4,), or
    w = 0 when none is in the image: the union of :func:`snaketrack.tracker.render.bands.primitive_boxes`
    over the primitives with a box, for the whole image (W × H) as the ROI.

    S, E: (M, 3) end points [m]; rad: (M,) [m]; K: (3, 3) [px]; pad_px [px]."""
    f = 0.5 * (K[0, 0] + K[1, 1])
    out = np.zeros(4, np.int64)
    ul, vl, uh, vh = W, H, -1, -1
    for i in range(S.shape[0]):
        b = _primitive_band(S[i], E[i], rad[i], K, f, 0.0, 0.0, W, H, pad_px)
        if b[7] < b[5]:  # no box: off the image or behind the camera
            continue
        ul, vl, uh, vh = min(ul, b[5]), min(vl, b[6]), max(uh, b[7]), max(vh, b[8])
    if uh >= ul:
        out[0], out[1], out[2], out[3] = ul, vl, uh - ul + 1, vh - vl + 1
    return out
