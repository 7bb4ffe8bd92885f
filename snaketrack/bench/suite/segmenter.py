"""Benchmark: DeepLabV3+ inference time per frame, and SAM vit_b labelling time, on this CPU.

For each offered encoder, a randomly initialised DeepLabV3+ whose input
size equals the frame size segments one RGB frame at a time through
:meth:`Segmenter.predict` (resize, normalise, pad, forward, threshold):
median ms/frame at 640x360 and 320x180. SAM vit_b (random weights: the
timing does not depend on them) is timed for ``set_image`` + one box
``predict`` per frame. GrabCut, the weight-free labeller, is timed on the
same frame as a reference. resnet18 is also timed in float32 and under
bfloat16 autocast, side by side (a training step of the CPU recipe and a
640x360 frame; ``--precision`` of train, segment and eval-seg).

Side by side, the two settings of a segmenter (docs/segmentation.md, "Live and accurate"), both in a
window that follows the robot: ``accurate`` (torch, the model file's stored scale and flips; on the whole
frame as ``accurate_whole``) and ``live`` (the stored scale and flips, at most the left-right pair, in the
fastest installed engine, the model file's int8 network when it carries one; each other engine beside it
as ``live_ENGINE``, the float32 network as ``live_fp32`` when ``live`` runs int8, one pass without flips
as ``live_one_pass`` when ``live`` flips, and the whole frame at scale 1 as ``live_whole_scale1``), mean
ms per 640x360 frame through :meth:`Segmenter.predict` over ``--timed-frames`` frames of ``--video`` in
order (without it, the toy video's first frame repeated) and frames/s. ``--model MODEL.pt`` times that
model (without it a random-init resnet18 DeepLabV3+ at 640x360 whose file stores scale 1.5 and 4 flips,
the CPU recipe's usual choice); ``--video DATASET`` (frames/ and truth masks/) also scores each setting's
mean IoU against the truth masks and their difference (live − accurate). ``--side-by-side-only`` skips the
rest.

    snaketrack bench segmenter [--repeats 5] [--sam-repeats 2]
    snaketrack bench segmenter --side-by-side-only --model MODEL.pt --video DATASET --threads 2
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from snaketrack.bench.registry import Benchmark

SIZES = {"640x360": (360, 640), "320x180": (180, 320)}


def _median_s(fn, repeats: int, warmup: int = 1) -> float:
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def precision_timing(rgb, repeats: int) -> dict[str, float]:
    """resnet18 DeepLabV3+ in float32 and under bfloat16 autocast, side by side: one training step
    (batch 8 of 160x160 crops, Adam, BCE; the CPU recipe's) and one 640x360 frame through
    :meth:`Segmenter.predict`; medians [ms] and the speed-ups."""
    import torch

    from snaketrack.training.model import SegmenterConfig, build_model, precision_context
    from snaketrack.training.segmenter import Segmenter

    res: dict[str, float] = {}
    torch.manual_seed(0)
    model = build_model(SegmenterConfig(encoder="resnet18"))
    opt = torch.optim.Adam(model.parameters(), 1e-4)
    x = torch.randn(8, 3, 160, 160)
    y = (torch.rand(8, 1, 160, 160) > 0.9).float()
    for prec in ("fp32", "bf16"):
        def step(prec=prec):
            opt.zero_grad()
            with precision_context(prec):
                logits = model.train()(x)
            torch.nn.functional.binary_cross_entropy_with_logits(logits.float(), y).backward()
            opt.step()

        res[f"train_step_{prec}_ms"] = 1000 * _median_s(step, repeats)
        cfg = SegmenterConfig(encoder="resnet18", precision=prec)
        seg = Segmenter(model, cfg)
        res[f"resnet18_640x360_{prec}_ms"] = 1000 * _median_s(lambda seg=seg: seg.predict(rgb), repeats)
    res["train_step_bf16_speedup_x"] = res["train_step_fp32_ms"] / res["train_step_bf16_ms"]
    res["predict_bf16_speedup_x"] = res["resnet18_640x360_fp32_ms"] / res["resnet18_640x360_bf16_ms"]
    return res


def _fps(ms: float) -> float:
    return 1000.0 / ms if ms > 0 else float("inf")


def _mean_ms(seg, frames) -> tuple[float, float]:
    """Mean ms per frame of ``seg.predict`` over ``frames`` in order (a window follows the robot through
    them; its whole-frame searches are in the mean): the first pass, which includes an engine's compiling
    each input size it meets, and the second, the steady state."""
    out = []
    for _ in range(2):
        seg.reset()
        t = time.perf_counter()
        for f in frames:
            seg.predict(f)
        out.append(1000 * (time.perf_counter() - t) / len(frames))
    return out[0], out[1]


def side_by_side(model_path, frames, video=None, every: int = 1) -> dict:
    """The accurate and live settings of ``model_path`` on the 640x360 RGB ``frames`` of one video, in order:
    mean ms/frame and frames/s of :meth:`Segmenter.predict` on a second pass (the first, with an engine's
    compiling, as ``first_pass_ms``); the live setting in each installed engine, in one pass (``live_one_pass``)
    and, as ``live_whole_scale1``, the whole frame at scale 1 without the window. With ``video`` (a dataset
    folder with truth masks) the mean IoU of each over every ``every``-th frame and its difference from the
    accurate setting's."""
    import torch

    from snaketrack.datasets.layout import Dataset
    from snaketrack.training.evaluate import evaluate_segmenter
    from snaketrack.training.live import installed_engines
    from snaketrack.training.segmenter import load_segmenter

    res: dict[str, object] = {"model": str(model_path), "frame": f"{frames[0].shape[1]}x{frames[0].shape[0]}",
                              "timed_frames": len(frames), "threads": torch.get_num_threads()}
    engines = installed_engines()
    segs = {"accurate": load_segmenter(model_path, setting="accurate"),
            "accurate_whole": load_segmenter(model_path, setting="accurate", window=False)}
    segs.update({"live" if k == 0 else f"live_{e}": load_segmenter(model_path, setting="live", engine=e)
                 for k, e in enumerate(engines)})
    if segs["live"].network is not None and segs["live"].network.precision == "int8":
        segs["live_fp32"] = load_segmenter(model_path, setting="live", int8=False)
    if segs["live"].flips > 1:
        segs["live_one_pass"] = load_segmenter(model_path, setting="live", flips=1)
    segs["live_whole_scale1"] = load_segmenter(model_path, setting="live", scale=1.0, window=False)
    for name, seg in segs.items():
        first_ms, ms = _mean_ms(seg, frames)
        res[name] = {"backend": seg.backend, "precision": getattr(seg.network, "precision", seg.precision),
                     "scale": seg.scale, "flips": seg.flips, "window": seg.window is not None,
                     "threshold": seg.threshold, "ms": ms, "fps": _fps(ms), "first_pass_ms": first_ms}
        if seg.window is not None:  # counts of both passes
            res[name].update(window_frames=seg.window.windows, whole_frames=seg.window.searches)
        print(json.dumps({name: res[name]}), file=sys.stderr, flush=True)
    res["speedup_x"] = res["accurate"]["ms"] / res["live"]["ms"]
    if video is not None:
        idx = range(0, len(Dataset(video)), every)
        for name, seg in segs.items():
            seg.reset()
            r = evaluate_segmenter(seg, video, frames=idx)
            res[name]["iou"], res[name]["iou_frames"] = r["iou"], r["frames"]
            print(json.dumps({name: {"iou": r["iou"], "frames": r["frames"]}}), file=sys.stderr, flush=True)
        res["video"] = str(video)
        res["iou_difference"] = res["live"]["iou"] - res["accurate"]["iou"]
    return res


def random_model_file(folder) -> str:
    """A random-init resnet18 DeepLabV3+ at 640x360 saved in ``folder``, its file storing scale 1.5 and
    4 flips (what the CPU recipe's training usually chooses)."""
    import torch

    from snaketrack.training.model import SegmenterConfig, build_model, save_model

    torch.manual_seed(0)
    cfg = SegmenterConfig(encoder="resnet18", input_size=(360, 640), scale=1.5, flips=4)
    path = str(Path(folder) / "random-resnet18.pt")
    save_model(path, build_model(cfg), cfg)
    return path


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--encoders", default="resnet18,resnet34,mobilenet_v2,efficientnet-b0")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--sam-repeats", type=int, default=2)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--no-sam", action="store_true")
    ap.add_argument("--model", default=None, help="a trained model file for the side-by-side settings")
    ap.add_argument("--video", default=None, help="a dataset folder with truth masks: IoU of each setting")
    ap.add_argument("--every", type=int, default=1, help="score every K-th frame of --video (default 1)")
    ap.add_argument("--timed-frames", type=int, default=30,
                    help="frames of --video timed in order, or repeats of the toy frame (default 30)")
    ap.add_argument("--side-by-side-only", action="store_true", help="only the live/accurate comparison")


def run(args: argparse.Namespace) -> dict:
    import numpy as np
    import torch

    from snaketrack.datasets.boxes import mask_to_box
    from snaketrack.datasets.grabcut_backend import GrabCutBackend
    from snaketrack.datasets.toy import toy_video
    from snaketrack.training.model import SegmenterConfig, build_model
    from snaketrack.training.segmenter import Segmenter

    if args.threads:
        torch.set_num_threads(args.threads)
    frames, masks = toy_video(1, 640, 360, seed=0)
    rgb, truth = frames[0], masks[0]
    out: dict[str, object] = {"torch_threads": torch.get_num_threads(), "batch": 1}
    with tempfile.TemporaryDirectory() as tmp:
        model = args.model or random_model_file(tmp)
        timed = [rgb] * args.timed_frames
        if args.video:
            from snaketrack.datasets.layout import Dataset

            ds = Dataset(args.video)
            timed = [ds.frame(i) for i in range(min(args.timed_frames, len(ds)))]
        out["side_by_side"] = side_by_side(model, timed, args.video, args.every)
    if args.side_by_side_only:
        return out
    for enc in args.encoders.split(","):
        for name, size in SIZES.items():
            torch.manual_seed(0)
            cfg = SegmenterConfig(encoder=enc, input_size=size)
            seg = Segmenter(build_model(cfg), cfg)
            img = np.ascontiguousarray(rgb[:: 360 // size[0], :: 640 // size[1]])
            out[f"{enc}_{name}_ms"] = 1000 * _median_s(lambda seg=seg, img=img: seg.predict(img), args.repeats)
            print(json.dumps({k: out[k] for k in out if k.startswith(enc)}), file=sys.stderr, flush=True)
    out.update(precision_timing(rgb, args.repeats))
    print(json.dumps({k: v for k, v in out.items() if "bf16" in k or "fp32" in k}), file=sys.stderr, flush=True)
    box = mask_to_box(truth).expand(10)
    gc = GrabCutBackend()

    def grabcut():
        gc.set_image(rgb)
        gc.predict(box)

    out["grabcut_640x360_ms"] = 1000 * _median_s(grabcut, args.repeats)
    if not args.no_sam:
        from segment_anything import SamPredictor, sam_model_registry

        torch.manual_seed(0)
        pred = SamPredictor(sam_model_registry["vit_b"]().eval())

        def sam():
            with torch.inference_mode():
                pred.set_image(rgb)
                pred.predict(box=box.xyxy(), multimask_output=False)

        out["sam_vit_b_set_image_predict_s"] = _median_s(sam, args.sam_repeats, warmup=0)
        with torch.inference_mode():
            out["sam_vit_b_predict_only_ms"] = 1000 * _median_s(
                lambda: pred.predict(box=box.xyxy(), multimask_output=False), args.repeats)
        r18 = out.get("resnet18_640x360_ms")
        if r18:
            out["resnet18_vs_sam_speedup_x"] = 1000 * out["sam_vit_b_set_image_predict_s"] / r18
    return out


BENCHMARK = Benchmark("segmenter", "DeepLabV3+ inference time per frame, and SAM vit_b labelling time, on this CPU",
                      add_arguments, run, quick={"repeats": 1, "sam_repeats": 1})
