"""Benchmark: DeepLabV3+ inference time per frame, and SAM vit_b labelling time, on this CPU.

For each offered encoder, a randomly initialised DeepLabV3+ whose input
size equals the frame size segments one RGB frame at a time through
:meth:`Segmenter.predict` (resize, normalise, pad, forward, threshold):
median ms/frame at 640x360 and 320x180. SAM vit_b (random weights: the
timing does not depend on them) is timed for ``set_image`` + one box
``predict`` per frame. GrabCut, the weight-free labeller, is timed on the
same frame as a reference. resnet18 is also timed in float32 and under
bfloat16 autocast, side by side (a training step of the CPU recipe and a
640x360 frame; ``--precision`` of train, segment and eval-seg). Prints one
JSON object last.

    python scripts/bench_segmenter.py [--repeats 5] [--sam-repeats 2]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--encoders", default="resnet18,resnet34,mobilenet_v2,efficientnet-b0")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--sam-repeats", type=int, default=2)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--no-sam", action="store_true")
    args = ap.parse_args()

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
    for enc in args.encoders.split(","):
        for name, size in SIZES.items():
            torch.manual_seed(0)
            cfg = SegmenterConfig(encoder=enc, input_size=size)
            seg = Segmenter(build_model(cfg), cfg)
            img = np.ascontiguousarray(rgb[:: 360 // size[0], :: 640 // size[1]])
            out[f"{enc}_{name}_ms"] = 1000 * _median_s(lambda seg=seg, img=img: seg.predict(img), args.repeats)
            print(json.dumps({k: out[k] for k in out if k.startswith(enc)}), flush=True)
    out.update(precision_timing(rgb, args.repeats))
    print(json.dumps({k: v for k, v in out.items() if "bf16" in k or "fp32" in k}), flush=True)
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
    print(json.dumps(out))


if __name__ == "__main__":
    main()
