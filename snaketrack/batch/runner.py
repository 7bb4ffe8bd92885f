"""A campaign on Ray: each video's stages chained as tasks, the videos in parallel.

Stages and their folders (``OUT/VIDEO/…``, the single-video commands' own layouts):

=============  ==========================================  ==========================
stage          command                                      output
=============  ==========================================  ==========================
label          ``snaketrack label VIDEO --box …``           ``VIDEO/labels/``
fit_labels     ``snaketrack fit-labels``                    ``VIDEO/fitted/``
train          ``snaketrack train`` on every fitted set     ``segmenter/model.pt``
track          ``snaketrack track VIDEO --masks …``         ``VIDEO/track/``
estimate       ``snaketrack estimate track.csv``            ``VIDEO/estimate/``
=============  ==========================================  ==========================

The first three run only when the campaign's masks are ``label``. Every stage
is a Ray task with declared resources (:class:`Resources`); a task whose
worker dies is retried (``max_retries``), a stage that fails on its input is
not: it blocks the rest of its own video's chain only, and the summary lists
it with its one-line error. Finished stages are recorded
(:mod:`snaketrack.batch.stages`) and skipped on a re-run.
"""
from __future__ import annotations

import csv
import io
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from tqdm import tqdm

from snaketrack.batch.campaign import Campaign, Video, flags
from snaketrack.batch.stages import ParserOf, StageResult, run_stage
from snaketrack.errors import InputError
from snaketrack.io import atomic_write_text, write_json

STAGES = ("label", "fit_labels", "train", "track", "estimate")
SEGMENTER = "segmenter"  # the campaign-wide folder of the trained model


@dataclass(frozen=True)
class Resources:
    """Ray resources per task: CPUs per stage (``train_cpus`` None: every worker's), GPUs for training,
    and the retries after a lost worker."""

    cpus: float = 1.0
    train_cpus: Optional[float] = None
    train_gpus: float = 0.0
    max_retries: int = 2

    def __post_init__(self) -> None:
        if not 0 <= self.train_gpus < float("inf"):
            raise InputError(f"--train-gpus {self.train_gpus:g}: expected a number of GPUs >= 0")


def connect(address: Optional[str] = None, workers: Optional[int] = None) -> int:
    """Start (or join) Ray: a local instance with ``workers`` CPUs when ``address`` is None, else the cluster
    at ``address`` (``auto``, ``ray://HOST:PORT``). Returns the CPUs Ray offers."""
    import ray  # deferred: optional, the batch extra

    if not ray.is_initialized():
        kw = dict(include_dashboard=False, log_to_driver=False, configure_logging=False)
        if address:
            try:
                ray.init(address=address, **kw)
            except (ValueError, ConnectionError) as e:
                raise InputError(f"--address {address}: {str(e).splitlines()[0] if str(e) else type(e).__name__}"
                                 ) from None
        else:
            ray.init(num_cpus=workers or os.cpu_count() or 1, **kw)
    return int(ray.cluster_resources().get("CPU", 1))


def stage_argv(campaign: Campaign, video: Video, stage: str, out: Path, fitted: tuple[Path, ...] = ()) -> list[str]:
    """The command line of ``stage`` for ``video`` (module doc)."""
    d = out / video.name
    cam = ["--intrinsics", str(campaign.intrinsics)] if campaign.intrinsics else \
        ["--fov-deg", str(campaign.fov_deg)] if campaign.fov_deg is not None else []
    own = flags(video.sections.get(stage, {}))
    if stage == "label":
        # the campaign fits the labels in its own stage, with the campaign's robot and camera
        return ["label", str(video.path), "--box", str(video.box), "--no-fit", "--out", str(d / "labels"), *own]
    if stage == "fit_labels":
        return ["fit-labels", str(d / "labels"), "--robot", campaign.robot, *cam, "--out", str(d / "fitted"), *own]
    if stage == "train":
        return ["train", *map(str, fitted), "--out", str(out / SEGMENTER / "model.pt"), *flags(campaign.train)]
    if stage == "track":
        if campaign.labels:
            masks = ["--masks", f"segmenter:{out / SEGMENTER / 'model.pt'}"]
        elif campaign.masks == "truth":
            masks = []
        elif campaign.masks.startswith("segmenter:"):
            masks = ["--masks", campaign.masks]
        else:
            masks = ["--masks", str(Path(campaign.masks) / video.name)]
        return ["track", str(video.path), "--robot", campaign.robot, *cam, *masks, "--out", str(d / "track"), *own]
    if stage == "estimate":
        return ["estimate", str(d / "track" / "track.csv"), "--out", str(d / "estimate"), *own]
    raise KeyError(stage)


def run_campaign(campaign: Campaign, out: str | os.PathLike, parser_of: ParserOf, address: Optional[str] = None,
                 workers: Optional[int] = None, resources: Resources = Resources(),
                 progress: bool = True) -> dict:
    """Run every video's stages on Ray (module doc), each command's parser from ``parser_of`` (a module-level
    function: Ray hands it to its workers by name); writes ``summary.json`` and ``summary.csv`` in ``out``
    and returns the summary."""
    import ray  # deferred: optional, the batch extra

    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    cpus = connect(address, workers)
    task = ray.remote(_task)

    def submit(video: str, stage: str, argv: list[str], upstream=()):
        opts = dict(num_cpus=resources.cpus, max_retries=resources.max_retries)
        return task.options(**opts).remote(str(out), video, stage, argv, parser_of, max(1, int(resources.cpus)),
                                           *upstream)

    refs: dict[tuple[str, str], object] = {}
    if campaign.labels:
        for v in campaign.videos:
            refs[v.name, "label"] = submit(v.name, "label", stage_argv(campaign, v, "label", out))
            refs[v.name, "fit_labels"] = submit(v.name, "fit_labels", stage_argv(campaign, v, "fit_labels", out),
                                                [refs[v.name, "label"]])
        # the segmenter learns from the videos whose labels came through, known once their tasks end
        n_cpus = resources.train_cpus or cpus
        opts = dict(num_cpus=n_cpus, max_retries=resources.max_retries)
        if resources.train_gpus:
            opts["num_gpus"] = resources.train_gpus
        candidates = [str(out / v.name / "fitted") for v in campaign.videos]
        train_argv = stage_argv(campaign, campaign.videos[0], "train", out)
        refs[SEGMENTER, "train"] = ray.remote(_train_task).options(**opts).remote(
            str(out), train_argv, candidates, parser_of, max(1, int(n_cpus)), *[refs[v.name, "fit_labels"]
                                                                     for v in campaign.videos])
    for v in campaign.videos:
        up = [refs[SEGMENTER, "train"], refs[v.name, "fit_labels"]] if campaign.labels else []
        refs[v.name, "track"] = submit(v.name, "track", stage_argv(campaign, v, "track", out), up)
        if campaign.estimate:
            refs[v.name, "estimate"] = submit(v.name, "estimate", stage_argv(campaign, v, "estimate", out),
                                              [refs[v.name, "track"]])
    bars = {s: tqdm(total=sum(1 for (_, st) in refs if st == s), desc=f"{s:<10}", unit="task", position=k,
                    disable=not progress, leave=True)
            for k, s in enumerate(st for st in STAGES if any(key[1] == st for key in refs))}
    pending = list(refs.values())
    done: dict[object, StageResult] = {}
    while pending:
        ready, pending = ray.wait(pending, num_returns=1, timeout=1.0)
        for r in ready:
            res = ray.get(r)
            done[r] = res
            bars[res.stage].update(1)
            if res.status == "failed":
                bars[res.stage].write(f"{res.video}: {res.stage} failed: {res.error}")
    for bar in bars.values():
        bar.close()
    results = {key: done[ref] for key, ref in refs.items()}
    return write_summary(campaign, out, results)


def _task(out: str, video: str, stage: str, argv: list[str], parser_of: ParserOf, threads: int,
          *upstream: StageResult) -> StageResult:
    return run_stage(out, video, stage, argv, parser_of, threads, tuple(upstream))


def _train_task(out: str, argv: list[str], candidates: list[str], parser_of: ParserOf, threads: int,
                *fits: StageResult) -> StageResult:
    """Train on the fitted datasets whose chain succeeded (blocked when none did)."""
    ok = [c for c, r in zip(candidates, fits) if r.ok]
    if not ok:
        return StageResult(SEGMENTER, "train", "blocked", "no video's labels came through")
    return run_stage(out, SEGMENTER, "train", [argv[0], *ok, *argv[1:]], parser_of, threads)


def _video_figures(out: Path, video: str) -> dict:
    figures = {}
    summary = out / video / "track" / "summary.json"
    if summary.is_file():
        data = json.loads(summary.read_text())
        for key in ("frames", "fps", "iou", "iou_truth", "frames_lost", "joint_error_rad",
                    "base_position_error_m", "flips"):
            if key in data:
                figures[key] = data[key]
    return figures


def write_summary(campaign: Campaign, out: Path, results: dict[tuple[str, str], StageResult]) -> dict:
    """``summary.json`` (per video: status, the failed stage and its error, the track's figures; every
    stage's result) and ``summary.csv`` (a row per video)."""
    rows = []
    for v in campaign.videos:
        own = [results[key] for key in results if key[0] == v.name]
        if campaign.labels:
            own.append(results[SEGMENTER, "train"])
        failed = next((r for r in own if r.status == "failed"), None)
        blocked = next((r for r in own if r.status == "blocked"), None)
        status = "ok" if failed is None and blocked is None else "failed"
        why = failed or blocked
        rows.append({"video": v.name, "path": str(v.path), "status": status,
                     "failed_stage": why.stage if why else "", "error": why.error if why else "",
                     **(_video_figures(out, v.name) if status == "ok" else {})})  # not an earlier run's
    summary = {"campaign": str(campaign.path), "videos": len(rows), "ok": sum(r["status"] == "ok" for r in rows),
               "failed": sum(r["status"] != "ok" for r in rows), "per_video": rows,
               "stages": [r.as_dict() for r in results.values()]}
    write_json(out / "summary.json", summary)
    first = ["video", "path", "status", "failed_stage", "error"]
    columns = first + sorted({k for r in rows for k in r} - set(first))
    text = io.StringIO()
    w = csv.DictWriter(text, fieldnames=columns, lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    atomic_write_text(out / "summary.csv", text.getvalue())
    return summary
