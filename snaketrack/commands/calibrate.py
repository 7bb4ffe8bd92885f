"""``snaketrack calibrate``: a camera's intrinsics from chessboard images, as the file ``--intrinsics`` reads.

::

    snaketrack calibrate IMAGES... --board COLSxROWS [--square-mm 25] [--every K] [--k3] --out camera.yaml

IMAGES are image files, folders of images or video files. The fit is
:func:`snaketrack.tracker.calib.calibration.calibrate`; the file is written by
:func:`snaketrack.tracker.calib.camera.save_calibration` (OpenCV YAML, or JSON for ``.json``).
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from snaketrack.commands import Command
from snaketrack.errors import InputError


def _add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("images", nargs="+", metavar="IMAGES",
                   help="image files, folders of images, or video files showing the chessboard")
    p.add_argument("--board", required=True, metavar="COLSxROWS",
                   help="the board's inner corners, columns x rows (9x6 for a board of 10 x 7 squares)")
    p.add_argument("--square-mm", type=float, default=25.0, metavar="MM",
                   help="side of one square [mm] (default 25); scales only the board distances reported")
    p.add_argument("--every", type=int, default=None, metavar="K",
                   help="videos: search every K-th frame (default: about 30 frames spread over each video)")
    p.add_argument("--k3", action="store_true",
                   help="fit the third radial distortion coefficient too (wide-angle lenses; default: k3 = 0)")
    p.add_argument("--out", required=True, metavar="FILE",
                   help="calibration file to write: OpenCV YAML (.yaml/.yml/.xml) or JSON (.json)")
    p.add_argument("--json", action="store_true", help="print a JSON summary instead of sentences")


def _run(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from snaketrack.tracker.calib.calibration import calibrate, calibration_images, parse_board
    from snaketrack.tracker.calib.camera import save_calibration

    board = parse_board(args.board)
    if not args.square_mm > 0:
        raise InputError(f"--square-mm {args.square_mm:g}; expected a positive square size in millimetres")
    out = Path(args.out)
    if out.suffix.lower() not in (".yaml", ".yml", ".xml", ".json"):
        raise InputError(f"--out {out}: expected a .yaml, .yml, .xml or .json file name")
    total, images = calibration_images(args.images, args.every)

    def bar(it):
        return tqdm(it, total=total or None, desc="calibrate", unit="image", disable=None, leave=False)

    res = calibrate(images, board, args.square_mm / 1000.0, progress=bar, fit_k3=args.k3)
    cam = res.camera
    save_calibration(out, cam, extra={"rms_px": round(res.rms_px, 6), "images_used": res.found,
                                      "board": f"{board[0]}x{board[1]}", "square_mm": float(args.square_mm)})
    dist = [] if cam.dist is None else [round(float(v), 6) for v in cam.dist]
    if args.json:
        print(json.dumps({"out": str(out), "found": res.found, "tried": res.tried, "rms_px": res.rms_px,
                          "fx": cam.fx, "fy": cam.fy, "cx": cam.cx, "cy": cam.cy, "dist_coeffs": dist,
                          "width": cam.width, "height": cam.height}))
        return 0
    print(f"{out}: the {board[0]}x{board[1]} board was found in {res.found} of {res.tried} images; "
          f"RMS reprojection error {res.rms_px:.3f} px")
    print(f"  {cam.width}x{cam.height} px: fx {cam.fx:.1f}, fy {cam.fy:.1f}, cx {cam.cx:.1f}, cy {cam.cy:.1f} px; "
          f"distortion {dist}; boards {min(res.distances_m):.2f}-{max(res.distances_m):.2f} m away")
    if res.rms_px > 1.0:
        print("  an RMS error above 1 px usually means blurred images or a wrong --board; check the images used")
    return 0


COMMANDS = [Command(name="calibrate", help="calibrate a camera from chessboard images (the file --intrinsics reads)",
                    add_arguments=_add_arguments, run=_run,
                    description="Calibrate a camera from images of a chessboard (files, folders or videos) with "
                                "OpenCV and write the calibration file that --intrinsics reads.")]
