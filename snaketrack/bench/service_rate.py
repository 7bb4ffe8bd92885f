"""The service under load: latency, frame rate, drops, a slow client, and memory over a soak.

:func:`run_service_benchmark` plays a clip forward and back (a loop with no jump) at its own frame rate
(as a camera would deliver it) into a :class:`~snaketrack.service.TrackingService`
on the loopback, with two real clients: a fast one that takes every state
and measures capture-to-receipt latency, and a slow one that spends ten
times the tracker's time per frame on each message. Beside it, in the same
process and before it, the same clip is tracked without the service (the
batch :class:`~snaketrack.tracker.run.pipeline.TrackingSession`): the reference
frame rate. ``snaketrack bench service`` prints the figures as JSON.
"""
from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np


@dataclass(frozen=True)
class ServiceBenchConfig:
    """seconds: the soak's length [s] (wall clock). reference_frames: frames tracked without the service.
    slow_factor: the slow client's time per message, in tracker frame times. track_size: (w, h) [px] or None.
    corrupt_masks: corrupt the clip's truth masks like a segmenter's. sample_s: memory sampling period [s].
    catch_up_gap, catch_up_s: the service's ``ServiceConfig.catch_up_gap`` [frames] and ``catch_up_s`` [s].
    masks: ``segmenter:MODEL.pt`` to segment each frame with the model's live setting (the service's and the
    reference's own segmenter) instead of the source's masks, with ``segmenter_flips`` and ``segmenter_scale``
    (None: the live setting's); robot: the robot's name or file, for a source
    whose meta.json names none (a video)."""

    seconds: float = 60.0
    reference_frames: int = 60
    slow_factor: float = 10.0
    track_size: Optional[tuple[int, int]] = None
    corrupt_masks: bool = True
    sample_s: float = 1.0
    catch_up_gap: Optional[int] = None
    catch_up_s: float = 1.0
    masks: Optional[str] = None
    segmenter_flips: Optional[int] = None
    segmenter_scale: Optional[float] = None
    robot: Optional[str] = None


def rss_mb() -> float:
    """This process's resident memory [MiB] (Linux ``/proc``)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def thread_cpu_s() -> dict[str, float]:
    """CPU time [s] (user + system) each thread of this process has used (Linux ``/proc``), by name: a Python
    thread's own name, any other thread's (the Foxglove SDK's, torch's, OpenCV's workers) its system name,
    threads of one name summed."""
    names = {t.native_id: t.name for t in threading.enumerate()}
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                stat = f.read()
        except OSError:  # the thread ended meanwhile
            continue
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        name = names.get(int(tid), comm)
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return out


def _client(url: str, delay_s: float, name: str, results, stop) -> None:
    """A client process: every state's (receipt time, frame, latency [ms]), spending ``delay_s`` [s] on each,
    until the service closes; a client with a delay also stops once ``stop`` is set. The fast client reads
    to the close, so that it can be checked to get every state the service tracked. Puts ``(name, states,
    CPU time [s] the process used)``."""
    from snaketrack.service import RobotState, StateClient
    from snaketrack.service.messages import STATE

    got, ready, cpu0 = [], False, time.process_time()
    try:
        with StateClient(url) as client:
            for topic, msg, received in client.messages(timeout=10):
                if not ready:  # the first message (a status) means the subscriptions are in place
                    results.put(("ready", name))
                    ready, cpu0 = True, time.process_time()
                if topic != STATE:
                    continue
                s = RobotState.from_message(msg, received)
                got.append((s.received_time, s.frame, s.latency_ms))
                if delay_s and stop.wait(delay_s):
                    break
    finally:
        results.put((name, got, time.process_time() - cpu0))


def _reference(frames, robot, camera, pipeline, n: int, stride: int = 1, max_s: float = float("inf"),
               segmenter=None) -> tuple[float, float, float, int]:
    """``n`` frames tracked without the service, every ``stride``-th of the clip played forward and back (as
    the service plays it; its frame times), or fewer when ``max_s`` [s] of wall clock have passed: the
    tracker's rate [1/s] (its own time, as the service's ``track_fps``), the CPU time [ms] a frame took in all
    (reading, preparing, tracking), the time the pose searches took [s] and the frames tracked. With a
    ``segmenter`` it segments each frame (its CPU time counts in the frame's; it runs in this thread)."""
    from snaketrack.tracker.run.pipeline import TrackingSession

    if segmenter is not None:
        segmenter.reset()
    session = TrackingSession(robot, camera, frames.fps, pipeline, segmenter=segmenter).start()
    period = max(2 * len(frames) - 2, 1)
    cpu0, t0 = time.thread_time(), time.monotonic()
    for j in range(n):
        if j >= 2 and time.monotonic() - t0 > max_s:
            n = j
            break
        k = j * stride
        i = k % period if k % period < len(frames) else period - k % period
        session.step(frames.frame(i), None if segmenter is not None else frames.mask(i), t=k / frames.fps, index=i)
    fps = n / session.track_time_s if session.track_time_s > 0 else float("nan")  # nan: every frame was lost
    return fps, 1000 * (time.thread_time() - cpu0) / n, session.search_time_s, n


def _frames_folder(video, out: Path, progress: bool = True) -> Path:
    """``video``'s frames as a folder of PNG frames (``out/frames/``, ``out/meta.json`` with its frame rate),
    which the feed can play back and forth; returns ``out``."""
    import cv2
    from tqdm import tqdm

    from snaketrack.io import write_json

    (out / "frames").mkdir(parents=True, exist_ok=True)
    for i, rgb in tqdm(video.frames(), total=len(video) or None, desc="frames", unit="frame", disable=not progress):
        cv2.imwrite(str(out / "frames" / f"{i:06d}.png"), cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR),
                    [cv2.IMWRITE_PNG_COMPRESSION, 1])
    write_json(out / "meta.json", {"fps": video.fps})
    return out


def run_service_benchmark(dataset: str | os.PathLike, config: ServiceBenchConfig = ServiceBenchConfig(),
                          out: Optional[str | os.PathLike] = None, progress: bool = True) -> dict:
    """Benchmark the service on ``dataset`` (a dataset or frames folder, or a video: played from a
    temporary folder of its frames, which the feed can play back and forth; module doc); with ``out``, also
    ``soak.png`` (memory and latency over the run) and ``soak.json`` there. Returns the figures."""
    from snaketrack.datasets.video import VideoSource, open_frames

    frames = open_frames(dataset)
    if isinstance(frames, VideoSource):
        import tempfile

        with tempfile.TemporaryDirectory(prefix="snaketrack-service-") as tmp:
            return _soak(open_frames(_frames_folder(frames, Path(tmp), progress)), config, out, progress)
    return _soak(frames, config, out, progress)


def _soak(frames, config: ServiceBenchConfig, out: Optional[str | os.PathLike], progress: bool) -> dict:
    """:func:`run_service_benchmark` on an opened folder of ``frames``."""
    from snaketrack.models.robot import source_robot
    from snaketrack.service import Capture, RecordedFeed, ServiceConfig, TrackingService
    from snaketrack.tracker.calib.camera import source_camera
    from snaketrack.tracker.run.loop import open_segmenter
    from snaketrack.tracker.run.pipeline import PipelineConfig

    robot = source_robot(config.robot, frames.meta)
    camera = source_camera(frames.meta, frames.width, frames.height)
    segmenter = (open_segmenter(config.masks, "live", config.segmenter_flips, scale=config.segmenter_scale)
                 if config.masks else None)
    pipeline = PipelineConfig(hold_frames=0, track_size=config.track_size,
                              corrupt_masks=config.corrupt_masks and segmenter is None, render=False)
    reference_fps, reference_cpu_ms, _, _ = _reference(frames, robot, camera, pipeline, config.reference_frames,
                                                       segmenter=segmenter)

    feed = RecordedFeed(frames, masks=None if segmenter is not None else frames.mask, realtime=True, loop=True,
                        bounce=True)
    service_config = ServiceConfig(port=0, catch_up_gap=config.catch_up_gap, catch_up_s=config.catch_up_s)
    if segmenter is not None:
        segmenter.reset()
        segmenter.wait = False  # a camera's pace, as serve runs it
    service = TrackingService(Capture(feed), robot, camera, pipeline, service_config, segmenter=segmenter)
    service.start(capture=False)
    import multiprocessing as mp

    ctx = mp.get_context("spawn")  # the clients are processes of their own, as a controller would be
    slow_delay = config.slow_factor / (reference_fps if reference_fps > 0 else frames.fps)
    results, stop = ctx.Queue(), ctx.Event()
    clients = [ctx.Process(target=_client, args=(service.url, 0.0, "fast", results, stop), daemon=True),
               ctx.Process(target=_client, args=(service.url, slow_delay, "slow", results, stop), daemon=True)]
    for c in clients:
        c.start()
    for _ in clients:  # both clients subscribed before the first frame
        results.get(timeout=120)
    cpu0 = thread_cpu_s()
    t0 = time.time()
    service.start_capture()
    samples: list[tuple[float, float]] = []
    from tqdm import tqdm

    with tqdm(total=int(config.seconds), desc="soak", unit="s", disable=not progress) as bar:
        while (elapsed := time.time() - t0) < config.seconds:
            samples.append((elapsed, rss_mb()))
            time.sleep(config.sample_s)
            bar.n = min(int(elapsed), int(config.seconds))
            bar.refresh()
    last_tracked = service.frames_tracked
    cpu1 = thread_cpu_s()
    stop.set()
    figures = service.stop()
    got, client_cpu = {}, {}
    for _ in clients:
        name, states, cpu = results.get(timeout=60)
        got[name], client_cpu[f"client-{name}"] = states, cpu
    for c in clients:
        c.join(timeout=10)
    fast, slow = got["fast"], [frame for _, frame, _ in got["slow"]]
    # the tracker's own work at the service's skip: every stride-th frame, without the service
    stride = max(1, round(figures["frames_captured"] / max(figures["frames_tracked"], 1)))
    if segmenter is not None:
        segmenter.wait = True
    stride_fps, stride_cpu_ms, stride_search_s, stride_frames = _reference(
        frames, robot, camera, pipeline, config.reference_frames, stride, config.seconds / 2, segmenter)

    lat = np.array([x[2] for x in fast], float)
    times = np.array([x[0] for x in fast], float) - t0
    tenth = config.seconds / 10

    def p50(sel):
        return float(np.percentile(lat[sel], 50)) if np.any(sel) else float("nan")

    rss_t = np.array([s[0] for s in samples])
    rss = np.array([s[1] for s in samples])
    warm = rss[rss_t >= tenth] if np.any(rss_t >= tenth) else rss
    first_slow = slow[0] if slow else 0
    per_state = 1000 / max(last_tracked, 1)
    cpu = {name: cpu1[name] - cpu0.get(name, 0.0) for name in cpu1}
    cpu.update(client_cpu)
    cpu_ms = {name: round(s * per_state, 2) for name, s in sorted(cpu.items(), key=lambda x: -x[1]) if s > 0}
    result = {
        "seconds": float(config.seconds),
        "frames_captured": figures["frames_captured"],
        "frames_tracked": figures["frames_tracked"],
        "fps": figures["frames_tracked"] / config.seconds,
        "reference_fps": reference_fps,
        "reference_cpu_ms_per_frame": reference_cpu_ms,
        "reference_stride": stride,
        "reference_frames_at_stride": stride_frames,
        "reference_fps_at_stride": stride_fps,
        "reference_cpu_ms_per_frame_at_stride": stride_cpu_ms,
        "reference_search_s_at_stride": stride_search_s,
        "first_state_s": float(times[0]) if times.size else float("nan"),
        "first_state_s_in_service": figures.get("first_state_s"),
        "cpu_ms_per_state": cpu_ms,
        "cpu_ms_per_state_total": round(sum(cpu_ms.values()), 2),
        "track_fps_in_service": figures["track_fps"],
        "search_s_in_service": service.session.search_time_s,
        "frames_dropped": figures["frames_dropped"],
        "catch_up_gap": figures["catch_up_gap"],
        "latency_ms_p50": float(np.percentile(lat, 50)) if lat.size else float("nan"),
        "latency_ms_p95": float(np.percentile(lat, 95)) if lat.size else float("nan"),
        "latency_ms_p50_first_tenth": p50((times >= tenth) & (times < 2 * tenth)),  # after the first search
        "latency_ms_p50_last_tenth": p50(times >= config.seconds - tenth),
        "fast_client_states": len(fast),
        "slow_client_states": len(slow),
        "slow_client_drops": max(0, last_tracked - first_slow - len(slow)),
        "rss_mb_start": float(warm[0]) if warm.size else float("nan"),
        "rss_mb_end": float(rss[-1]) if rss.size else float("nan"),
        "rss_mb_max": float(rss.max()) if rss.size else float("nan"),
        "track_size": list(service.session.size),
        "masks": config.masks or ("truth, corrupted" if config.corrupt_masks else "truth"),
    }
    if out is not None:
        _plot(Path(out), rss_t, rss, times, lat, result)
    return result


def _plot(out: Path, rss_t, rss, times, lat, result: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from snaketrack.io import write_json

    out.mkdir(parents=True, exist_ok=True)
    fig, (a, b) = plt.subplots(2, 1, figsize=(8, 5), sharex=True)
    a.plot(rss_t, rss)
    a.set_ylabel("resident memory [MiB]")
    b.plot(times, lat, ".", ms=2)
    b.set_ylabel("capture → client [ms]")
    b.set_xlabel("time [s]")
    b.set_yscale("log")
    fig.suptitle(f"service soak: {result['fps']:.1f} states/s, {result['frames_dropped']} frames skipped")
    fig.tight_layout()
    fig.savefig(out / "soak.png", dpi=100)
    plt.close(fig)
    write_json(out / "soak.json", result)
