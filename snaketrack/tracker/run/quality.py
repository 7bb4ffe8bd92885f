"""How good a track is without truth: the figures of ``metrics.json`` that need no ``truth.jsonl``.

Real footage has no truth, so these figures judge a track by itself and by the observed masks
(names as in ``metrics.json``, docs/tracking.md, "Outputs"):

- :func:`iou_figures`: the rendered silhouette's IoU against the observed mask, mean and 5th
  percentile over frames; frames without a figure (NaN: an empty mask) are left out and counted.
- :func:`status_counts`: frames tracked, coasting and lost, counts and fractions.
- :func:`skeleton_residual`: per frame, the median distance [px] of the observed mask's skeleton
  pixels to the nearest projected link axis; :class:`QualityWriter` computes it for each finished
  frame while tracking (the masks exist only then) into ``quality.csv``.
- :func:`joint_second_differences`: per joint, the median absolute second difference of the joint
  angle over consecutive tracked frames [rad] (a jittery track has large ones).
- :func:`dominant_frequency` / :func:`gait_spectra`: per joint, the dominant frequency [Hz] of the
  angle's signal and the fraction of its power near that frequency (a crawling snake's joints
  oscillate at one gait frequency).
- :func:`quality_metrics`: all of them from ``track.csv`` and ``quality.csv``;
  :func:`plot_quality`: ``quality.png``.
"""
from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np
from skimage.morphology import skeletonize

from snaketrack.errors import FileFormatError
from snaketrack.io import CsvAppender, atomic_write_bytes
from snaketrack.tracker.run.outputs import STATUS_COLOURS, link_axes_uv

#: ``quality.csv``'s columns: the frame, its skeleton residual [px], how many skeleton pixels it had and the
#: observed mask's area [px].
QUALITY_COLUMNS = ("frame", "skeleton_residual_px", "skeleton_pixels", "mask_pixels")
#: Fewest tracked frames for a gait frequency (fewer: NaN).
MIN_GAIT_FRAMES = 16
#: The figures ``summary.json`` repeats from ``metrics.json``.
HEADLINE = ("silhouette_iou_mean", "silhouette_iou_p5", "skeleton_residual_px", "skeleton_residual_p95_px",
            "frames_tracked", "frames_coasting", "frames_lost", "lost_fraction", "joint_second_difference_rad",
            "gait_frequency_hz", "gait_frequency_spread", "gait_power_fraction")


def _median(a) -> float:
    a = np.asarray(a, float)
    a = a[np.isfinite(a)]
    return float(np.median(a)) if a.size else float("nan")


# -- silhouette IoU and status ------------------------------------------------------------------
def iou_figures(iou: Sequence[float]) -> tuple[float, float, int]:
    """``(mean, 5th percentile, NaN frames)`` of per-frame IoUs (n,); the NaNs are left out of both
    figures (NaN when every frame is NaN) and counted."""
    a = np.asarray(iou, float).reshape(-1)
    ok = np.isfinite(a)
    if not ok.any():
        return float("nan"), float("nan"), int(a.size)
    return float(a[ok].mean()), float(np.percentile(a[ok], 5)), int(np.count_nonzero(~ok))


def status_counts(status: Sequence[str]) -> dict[str, Any]:
    """``frames``, ``frames_tracked``, ``frames_coasting``, ``frames_lost`` and their fractions of the
    frames (``tracked_fraction``, ``coasting_fraction``, ``lost_fraction``; NaN with no frames)."""
    s = np.asarray(status).astype(str).reshape(-1)
    n = int(s.size)
    out: dict[str, Any] = {"frames": n}
    for name in ("tracked", "coasting", "lost"):
        out[f"frames_{name}"] = int(np.count_nonzero(s == name))
    for name in ("tracked", "coasting", "lost"):
        out[f"{name}_fraction"] = out[f"frames_{name}"] / n if n else float("nan")
    return out


# -- skeleton residual --------------------------------------------------------------------------
def skeleton_pixels(mask: np.ndarray) -> np.ndarray:
    """The skeleton pixels (n, 2) (u, v) [px] of a mask (bool (H, W)): scikit-image's ``skeletonize`` of
    the whole mask (every component). (0, 2) for an empty mask."""
    m = np.asarray(mask) > 0
    if not m.any():
        return np.zeros((0, 2))
    vv, uu = np.nonzero(m)
    v0, u0 = max(int(vv.min()) - 1, 0), max(int(uu.min()) - 1, 0)
    crop = m[v0:int(vv.max()) + 2, u0:int(uu.max()) + 2]  # the mask's box: skeletonize is per pixel
    sv, su = np.nonzero(skeletonize(crop))
    return np.stack([su + u0, sv + v0], axis=1).astype(float)


def distance_to_segments(points: np.ndarray, segments: np.ndarray) -> np.ndarray:
    """Each point's (n, 2) distance [px] to the nearest of the segments (m, 2, 2) (start, end);
    segments with a non-finite end are skipped; all NaN when none is left."""
    p = np.asarray(points, float).reshape(-1, 2)
    seg = np.asarray(segments, float).reshape(-1, 2, 2)
    seg = seg[np.isfinite(seg).all(axis=(1, 2))]
    if not len(seg):
        return np.full(len(p), np.nan)
    a, d = seg[:, 0], seg[:, 1] - seg[:, 0]  # (m, 2)
    length2 = (d ** 2).sum(axis=1)
    rel = p[:, None, :] - a[None]  # (n, m, 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        s = np.where(length2 > 0, (rel * d[None]).sum(axis=2) / length2, 0.0)
    s = np.clip(s, 0.0, 1.0)
    dist = np.linalg.norm(rel - s[..., None] * d[None], axis=2)
    return dist.min(axis=1)


def skeleton_residual(mask: np.ndarray, segments: np.ndarray) -> tuple[float, int]:
    """``(median distance [px], skeleton pixels)``: the median over the mask's skeleton pixels
    (:func:`skeleton_pixels`) of their distance to the nearest segment (m, 2, 2) [px]
    (:func:`distance_to_segments`). NaN for an empty mask or no finite segment.

    The skeleton stops about a body radius short of each end of the body, so the ends need no
    trimming; the short spurs a thinning leaves at the corners of a blunt end, or a stray blob,
    are a minority of the pixels and the median passes over them."""
    pts = skeleton_pixels(mask)
    if not len(pts):
        return float("nan"), 0
    d = distance_to_segments(pts, segments)
    return _median(d), int(len(pts))


class QualityWriter:
    """``quality.csv``: a row (:data:`QUALITY_COLUMNS`) per finished frame, flushed as it goes.

    ``write(result)`` takes a :class:`~snaketrack.tracker.run.pipeline.FrameResult` and measures its
    observed mask's skeleton against the state's link axes projected with ``K`` (3, 3), the tracking
    camera's (:func:`skeleton_residual`)."""

    def __init__(self, path: str | os.PathLike, robot: Any, K: np.ndarray):
        self.robot, self.K = robot, np.asarray(K, float)
        self._csv = CsvAppender(path, QUALITY_COLUMNS)

    def write(self, result: Any) -> float:
        """Write ``result``'s row; returns its skeleton residual [px]."""
        state = result.state
        axes, _ = link_axes_uv(self.robot, state.q, state.base_rotation, state.base_position, self.K)
        residual, n = skeleton_residual(result.mask, axes)
        self._csv.write({"frame": int(result.index), "skeleton_residual_px": residual, "skeleton_pixels": n,
                         "mask_pixels": int(np.count_nonzero(result.mask))})
        return residual

    def close(self) -> None:
        self._csv.close()


# -- joint angles: smoothness and gait ------------------------------------------------------------
def joint_second_differences(q: np.ndarray, frames: Sequence[int], tracked: Sequence[bool]) -> np.ndarray:
    """Second differences ``q[i+1] − 2 q[i] + q[i−1]`` (m, J) [rad] of joint angles ``q`` (n, J) over each
    three consecutive frames (frame numbers ``frames`` (n,) one apart) that are all ``tracked`` (n,)."""
    q = np.asarray(q, float)
    q = q.reshape(len(q), -1)
    f = np.asarray(frames, float).reshape(-1)
    ok = np.asarray(tracked, bool).reshape(-1) & np.isfinite(q).all(axis=1)
    if len(q) < 3:
        return np.zeros((0, q.shape[1]))
    run = ok[:-2] & ok[1:-1] & ok[2:] & (np.diff(f)[:-1] == 1) & (np.diff(f)[1:] == 1)
    d2 = q[2:] - 2 * q[1:-1] + q[:-2]
    return d2[run]


def joint_smoothness(q: np.ndarray, frames: Sequence[int], tracked: Sequence[bool]) -> np.ndarray:
    """Per joint (J,), the median absolute second difference [rad] (:func:`joint_second_differences`);
    NaN where no three consecutive frames were tracked."""
    d2 = joint_second_differences(q, frames, tracked)
    n_joints = np.asarray(q).reshape(len(q), -1).shape[1]
    if not len(d2):
        return np.full(n_joints, np.nan)
    return np.median(np.abs(d2), axis=0)


def dominant_frequency(x: Sequence[float], fps: float, band: float = 0.1, pad: int = 8,
                       min_samples: int = MIN_GAIT_FRAMES) -> tuple[float, float, np.ndarray, np.ndarray]:
    """The dominant frequency of an evenly sampled signal: ``(f0 [Hz], power fraction, freqs (k,) [Hz],
    power (k,))``.

    x: the signal (n,) sampled at ``fps`` [1/s], finite. It is detrended (a least-squares line
    removed), Hann windowed and zero-padded to at least ``pad`` × n samples (a power of two) before
    the real FFT; ``f0`` is the spectrum's peak at or above one cycle per clip (fps / n), refined by
    a parabola through the log power of the peak bin and its neighbours, then by the least-squares
    fit of a sinusoid within one bin (fps / n) of it (a clip of few cycles biases the peak). The
    power fraction is the power within ``band`` × f0 of f0 (±10 % by default, widened to the Hann
    window's main lobe, ±2 fps / n, when the clip is too short to resolve that) over all the power
    but the DC bin's.
    ``f0`` and the fraction are NaN when the signal has fewer than ``min_samples`` samples, a
    non-finite one, or nothing but a line (a constant)."""
    x = np.asarray(x, float).reshape(-1)
    n = len(x)
    nan = (float("nan"), float("nan"), np.zeros(0), np.zeros(0))
    if n < max(min_samples, 4) or not np.isfinite(x).all() or not fps > 0:
        return nan
    t = np.arange(n, dtype=float)
    scale = max(1.0, float(np.abs(x).max()))
    x = x - np.polyval(np.polyfit(t, x, 1), t)
    if np.abs(x).max() <= 1e-9 * scale:  # a line: nothing oscillates
        return nan
    nfft = 1 << int(np.ceil(np.log2(max(pad, 1) * n)))
    power = np.abs(np.fft.rfft(x * np.hanning(n), nfft)) ** 2
    freqs = np.fft.rfftfreq(nfft, 1.0 / fps)
    total = float(power[1:].sum())
    search = np.nonzero(freqs >= fps / n * (1 - 1e-9))[0]
    if total <= 0 or not len(search):
        return nan
    k = int(search[np.argmax(power[search])])
    f0 = float(freqs[k])
    if 0 < k < len(power) - 1 and (power[k - 1:k + 2] > 0).all():
        f0 += _parabola_vertex(np.log(power[k - 1:k + 2])) * (freqs[1] - freqs[0])
    f0 = _least_squares_frequency(x, fps, f0, fps / n)
    half = max(band * f0, 2.0 * fps / n)
    near = (freqs > 0) & (np.abs(freqs - f0) <= half)
    return f0, float(power[near].sum()) / total, freqs, power


def _parabola_vertex(y: np.ndarray) -> float:
    """The vertex's offset [samples, within ±½] of the parabola through three evenly spaced values (3,)
    around an extremum; 0 when they do not bend."""
    a, b, c = (float(v) for v in y)
    den = a - 2 * b + c
    return float(np.clip(0.5 * (a - c) / den, -0.5, 0.5)) if den != 0 else 0.0


def _least_squares_frequency(x: np.ndarray, fps: float, f0: float, width: float, steps: int = 40) -> float:
    """The frequency [Hz] within ``width`` of ``f0`` whose sinusoid (with an offset and a line) fits the
    samples ``x`` (n,) best in least squares. A clip of a few cycles puts the spectral peak off the
    frequency (the window's lobes of the positive and negative frequency overlap); the fit has no
    such bias."""
    n = len(x)
    t = np.arange(n) / fps
    grid = np.linspace(max(f0 - width, 0.25 * width), f0 + width, 2 * steps + 1)
    residual = np.empty(len(grid))
    for i, f in enumerate(grid):
        A = np.stack([np.cos(2 * np.pi * f * t), np.sin(2 * np.pi * f * t), np.ones(n), t], axis=1)
        coef = np.linalg.lstsq(A, x, rcond=None)[0]
        residual[i] = float(((A @ coef - x) ** 2).sum())
    i = int(np.argmin(residual))
    if 0 < i < len(grid) - 1:
        return float(grid[i] + _parabola_vertex(residual[i - 1:i + 2]) * (grid[1] - grid[0]))
    return float(grid[i])


def regular_joint_signals(q: np.ndarray, frames: Sequence[int], tracked: Sequence[bool]) -> np.ndarray:
    """Joint angles ``q`` (n, J) [rad] on every frame from the first to the last of ``frames`` (n,),
    (F, J): the tracked frames' angles, linearly interpolated over the others (lost, coasting or
    missing frames) and held at the ends. All NaN when no frame was tracked."""
    q = np.asarray(q, float)
    q = q.reshape(len(q), -1)
    f = np.asarray(frames, float).reshape(-1)
    ok = np.asarray(tracked, bool).reshape(-1) & np.isfinite(q).all(axis=1)
    if not len(f):
        return np.zeros((0, q.shape[1]))
    grid = np.arange(f.min(), f.max() + 1)
    if not ok.any():
        return np.full((len(grid), q.shape[1]), np.nan)
    return np.stack([np.interp(grid, f[ok], q[ok, j]) for j in range(q.shape[1])], axis=1)


def gait_spectra(q: np.ndarray, frames: Sequence[int], tracked: Sequence[bool], fps: float,
                 band: float = 0.1, min_frames: int = MIN_GAIT_FRAMES) -> dict[str, Any]:
    """Per joint, :func:`dominant_frequency` of the angle over the clip (:func:`regular_joint_signals`).

    Returns ``f0`` (J,) [Hz], ``fraction`` (J,), and ``freqs`` / ``power`` (lists of (k,) arrays, for the
    plot). NaN for every joint when fewer than ``min_frames`` frames were tracked."""
    q = np.asarray(q, float)
    q = q.reshape(len(q), -1)
    n_joints = q.shape[1]
    out: dict[str, Any] = {"f0": np.full(n_joints, np.nan), "fraction": np.full(n_joints, np.nan),
                           "freqs": [np.zeros(0)] * n_joints, "power": [np.zeros(0)] * n_joints}
    if int(np.count_nonzero(np.asarray(tracked, bool))) < min_frames:
        return out
    sig = regular_joint_signals(q, frames, tracked)
    for j in range(n_joints):
        f0, frac, freqs, power = dominant_frequency(sig[:, j], fps, band, min_samples=min_frames)
        out["f0"][j], out["fraction"][j], out["freqs"][j], out["power"][j] = f0, frac, freqs, power
    return out


def frequency_agreement(f0: Sequence[float]) -> tuple[float, float]:
    """``(median [Hz], spread)`` of per-joint dominant frequencies: the spread is the largest relative
    deviation from the median, max |f − median| / median (0: every joint at one frequency). NaN
    when no joint has a frequency."""
    f = np.asarray(f0, float)
    f = f[np.isfinite(f)]
    if not f.size:
        return float("nan"), float("nan")
    med = float(np.median(f))
    return med, float(np.abs(f - med).max() / med) if med > 0 else float("nan")


# -- the figures of a run -----------------------------------------------------------------------
def track_arrays(track: dict, n_joints: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``track.csv``'s frames (N,), joint angles (N, J) [rad] and statuses (N,); a missing column is a
    :class:`~snaketrack.errors.FileFormatError`."""
    for key in ["frame", "status"] + [f"q_{i + 1}" for i in range(n_joints)]:
        if key not in track:
            raise FileFormatError(f"track: no {key!r} column; expected the track.csv columns (docs/conventions.md)")
    q = np.stack([np.asarray(track[f"q_{i + 1}"], float) for i in range(n_joints)], axis=1).reshape(-1, n_joints)
    return np.asarray(track["frame"], float), q, np.asarray(track["status"]).astype(str)


def quality_metrics(track: dict, n_joints: int, fps: float, quality: Optional[dict] = None) -> dict[str, Any]:
    """The truth-free ``metrics.json`` figures of a track (module doc; docs/tracking.md, "Outputs").

    track: ``track.csv``'s columns (:func:`snaketrack.io.read_csv_columns`); ``iou_no_offset`` is the
    silhouette's IoU, ``iou`` the tracker's fit with its edge offset. n_joints: J. fps: the source's
    frame rate [1/s]. quality: ``quality.csv``'s columns (the skeleton residuals); None: NaN figures.
    """
    frames, q, status = track_arrays(track, n_joints)
    out = status_counts(status)
    nan_col = np.full(len(frames), np.nan)
    for key, column in (("silhouette_iou", "iou_no_offset"), ("fit_iou", "iou")):
        mean, p5, n_nan = iou_figures(track.get(column, nan_col))
        out.update({f"{key}_mean": mean, f"{key}_p5": p5, f"{key}_nan_frames": n_nan})
    res = np.asarray(quality["skeleton_residual_px"], float) if quality is not None else np.zeros(0)
    res = res[np.isfinite(res)]
    out.update(skeleton_residual_px=float(np.median(res)) if res.size else float("nan"),
               skeleton_residual_p95_px=float(np.percentile(res, 95)) if res.size else float("nan"),
               skeleton_residual_frames=int(res.size))
    tracked = status == "tracked"
    smooth = joint_smoothness(q, frames, tracked)
    out.update(joint_second_difference_rad=_median(smooth),
               joint_second_difference_per_joint_rad=[float(v) for v in smooth])
    gait = gait_spectra(q, frames, tracked, fps)
    f_med, spread = frequency_agreement(gait["f0"])
    out.update(gait_frequency_hz=f_med, gait_frequency_spread=spread,
               gait_power_fraction=_median(gait["fraction"]),
               gait_frequency_per_joint_hz=[float(v) for v in gait["f0"]],
               gait_power_fraction_per_joint=[float(v) for v in gait["fraction"]])
    return out


def plot_quality(track: dict, n_joints: int, out_dir: str | os.PathLike, fps: float,
                 quality: Optional[dict] = None, joint_names: Optional[Sequence[str]] = None) -> Path:
    """Write ``quality.png`` into ``out_dir`` and return its path: over time, the silhouette's IoU (with and
    without the edge offset), the skeleton residual, the status, the joint angles; and each joint's
    spectrum with its dominant frequency marked."""
    import matplotlib  # deferred: the module imports without matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # deferred: the module imports without matplotlib

    frames, q, status = track_arrays(track, n_joints)
    t = frames / float(fps)
    names = list(joint_names) if joint_names else [f"q_{i + 1}" for i in range(n_joints)]
    colours = plt.get_cmap("viridis")(np.linspace(0, 0.9, max(n_joints, 1)))
    fig, axes = plt.subplots(5, 1, figsize=(8, 11), gridspec_kw={"height_ratios": [2, 2, 0.5, 2.5, 2.5]})
    ax = axes[0]
    if "iou_no_offset" in track:
        ax.plot(t, np.asarray(track["iou_no_offset"], float), color="tab:purple", lw=1.2, label="silhouette")
    if "iou" in track:
        ax.plot(t, np.asarray(track["iou"], float), color="tab:gray", lw=0.9, label="with edge offset")
    ax.set_ylabel("IoU vs mask")
    ax.set_ylim(0, 1.02)
    ax.legend(fontsize=7, loc="lower right")
    ax = axes[1]
    if quality is not None and len(quality.get("frame", [])):
        ax.plot(np.asarray(quality["frame"], float) / float(fps), np.asarray(quality["skeleton_residual_px"], float),
                color="tab:blue", lw=1.2)
    ax.set_ylabel("skeleton\nresidual [px]")
    ax = axes[2]
    edges = np.nonzero(np.concatenate([[True], status[1:] != status[:-1]]))[0]  # runs of one status
    for a, b in zip(edges, np.append(edges[1:], len(status))):
        name = str(status[a])
        ax.broken_barh([(t[a] - 0.5 / fps, (b - a) / fps)], (0, 1), color=np.asarray(STATUS_COLOURS[name]) / 255.0,
                       label=name if name not in ax.get_legend_handles_labels()[1] else None)
    ax.set_yticks([])
    ax.set_ylabel("status")
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)
    for ax in axes[:3]:
        ax.sharex(axes[3])
        ax.tick_params(labelbottom=False, labelsize=7)
    ax = axes[3]
    for j in range(n_joints):
        ax.plot(t, np.degrees(q[:, j]), color=colours[j], lw=1.0, label=names[j])
    ax.set_ylabel("joint angle [deg]")
    ax.set_xlabel("time [s]")
    if n_joints <= 12:
        ax.legend(fontsize=6, ncol=2, loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)
    ax = axes[4]
    gait = gait_spectra(q, frames, status == "tracked", fps)
    for j in range(n_joints):
        freqs, power = gait["freqs"][j], gait["power"][j]
        if len(freqs) and power.max() > 0:
            ax.plot(freqs, power / power.max(), color=colours[j], lw=0.9)
            if np.isfinite(gait["f0"][j]):
                ax.axvline(gait["f0"][j], color=colours[j], lw=0.6, ls=":")
    f_med, spread = frequency_agreement(gait["f0"])
    if np.isfinite(f_med):
        ax.axvline(f_med, color="k", lw=1.2, ls="--", label=f"gait {f_med:.2f} Hz (spread {spread:.0%})")
        ax.set_xlim(0, min(fps / 2, 4 * f_med))
        ax.legend(fontsize=7, loc="upper right")
    else:
        ax.text(0.5, 0.5, f"too few tracked frames for a spectrum (< {MIN_GAIT_FRAMES})", ha="center",
                va="center", transform=ax.transAxes, fontsize=8)
    ax.set_xlabel("frequency [Hz]")
    ax.set_ylabel("power / peak")
    fig.suptitle("track quality without truth")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    path = Path(out_dir) / "quality.png"
    atomic_write_bytes(path, buf.getvalue())
    return path
