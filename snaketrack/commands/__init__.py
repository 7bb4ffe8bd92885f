"""CLI subcommands, one module per capability.

Each module defines ``COMMANDS``: a list of :class:`Command`. :func:`all_commands`
finds every module here (``cli.py`` builds ``--help`` from it), so adding a
capability never edits ``cli.py``. A name with a space (``"sim oal"``) becomes
a nested subcommand. :func:`command_parser` is one command's parser alone, for
what runs commands in-process (``fit-video``, ``batch``).

A command module imports its work inside ``run``: ``snaketrack --help`` imports
every module here, and loads no torch, MuJoCo or OpenCV for it.
"""
from __future__ import annotations

import argparse
import importlib
import pkgutil
from dataclasses import dataclass
from typing import Callable, Optional

from snaketrack.errors import InputError
from snaketrack.threads import ThreadPolicy


@dataclass(frozen=True)
class Command:
    """One subcommand.

    name: words after ``snaketrack`` (``"track"`` or ``"sim oal"``).
    help: one line for ``--help``.
    add_arguments: adds the command's flags to its parser.
    run: does the work; returns an exit status (None means 0).
    description: what ``snaketrack NAME --help`` says above the flags (None: ``help``).
    """

    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], Optional[int]]
    description: Optional[str] = None


def all_commands() -> list[Command]:
    """Every subcommand: the ``COMMANDS`` of each module of this package, by name."""
    out: list[Command] = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        out.extend(getattr(module, "COMMANDS", []))
    return sorted(out, key=lambda cmd: cmd.name)


class ArgumentParser(argparse.ArgumentParser):
    """argparse with one-line errors: a missing or bad flag is one line on stderr and exit status 2."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def command_parser(name: str, exit_on_error: bool = True) -> argparse.ArgumentParser:
    """The argument parser of ``snaketrack NAME`` (a one-word command) alone, its command's ``run`` as the
    parsed arguments' ``_run``; ``exit_on_error`` as :class:`argparse.ArgumentParser`'s. KeyError for no such
    command."""
    for cmd in all_commands():
        if cmd.name == name:
            p = ArgumentParser(prog=f"snaketrack {name}", description=cmd.description or cmd.help,
                               exit_on_error=exit_on_error)
            cmd.add_arguments(p)
            p.set_defaults(_run=cmd.run)
            return p
    raise KeyError(name)


def add_threads_argument(p: argparse.ArgumentParser) -> None:
    """``--threads N``: the tracker's and the segmenter's CPU threads (:class:`snaketrack.threads.ThreadPolicy`);
    applied by :func:`apply_thread_policy`."""
    p.add_argument("--threads", type=int, default=None, metavar="N",
                   help="CPU threads of the tracker (torch) and of the segmenter's inference engine, each (default: "
                        "one each, the segmenter reading ahead on the second core; holds its rate on a shared CPU: "
                        "docs/tracking.md, 'Threads')")


def apply_threads(args: argparse.Namespace) -> None:
    """Set torch's CPU threads to ``args.threads`` when given (:func:`add_threads_argument`)."""
    threads = getattr(args, "threads", None)
    if threads is None:
        return
    if threads < 1:
        raise InputError(f"--threads {threads}: expected at least 1")
    import torch  # deferred: the commands' module imports without torch (module doc)

    torch.set_num_threads(threads)


def apply_thread_policy(args: argparse.Namespace) -> dict[str, int]:
    """Apply the tracking thread policy of ``args.threads`` (:func:`add_threads_argument`, None: the default
    policy); returns torch's threads after (:meth:`snaketrack.threads.ThreadPolicy.apply`)."""
    return ThreadPolicy.of(getattr(args, "threads", None)).apply()


def add_device_argument(p: argparse.ArgumentParser, what: str) -> None:
    """``--device cpu|cuda|cuda:N|auto`` (default auto): where torch runs ``what``; resolved by
    :func:`snaketrack.device.resolve_device` (``cuda`` without a GPU: one line, exit status 2)."""
    p.add_argument("--device", default="auto", metavar="cpu|cuda|cuda:N|auto",
                   help=f"where torch runs {what}: cpu, cuda (the current GPU), cuda:N, or auto (cuda when torch "
                        "sees a GPU, else cpu; default auto)")


def add_camera_arguments(p: argparse.ArgumentParser, default: str) -> None:
    """``--intrinsics FILE`` or ``--fov-deg DEG`` (one of them); ``default`` says what is used without either."""
    g = p.add_mutually_exclusive_group()
    g.add_argument("--intrinsics", default=None,
                   help=f"OpenCV calibration (YAML from cv2.FileStorage, or JSON: camera_matrix, dist_coeffs); "
                        f"default: {default}")
    g.add_argument("--fov-deg", type=float, default=None, metavar="DEG",
                   help="no calibration: the camera's horizontal field of view [deg] (a phone films about 65-70)")


def camera_of(args: argparse.Namespace):
    """The camera flags of :func:`add_camera_arguments` as ``source_camera``'s ``intrinsics``: a file, a
    :class:`~snaketrack.tracker.calib.camera.FieldOfView`, or None."""
    if getattr(args, "fov_deg", None) is not None:
        from snaketrack.tracker.calib.camera import FieldOfView  # deferred: loads OpenCV and torch (module doc)

        return FieldOfView(args.fov_deg)
    return args.intrinsics


def add_setting_argument(p: argparse.ArgumentParser, default: str, flag: str = "--setting",
                         flips_flag: Optional[str] = None, scale_flag: Optional[str] = None) -> None:
    """The segmenter's setting flag: ``live`` (the model file's scale and flips, at most the left-right
    pair, OpenVINO or ONNX Runtime) or ``accurate`` (the model file's scale and flips, torch), both in a
    window that follows the robot; ``--scale``/``--flips`` given explicitly override either. ``flips_flag``
    (e.g. ``--segmenter-flips``) adds that override of the flips where the command has no ``--flips``, and
    ``scale_flag`` (``--segmenter-scale``) that of the input scale."""
    p.add_argument(flag, default=default, choices=["live", "accurate"],
                   help="segmenter setting: live (the model's stored scale and flips, at most left-right, "
                        "OpenVINO) or accurate (the stored scale and flips, torch; up to seconds a frame), "
                        "both in a window around the robot's last mask "
                        f"(default {default}; docs/segmentation.md)")
    if flips_flag is not None:
        p.add_argument(flips_flag, type=int, default=None, choices=[1, 2, 4],
                       help="test-time flips of the segmenter: 1 none (fastest), 2 left-right, 4 and up-down "
                            "(default: the setting's; live: the model's, at most 2)")
    if scale_flag is not None:
        p.add_argument(scale_flag, type=float, default=None, metavar="S",
                       help="run the segmenter on frames resized to S times its trained input size (default: "
                            "the model's, chosen on validation; a smaller S is faster)")


def add_all_pieces_argument(p: argparse.ArgumentParser) -> None:
    """``--all-pieces``: keep a segmenter mask's pieces that are not its robot
    (:func:`~snaketrack.training.window.robot_pieces`); ``--network-edges``: keep the network's edge
    (:func:`~snaketrack.mask_edges.unmix_edges` and :func:`~snaketrack.mask_edges.snap_edges` off);
    ``--whole-frame``: segment every frame whole, not in a window that follows the robot
    (:class:`~snaketrack.training.window.Window`)."""
    p.add_argument("--all-pieces", action="store_true",
                   help="keep every piece of the mask (by default each mask keeps its largest piece and the pieces "
                        "within three body widths of it, at least half as thick: one robot in view)")
    p.add_argument("--network-edges", action="store_true",
                   help="keep the network's edge (by default each pixel beside a mask's edge is decided by its "
                        "colour, robot when clearly more robot than ground, then moved onto the frame's colour edge)")
    p.add_argument("--whole-frame", action="store_true",
                   help="segment each frame whole (by default the network looks at a window around the previous "
                        "frame's robot and at the whole frame only when the robot may have left it: frames that "
                        "are not one video's in order need this)")
