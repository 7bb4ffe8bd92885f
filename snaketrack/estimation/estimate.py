"""Estimate the head Jacobian along a recorded states file and write the result to an output folder."""
from __future__ import annotations

import io
from pathlib import Path

import numpy as np

from snaketrack.errors import InputError
from snaketrack.estimation.metrics import mse, run_estimator
from snaketrack.estimation.registry import make_estimator
from snaketrack.estimation.states import SmoothingConfig, read_states
from snaketrack.io import atomic_write_bytes, atomic_write_text, write_json


def run_estimate(path, estimator: str = "ukf", out=None, plane: str = "xy", smoothing=None, kf=None, co=None,
                 sigma=None, figures: bool = True) -> dict:
    """Run one estimator over a states.csv / track.csv; write estimate.csv and summary.json under ``out``.

    path: the table, CSV or JSON lines (:func:`~snaketrack.estimation.states.read_states`).
    estimator: a name of :data:`~snaketrack.estimation.registry.ESTIMATORS`.
    out: output folder (None: write nothing, only return the summary).
    plane: for a track.csv, the camera-frame plane of the head position used for ṙ ("xy", "xz" or "yz").
    smoothing: :class:`~snaketrack.estimation.states.SmoothingConfig` (None: the default).
    kf, co, sigma: settings records (None: the defaults); each estimator takes those it uses.
    figures: also draw estimate.png (measured against predicted ṙ).

    estimate.csv, one row a sample: ``t`` [s], measured ``rdot_x, rdot_y`` [m/s],
    predicted ``rdot_hat_x, rdot_hat_y`` = Ĵ_{n−1} φ̇_n [m/s] (empty in row 0), and
    Ĵ_n after the update, ``J_r_c`` (r = 1, 2 for the two velocity
    components, c = joint) [m/rad]. summary.json (also returned): ``mse_x``,
    ``mse_y`` [(m/s)^2] of the prediction against the measured ṙ, the mean
    ``step_time_ms`` of one estimator step, and what was read and how. A folder ``out`` holding another
    command's summary.json (one without estimate.csv beside it) is refused before anything runs.
    """
    if out is not None and (Path(out) / "summary.json").is_file() and not (Path(out) / "estimate.csv").is_file():
        raise InputError(f"--out {out}: holds another command's summary.json; give a folder of its own")
    smoothing = smoothing or SmoothingConfig()
    data = read_states(path, plane=plane, smoothing=smoothing)
    J = data.phi.shape[1]
    est = make_estimator(estimator, J, kf=kf, co=co, sigma=sigma)
    run = run_estimator(est, data.phidot, data.rdot)
    m = mse(run.prediction, data.rdot)
    summary = {"estimator": estimator, **m, "steps": int(data.t.size), "joints": J, "source": data.source,
               "frame": data.frame, "differentiated": list(data.differentiated), "filled_values": data.filled,
               "resampled": data.resampled, "step_time_ms": float(run.step_s.mean() * 1e3),
               "smoothing": {"filter": "savitzky-golay", "window": smoothing.window, "polyorder": smoothing.polyorder},
               "metric": "MSE of rdot_hat_n = J_{n-1} phidot_n against the measured rdot_n"}
    if out is not None:
        out = Path(out)
        cols = (["t", "rdot_x", "rdot_y", "rdot_hat_x", "rdot_hat_y"]
                + [f"J_{r}_{c}" for r in (1, 2) for c in range(1, J + 1)])
        table = np.column_stack([data.t, data.rdot, run.prediction, run.jacobian.reshape(-1, 2 * J)])
        lines = [",".join(cols)] + [",".join("" if not np.isfinite(v) else repr(float(v)) for v in row)
                                    for row in table]
        atomic_write_text(out / "estimate.csv", "\n".join(lines) + "\n")
        write_json(out / "summary.json", summary)
        if figures:
            plot_estimate(data, run, out / "estimate.png", estimator)
    return summary


def plot_estimate(data, run, path: Path, estimator: str) -> None:
    """PNG of the measured and the predicted head velocity ṙ [m/s], x above y, against t [s].

    data: the states read (``t``, ``rdot`` of shape (T, 2), ``source``, ``frame``);
    run: the estimator run (``prediction`` of shape (T, 2)).
    """
    import matplotlib  # deferred: the module imports without matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # deferred: the module imports without matplotlib

    fig, ax = plt.subplots(2, 1, figsize=(10, 6), sharex=True)
    for j, comp in enumerate("xy"):
        ax[j].plot(data.t, data.rdot[:, j], color="tab:blue", lw=1, label="measured")
        ax[j].plot(data.t, run.prediction[:, j], color="tab:orange", lw=0.8, label=f"{estimator} predicted")
        ax[j].set_ylabel(f"ṙ{comp} [m/s]")
        ax[j].legend(fontsize=8)
    ax[1].set_xlabel("t [s]")
    fig.suptitle(f"Head velocity, {data.source} ({data.frame})")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    atomic_write_bytes(path, buf.getvalue())
