"""``snaketrack serve`` and ``snaketrack listen``: the live tracking service and a client of it.

::

    snaketrack serve SOURCE --robot NAME|FILE [--intrinsics FILE | --fov-deg DEG] [--masks truth|DIR|segmenter:MODEL.pt]
        [--segmenter-setting live|accurate] [--segmenter-flips 1|2|4] [--up sim-imu|FILE|none]
        [--host 127.0.0.1] [--port 8765] [--token-file FILE] [--record FILE.mcap] [--realtime] [--loop]
        [--track-size WxH] [--device cpu|cuda|cuda:N|auto]
    snaketrack listen URL [--token-file FILE] [--count N] [--timeout S]

Argument checking and wiring only: the service is :class:`snaketrack.service.TrackingService`.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from pathlib import Path

from snaketrack.commands import (
    Command,
    add_camera_arguments,
    add_device_argument,
    add_setting_argument,
    add_threads_argument,
    apply_thread_policy,
    camera_of,
)
from snaketrack.errors import FileFormatError, InputError, MissingFileError
from snaketrack.extras import require


def read_token(path: str) -> str:
    """The token in ``path`` (its first line, stripped); one-line errors for a missing or empty file."""
    p = Path(path)
    if not p.is_file():
        raise MissingFileError(f"--token-file {p}: no such file")
    try:
        lines = p.read_text().strip().splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise FileFormatError(f"--token-file {p}: unreadable ({e.__class__.__name__})") from None
    token = lines[0].strip() if lines else ""
    if len(token) < 8:
        raise FileFormatError(f"--token-file {p}: expected a token of at least 8 characters on its first line")
    return token


def _serve_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("source", metavar="SOURCE",
                   help="a camera (0, /dev/video0), a stream URL (rtsp://, http://), a video file, or a frames "
                        "folder or dataset")
    p.add_argument("--robot", default=None, help="shipped robot name or robot YAML file (default: a dataset's robot)")
    add_camera_arguments(p, "a dataset's meta.json K, else a 65 deg horizontal field of view (a phone's)")
    p.add_argument("--masks", default=None,
                   help="segmenter:MODEL.pt (cameras and streams need it), DIR of PNG masks named like the frames, "
                        "or truth (a dataset's masks/, its default)")
    add_setting_argument(p, "live", "--segmenter-setting", "--segmenter-flips", "--segmenter-scale")
    p.add_argument("--up", default=None, metavar="sim-imu|FILE|none",
                   help="the up direction per frame for a recorded source: an IMU CSV or sim-imu (default none); "
                        "with it the poses are also published in the gravity-aligned 'ground' frame")
    p.add_argument("--host", default="127.0.0.1",
                   help="interface to listen on (default 127.0.0.1; any other needs --token-file)")
    p.add_argument("--port", type=int, default=8765, help="WebSocket port (default 8765; 0: any free port)")
    p.add_argument("--token-file", default=None,
                   help="a file whose first line is the token clients must present (Authorization: Bearer, or "
                        "?token= in the URL)")
    p.add_argument("--record", default=None, metavar="FILE.mcap",
                   help="also record every published message to this MCAP file (must not exist)")
    p.add_argument("--realtime", action="store_true",
                   help="play a recorded source at its own frame rate, as a camera delivers it, the tracker taking "
                        "the newest frame (default: at the tracker's pace, no frame skipped)")
    p.add_argument("--loop", action="store_true", help="play a recorded source again from the start at its end")
    p.add_argument("--max-frames", type=int, default=None, help="stop after N frames of a recorded source")
    p.add_argument("--track-size", default=None, metavar="WxH",
                   help="track at this resolution (frames and masks resized, K scaled)")
    p.add_argument("--refine-steps", type=int, default=None, help="refinement iterations per frame (default 10)")
    p.add_argument("--renderer", default="own", choices=("own", "pytorch3d"),
                   help="the silhouette renderer: 'own' (analytic capsules and cylinders; default) or 'pytorch3d' "
                        "(PyTorch3D's soft rasteriser on the robot's meshes, the paper's; needs `make pytorch3d`, "
                        "docs/renderer.md)")
    p.add_argument("--overlay-hz", type=float, default=5.0,
                   help="the most overlay images (/camera/overlay) per second (default 5; 0: none)")
    add_device_argument(p, "the tracker and the segmenter (on a GPU the live setting runs the torch network: "
                           "OpenVINO and ONNX Runtime run on the CPU)")
    add_threads_argument(p)
    p.add_argument("--catch-up-gap", type=int, default=None, metavar="FRAMES",
                   help="after a slow frame (a pose search) track every FRAMES-th of the frames that came meanwhile, "
                        "back to the newest (default: the frames within 0.1 s, 3 at 30 frames/s and 1 at 15; 0: "
                        "always the newest)")
    p.add_argument("--catch-up-s", type=float, default=1.0, metavar="S",
                   help="frames at most S seconds behind the newest are kept for that catch-up (default 1)")
    p.add_argument("--client-queue", type=int, default=256,
                   help="messages queued per client before its oldest are dropped (default 256)")


def open_service(args: argparse.Namespace):
    """The :class:`~snaketrack.service.TrackingService` that ``serve``'s arguments describe; every
    argument is checked (and the source opened) before anything starts."""
    from snaketrack.datasets.video import StreamSource, is_stream, open_frames
    from snaketrack.device import resolve_device
    from snaketrack.io import parse_size
    from snaketrack.models.robot import source_robot
    from snaketrack.service import Capture, RecordedFeed, ServiceConfig, StreamFeed, TrackingService
    from snaketrack.tracker.calib.camera import source_camera
    from snaketrack.tracker.calib.gravity import open_up
    from snaketrack.tracker.run.loop import MaskSource, open_segmenter, segmenter_file
    from snaketrack.tracker.run.pipeline import PipelineConfig

    token = read_token(args.token_file) if args.token_file else None
    record = args.record
    if record is not None:
        if Path(record).exists():
            raise InputError(f"--record {record}: the file exists; name a new one")
        if not Path(record).resolve().parent.is_dir():
            raise MissingFileError(f"--record {record}: no such folder {Path(record).parent}")
    config = ServiceConfig(host=args.host, port=args.port, token=token, record=record,
                           client_queue=args.client_queue, overlay_hz=args.overlay_hz,
                           catch_up_gap=args.catch_up_gap, catch_up_s=args.catch_up_s)
    if args.max_frames is not None and args.max_frames < 1:
        raise InputError(f"--max-frames {args.max_frames}; expected a positive number of frames")
    device = resolve_device(args.device)
    pipeline = PipelineConfig(refine_steps=args.refine_steps, hold_frames=0, renderer=args.renderer,
                              track_size=parse_size(args.track_size, "--track-size") if args.track_size else None,
                              device=device)
    if is_stream(args.source):
        if args.up not in (None, "none"):
            raise InputError(f"--up {args.up}: a live stream's up direction cannot come from a file; use --up none")
        if not (args.masks or "").startswith("segmenter:"):
            raise InputError(f"{args.source}: a live stream needs its masks from a segmenter "
                             "(--masks segmenter:MODEL.pt)")
        robot = source_robot(args.robot, {})
        segmenter_file(args.masks)  # before connecting to the stream
        stream = StreamSource(args.source)
        try:
            camera = source_camera({}, stream.width, stream.height, camera_of(args), args.source)
            segmenter = open_segmenter(args.masks, args.segmenter_setting, args.segmenter_flips, device,
                                       args.segmenter_scale)
        except BaseException:
            stream.release()
            raise
        source = Capture(StreamFeed(stream))
    else:
        frames = open_frames(args.source)
        robot = source_robot(args.robot, frames.meta)
        camera = source_camera(frames.meta, frames.width, frames.height, camera_of(args), args.source)
        mask_source = MaskSource(args.masks, frames, args.segmenter_setting, args.segmenter_flips, device,
                                 args.segmenter_scale)
        if mask_source.kind != "segmenter" and len(frames):
            mask_source(0)  # a folder without the first frame's mask is refused before the service starts
        up = open_up(args.up, frames.truth, int(frames.meta.get("seed", 0) or 0))
        feed = RecordedFeed(frames, masks=None if mask_source.kind == "segmenter" else mask_source, up=up,
                            realtime=args.realtime, loop=args.loop, max_frames=args.max_frames)
        source, segmenter = Capture(feed), mask_source.segmenter
    if segmenter is not None and (is_stream(args.source) or args.realtime):  # a camera's pace: no frame waits
        segmenter.wait = False
    return TrackingService(source, robot, camera, pipeline, config, segmenter=segmenter)


def _serve(args: argparse.Namespace) -> int:
    require("service", "serve", ["foxglove"])
    apply_thread_policy(args)
    service = open_service(args)
    stop = threading.Event()

    def on_signal(signum, _frame):
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        service.start()
        print(f"serving {service.url} (Foxglove: Open connection → Foxglove WebSocket; "
              f"or snaketrack listen {service.url})", file=sys.stderr, flush=True)
        while not stop.is_set() and not service.wait(0.2):
            pass
    finally:
        figures = service.stop()  # within its stop timeout, the recording closed
        for s, h in previous.items():
            signal.signal(s, h)
    print(json.dumps(figures), flush=True)
    if args.record:
        print(f"wrote {args.record}", file=sys.stderr, flush=True)
    if not service.clean:  # a thread still inside a frame (a search on a loaded CPU): end without waiting
        os._exit(0)        # for it, and without the native libraries' teardown racing it
    return 0


def _listen_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("url", metavar="URL", help="the service, ws://HOST:PORT")
    p.add_argument("--token-file", default=None, help="a file whose first line is the service's token")
    p.add_argument("--count", type=int, default=None, help="stop after N states")
    p.add_argument("--timeout", type=float, default=10.0,
                   help="stop when no state comes for this many seconds (default 10)")
    p.add_argument("--status", action="store_true", help="also print /snake/status messages")


def _listen(args: argparse.Namespace) -> int:
    require("service", "listen", ["websockets"])
    from snaketrack.service import StateClient
    from snaketrack.service.messages import STATE

    if args.count is not None and args.count < 1:
        raise InputError(f"--count {args.count}; expected a positive number of states")
    token = read_token(args.token_file) if args.token_file else None
    n = 0
    with StateClient(args.url, token=token) as client:
        for topic, msg, _received in client.messages(timeout=args.timeout):
            if topic != STATE:
                if args.status:
                    print(json.dumps({"status": msg}), flush=True)
                continue
            print(json.dumps(msg), flush=True)
            n += 1
            if args.count is not None and n >= args.count:
                break
    return 0


COMMANDS = [
    Command(name="serve", help="track a live source and publish the robot's states (Foxglove WebSocket, MCAP)",
            add_arguments=_serve_arguments, run=_serve),
    Command(name="listen", help="print a running service's robot states as JSON lines",
            add_arguments=_listen_arguments, run=_listen),
]
