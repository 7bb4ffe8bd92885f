"""What ``snaketrack sim experiments`` writes: the summary, the predictions and the figures.

Of the :class:`~snaketrack.experiments.jacobian.ExperimentResult` of each experiment:

- :func:`summarise`: ``summary.json``, the MSE of each estimator per
  experiment, experiment 2's recovery times and per-phase errors, the mean
  update time per step [ms] and the settings used.
- :func:`write_predictions_csv`: ``predictions_k.csv``, true, measured and
  predicted ṙ [m/s] one row a step.
- :func:`plot_experiment` / :func:`plot_step_times`: figures like the paper's.
- :func:`write_outputs`: all of them (and the world's ``states_k.csv``) in one folder.
"""
from __future__ import annotations

import dataclasses
import io
import os
from pathlib import Path
from typing import Optional

import numpy as np

from snaketrack.estimation.metrics import moving_average
from snaketrack.experiments.jacobian import ExperimentResult, ExperimentsConfig
from snaketrack.io import atomic_write_bytes, atomic_write_text, write_json


def summarise(results: dict, config: Optional[ExperimentsConfig] = None) -> dict:
    """summary.json's content: ``experiment_k`` → estimator → {"mse_x", "mse_y"}, plus
    experiment 2's ``recovery_s`` and ``phases``, per-step times and the settings used."""
    out: dict = {}
    times: dict = {}
    for k, r in sorted(results.items()):
        entry = {name: dict(m) for name, m in r.metrics.items()}
        entry["noise_var"] = r.noise_var
        if r.after_1s is not None:
            entry["after_1s"] = r.after_1s
        if r.recovery_s is not None:
            entry["recovery_s"] = dict(r.recovery_s)
            entry["phases"] = r.phases
            entry["halt_s"] = list(r.halt)
        out[f"experiment_{k}"] = entry
        for name, run in r.runs.items():
            times.setdefault(name, []).append(run.step_s)
    out["step_time_ms"] = {name: float(np.mean(np.concatenate(v)) * 1e3) for name, v in times.items()}
    if config is not None:
        c = config
        out["settings"] = {
            "duration_s": c.duration, "dt_s": c.dt, "halt_s": list(c.halt), "resume": c.resume,
            "noise_std_m_s": c.noise_std, "exp3_noise_var": c.exp3_noise_var, "seed": c.seed,
            "robot": c.robot, "obstacles": c.obstacles,
            "kf": {"q": np.asarray(c.kf.q).tolist(), "r": np.asarray(c.kf.r).tolist(),
                   "p0": np.asarray(c.kf.p0).tolist()},
            "sigma": dataclasses.asdict(c.sigma),
            "co": {k: v for k, v in dataclasses.asdict(c.co).items() if k != "j0"},
            "recovery": {"window_s": c.recovery_window_s, "factor": c.recovery_factor, "hold_s": c.recovery_hold_s},
            "metric": "MSE of r_hat_{n+1} = J_n phidot_{n+1} against the true (noise-free) rdot_{n+1}",
        }
    return out


def write_predictions_csv(result: ExperimentResult, path: str | os.PathLike) -> None:
    """t, true and measured ṙ, and each estimator's prediction ṙ̂ (m/s), one row a step, atomically."""
    names = list(result.runs)
    cols = ["t", "rdot_x", "rdot_y", "rdot_meas_x", "rdot_meas_y"]
    cols += [f"{n}_pred_{a}" for n in names for a in "xy"]
    data = np.column_stack([result.t, result.rdot_true, result.rdot_measured]
                           + [result.runs[n].prediction for n in names])
    lines = [",".join(cols)] + [",".join(repr(float(v)) for v in row) for row in data]
    atomic_write_text(path, "\n".join(lines) + "\n")


_COLORS = {"ukf": "tab:orange", "co": "tab:green", "kf": "tab:red", "co_reset": "tab:purple",
           "kf_matched_r": "tab:brown"}


def plot_experiment(result: ExperimentResult, out_dir: str | os.PathLike) -> list[Path]:
    """Figures like the paper's: true vs predicted ṙ and errors (Figs. 6, 8, 9), MSE bars
    (Figs. 7, 11), the noise realisation (Fig. 10, experiment 3), the moving error around
    the halt (experiment 2). Returns the PNG paths."""
    import matplotlib  # deferred: the module imports without matplotlib

    matplotlib.use("Agg")

    import matplotlib.pyplot as plt  # deferred: the module imports without matplotlib

    out_dir = Path(out_dir)
    k, t = result.number, result.t
    paths = []

    def save(fig, name):
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=110)
        plt.close(fig)
        p = out_dir / name
        atomic_write_bytes(p, buf.getvalue())
        paths.append(p)

    shown = ["ukf", "co"]
    fig, ax = plt.subplots(3, 2, figsize=(13, 9), sharex=True)
    for j, comp in enumerate("xy"):
        ax[0, j].plot(t, result.rdot_true[:, j], color="tab:blue", lw=1.2, label="true")
        for i, name in enumerate(shown):
            r = result.runs[name]
            ax[0, j].plot(t, r.prediction[:, j], color=_COLORS[name], lw=0.8, alpha=0.8, label=f"{name} predicted")
            ax[1 + i, j].plot(t, r.prediction[:, j] - result.rdot_true[:, j], color=_COLORS[name], lw=0.8)
            ax[1 + i, j].set_ylabel(f"{name} error ṙ{comp} [m/s]")
        ax[0, j].set_ylabel(f"ṙ{comp} [m/s]")
        ax[0, j].legend(loc="upper right", fontsize=8)
        ax[2, j].set_xlabel("t [s]")
        lim = np.nanpercentile(np.abs(result.rdot_true[:, j]), 99.5) * 3 + 1e-3
        ax[0, j].set_ylim(-lim, lim)
        if result.halt is not None:
            for a in ax[:, j]:
                a.axvspan(*result.halt, color="0.9", zorder=0)
    fig.suptitle(f"Experiment {k}: true vs predicted head velocity ṙ̂ₙ₊₁ = Ĵₙ φ̇ₙ₊₁")
    fig.tight_layout()
    save(fig, f"exp{k}_prediction.png")

    fig, ax = plt.subplots(figsize=(7, 4))
    names = list(result.metrics)
    x = np.arange(len(names))
    ax.bar(x - 0.2, [result.metrics[n]["mse_x"] for n in names], 0.4, label="MSE ṙx")
    ax.bar(x + 0.2, [result.metrics[n]["mse_y"] for n in names], 0.4, label="MSE ṙy")
    ax.set_xticks(x, names)
    ax.set_yscale("log")
    ax.set_ylabel("MSE [(m/s)²]")
    ax.set_title(f"Experiment {k}: mean squared prediction error")
    ax.legend()
    fig.tight_layout()
    save(fig, f"exp{k}_mse.png")

    if k == 3:
        fig, ax = plt.subplots(figsize=(10, 3.5))
        ax.plot(t, result.rdot_measured[:, 0], color="0.6", lw=0.5, label="measured ṙx (noisy)")
        ax.plot(t, result.rdot_true[:, 0], color="tab:blue", lw=1.2, label="true ṙx")
        ax.set_xlabel("t [s]")
        ax.set_ylabel("ṙx [m/s]")
        ax.legend(fontsize=8)
        fig.tight_layout()
        save(fig, "exp3_noise.png")

    if result.halt is not None:
        dt = float(np.median(np.diff(t)))
        fig, axs = plt.subplots(2, 1, figsize=(10, 7), sharex=True)
        order = sorted(result.runs, key=lambda n: {"kf": 0, "co_reset": 1, "co": 2, "ukf": 3}.get(n, 1))
        for name in order:  # drawn so that no curve hides another that equals it
            r = result.runs[name]
            sq = np.nan_to_num(np.sum((r.prediction - result.rdot_true) ** 2, axis=1))
            ls = "--" if name == "ukf" else "-"
            axs[0].semilogy(t, moving_average(sq, int(round(0.1 / dt))) + 1e-12, ls,
                            color=_COLORS.get(name), lw=1, label=name)
            axs[1].semilogy(t, np.linalg.norm(r.jacobian, axis=(1, 2)) + 1e-12, ls,
                            color=_COLORS.get(name), lw=1, label=name)
        for a in axs:
            a.axvspan(*result.halt, color="0.9", zorder=0)
            a.legend(fontsize=8)
        top = max(float(np.linalg.norm(r.jacobian, axis=(1, 2)).max()) for r in result.runs.values())
        axs[1].set_ylim(1e-2, 2 * top + 1e-2)
        axs[0].set_ylim(bottom=1e-9)
        axs[1].set_xlabel("t [s]")
        axs[0].set_ylabel("0.1 s mean ‖ṙ̂ − ṙ‖² [(m/s)²]")
        axs[1].set_ylabel("‖Ĵ‖_F [m/rad]")
        axs[0].set_title(f"Experiment {k}: error and Jacobian norm around the halt (ukf dashed, equals kf)")
        fig.tight_layout()
        save(fig, f"exp{k}_error_halt.png")
    return paths


def plot_step_times(results: dict, out_dir: str | os.PathLike) -> Path:
    """Per-step update time of each estimator, all experiments (the paper's Fig. 12)."""
    import matplotlib  # deferred: the module imports without matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # deferred: the module imports without matplotlib

    fig, ax = plt.subplots(figsize=(10, 4))
    first = results[min(results)]
    for name, r in first.runs.items():
        ax.semilogy(first.t, r.step_s * 1e3, lw=0.6, color=_COLORS.get(name),
                    label=f"{name} (mean {r.step_s.mean() * 1e3:.3f} ms)")
    ax.set_xlabel("t [s]")
    ax.set_ylabel("update time [ms]")
    ax.set_title(f"Computation time per step (experiment {first.number})")
    ax.legend(fontsize=8)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    p = Path(out_dir) / "step_time.png"
    atomic_write_bytes(p, buf.getvalue())
    return p


def write_outputs(results: dict, worlds: dict, out_dir: str | os.PathLike, config: Optional[ExperimentsConfig] = None,
                  figures: bool = True) -> dict:
    """Write summary.json, predictions_k.csv, states_k.csv (when the world can) and figures; returns the summary."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for k, r in results.items():
        write_predictions_csv(r, out_dir / f"predictions_{k}.csv")
        w = worlds.get(k)
        if hasattr(w, "write_states_csv"):
            w.write_states_csv(out_dir / f"states_{k}.csv")
        if figures:
            plot_experiment(r, out_dir)
    if figures and results:
        plot_step_times(results, out_dir)
    summary = summarise(results, config)
    write_json(out_dir / "summary.json", summary)
    return summary
