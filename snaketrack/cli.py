"""The one command: ``snaketrack <subcommand> ...``.

Subcommands live in :mod:`snaketrack.commands` (one module per capability,
each with a ``COMMANDS`` list, found by :func:`~snaketrack.commands.all_commands`).
Any :class:`~snaketrack.errors.SnaketrackError` becomes one line on stderr and
exit status 2, as does a bad or missing flag.
"""
from __future__ import annotations

import argparse
import os
import sys
import warnings
from typing import Optional, Sequence

from snaketrack.commands import ArgumentParser, all_commands
from snaketrack.errors import SnaketrackError, SnaketrackWarning
from snaketrack.threads import quiet_openmp

os.environ.setdefault("MUJOCO_GL", "egl")
quiet_openmp()  # before torch is loaded: OpenMP's idle workers sleep (snaketrack.threads)
os.environ.setdefault("PYOPENGL_PLATFORM", os.environ["MUJOCO_GL"])


def _preload_triton() -> None:
    """Import triton before MuJoCo opens an EGL context.

    torch imports triton lazily (torch.optim, torch.func); that import
    segfaults once MuJoCo's EGL context exists, which a command that renders
    and then tracks (``demo``) would hit. Importing it first costs ~0.2 s.
    """
    try:
        import triton  # noqa: F401
    except Exception:
        pass


DESCRIPTION = "Track a snake robot from a single camera: its joint angles and pose, frame by frame."
EPILOG = ("The pipeline: label (a robot mask per frame from one box) -> train (a segmenter on the labels) -> "
          "track (joint angles and pose) -> estimate (the head Jacobian); serve tracks a live source for a "
          "controller. `snaketrack COMMAND --help` for each; README.md and docs/ for the rest.")
#: the order ``--help`` lists the commands in: the pipeline's, then the tools around it
ORDER = ("demo", "fit-video", "label", "fit-labels", "train", "segment", "eval-seg", "track", "estimate", "serve",
         "listen",
         "batch", "calibrate", "robot", "sim", "statics")
#: what each group of subcommands holds, for ``--help``
GROUPS = {"sim": "simulators that know the truth: synthetic video, locomotion, control, the Jacobian experiments",
          "robot": "robot files: write one from a few numbers, draw its silhouette"}


def _commands():
    return sorted(all_commands(), key=_listing_key)


def _listing_key(cmd) -> tuple[int, str]:
    """Where ``cmd`` comes in ``--help``: by :data:`ORDER` of its first word, the rest after, by name."""
    word = cmd.name.split()[0]
    return (ORDER.index(word) if word in ORDER else len(ORDER), cmd.name)


_default_format = warnings.formatwarning


def _format_warning(message, category, filename, lineno, line=None) -> str:
    """The package's own warnings as one line (``snaketrack: warning: ...``); others as Python prints them."""
    if isinstance(category, type) and issubclass(category, SnaketrackWarning):
        return f"snaketrack: warning: {message}\n"
    return _default_format(message, category, filename, lineno, line)


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser, with every discovered subcommand."""
    parser = ArgumentParser(prog="snaketrack", description=DESCRIPTION, epilog=EPILOG)
    top = parser.add_subparsers(dest="command", metavar="COMMAND")
    groups: dict[str, argparse._SubParsersAction] = {}
    for cmd in _commands():
        words = cmd.name.split()
        sub = top
        for depth, word in enumerate(words[:-1]):
            key = " ".join(words[: depth + 1])
            if key not in groups:
                group_parser = sub.add_parser(word, help=GROUPS.get(key, f"{word} subcommands"),
                                             description=GROUPS.get(key))
                groups[key] = group_parser.add_subparsers(dest=f"sub_{depth}", metavar="SUBCOMMAND")
                group_parser.set_defaults(_group_parser=group_parser)
            sub = groups[key]
        p = sub.add_parser(words[-1], help=cmd.help, description=cmd.description or cmd.help)
        cmd.add_arguments(p)
        p.set_defaults(_run=cmd.run)
    return parser


def os_error_message(e: OSError) -> str:
    """One line for an :class:`OSError`: the path (and the one it was to become) and the system's reason.

    >>> os_error_message(NotADirectoryError(20, "Not a directory", "a.png/out"))
    'a.png/out: Not a directory'
    >>> os_error_message(IsADirectoryError(21, "Is a directory", ".p.tmp", None, "p"))
    'p: Is a directory'
    """
    reason = e.strerror or str(e)
    if e.filename2 is not None:
        return f"{e.filename2}: {reason}"
    if e.filename is not None:
        return f"{e.filename}: {reason}"
    return reason


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of the ``snaketrack`` console script."""
    _preload_triton()
    warnings.formatwarning = _format_warning
    parser = build_parser()
    args = parser.parse_args(argv)
    run = getattr(args, "_run", None)
    if run is None:
        (getattr(args, "_group_parser", None) or parser).print_help()
        return 2
    try:
        status = run(args)
    except SnaketrackError as e:
        one_line = " ".join(part.strip() for part in str(e).splitlines() if part.strip())
        print(f"snaketrack: error: {one_line}", file=sys.stderr)
        return 2
    except OSError as e:  # the system refused a path or address the user gave (a folder through a file, ...)
        print(f"snaketrack: error: {os_error_message(e)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("snaketrack: interrupted; finished outputs are kept", file=sys.stderr)
        return 130
    return int(status or 0)


if __name__ == "__main__":
    sys.exit(main())
