"""Benchmark the truth machine: OAL physics steps per second and synthetic-video frames per second.

Measures, in one process:

- ``sim_steps_per_s``: physics steps per second of ``simulate_oal`` (10 s of the
  obstacle world at dt = 1/240, PD control in Python, state recording);
  reference ``ref_mj_step_per_s``: bare ``mujoco.mj_step`` on the same model
  with constant controls (what MuJoCo alone costs);
- ``render_fps``: frames per second of :class:`snaketrack.sim.video.VideoRenderer`
  at ``--size`` (default 640x360; drone scene): RGB with shadows and 4x multisampling, the
  segmentation render, the robot mask, degradations (blur, noise, JPEG) and
  the truth record; not counting the writing of files;
  reference ``ref_rgb_only_fps``: the RGB render alone on the same renderer;
- ``render_fps_no_effects``: the same frames without shadows and reflections
  (``VideoRenderer(effects=False)``, what ``sim closed-loop --pacing wall`` renders).

Usage: snaketrack bench sim [--frames 60] [--duration 10] [--size 640x360]
"""
from __future__ import annotations

import argparse
import os
import time

from snaketrack.bench.registry import Benchmark
from snaketrack.io import parse_size


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--frames", type=int, default=60, help="frames to render (default 60)")
    ap.add_argument("--duration", type=float, default=10.0, help="simulated seconds (default 10)")
    ap.add_argument("--size", default="640x360", metavar="WxH", help="rendered frame size [px] (default 640x360)")


def run(args: argparse.Namespace) -> dict:
    width, height = parse_size(args.size, "--size")  # a bad size fails before the minutes of work
    import mujoco

    from snaketrack.sim.oal import OALConfig, oal_model, simulate_oal
    from snaketrack.sim.video import VideoConfig, VideoRenderer


    cfg = OALConfig(duration=args.duration)
    simulate_oal(OALConfig(duration=0.1))  # warm-up (imports, JIT of nothing, caches)
    t0 = time.perf_counter()
    res = simulate_oal(cfg)
    sim_s = time.perf_counter() - t0
    steps = res.t.shape[0]

    model, _ = oal_model(cfg)
    data = mujoco.MjData(model)
    data.ctrl[:] = 0.5
    t0 = time.perf_counter()
    for _ in range(steps):
        mujoco.mj_step(model, data)
    ref_s = time.perf_counter() - t0

    vcfg = VideoConfig(scene="drone", frames=args.frames, width=width, height=height)
    with VideoRenderer(vcfg) as r:
        r.frame(0)  # warm-up: first render allocates GL buffers
        t0 = time.perf_counter()
        for i in range(args.frames):
            r.frame(i)
        render_s = time.perf_counter() - t0
        w = r.world
        t0 = time.perf_counter()
        for i in range(args.frames):
            w.data.qpos[:] = r.motion.qpos[i]
            mujoco.mj_forward(w.model, w.data)
            r.renderer.update_scene(w.data, camera=w.cam, scene_option=r.option)
            r.renderer.render()
        rgb_s = time.perf_counter() - t0
    with VideoRenderer(vcfg, effects=False) as r:
        r.frame(0)
        t0 = time.perf_counter()
        for i in range(args.frames):
            r.frame(i)
        plain_s = time.perf_counter() - t0

    out = {
        "sim_steps_per_s": steps / sim_s,
        "sim_realtime_x": args.duration / sim_s,
        "ref_mj_step_per_s": steps / ref_s,
        "render_fps": args.frames / render_s,
        "ref_rgb_only_fps": args.frames / rgb_s,
        "render_fps_no_effects": args.frames / plain_s,
        "render_width_px": width,
        "render_height_px": height,
        "cpu_count": os.cpu_count(),
        "load_avg_1min": os.getloadavg()[0],
    }
    return {k: (round(v, 3) if isinstance(v, float) else v) for k, v in out.items()}


BENCHMARK = Benchmark("sim", "the truth machine: OAL physics steps per second and synthetic-video frames per second",
                      add_arguments, run, quick={"frames": 3, "duration": 0.5})
