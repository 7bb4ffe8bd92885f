"""One stage of one video: a ``snaketrack`` command run in-process, recorded when it finished.

A stage is the very command a user would type for one video (``label``,
``fit-labels``, ``train``, ``track``, ``estimate``), so a campaign's outputs
are the single-video commands' outputs. :func:`run_stage` runs it unless a
record of the same command line finishing says it is done (and its ``--out``
is still there), and writes that
record only after the command returned 0: a killed run loses no finished
stage and redoes the one it was in (the commands resume or rewrite their
own outputs). Bad input fails the stage with the command's one-line error;
so does an unexpected exception, so that one video cannot stop the others.

The commands come from the caller as ``parser_of`` (``snaketrack batch`` gives
:func:`snaketrack.commands.command_parser`): the command line stands above
this package and is not imported from it.
"""
from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Optional

import torch

from snaketrack.errors import SnaketrackError

#: the argument parser of ``snaketrack COMMAND`` for a one-word command, its ``run`` as the parsed
#: arguments' ``_run``; KeyError for no such command (:func:`snaketrack.commands.command_parser`)
ParserOf = Callable[[str], argparse.ArgumentParser]


@dataclass(frozen=True)
class StageResult:
    """What became of one stage: ``status`` is ``done``, ``skipped`` (found finished), ``failed`` or
    ``blocked`` (an earlier stage failed); ``error`` the one-line reason; ``seconds`` the run's wall time."""

    video: str
    stage: str
    status: str
    error: Optional[str] = None
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status in ("done", "skipped")

    def as_dict(self) -> dict:
        return asdict(self)


def run_command(argv: list[str], parser_of: ParserOf) -> Optional[str]:
    """Run ``snaketrack ARGV`` in this process, its parser from ``parser_of``; None when it succeeded, else its
    one-line error."""
    parser = parser_of(argv[0])
    try:
        args = parser.parse_args(argv[1:])
    except (argparse.ArgumentError, SystemExit) as e:
        return f"snaketrack {argv[0]}: bad arguments ({e})"
    try:
        status = args._run(args)
    except SnaketrackError as e:
        return str(e)
    except Exception as e:  # a bug in one video's run must not stop the campaign
        return f"{e.__class__.__name__}: {e}"
    return None if not status else f"snaketrack {argv[0]} exited with status {status}"


def record_path(out: Path, video: str, stage: str) -> Path:
    return out / video / ".stages" / f"{stage}.json"


def run_stage(out: str | os.PathLike, video: str, stage: str, argv: list[str], parser_of: ParserOf,
              threads: int = 1, upstream: tuple = ()) -> StageResult:
    """Run one stage (module doc), its command's parser from ``parser_of``. ``upstream``: the
    :class:`StageResult` s it depends on (a failed one blocks it). ``threads``: torch threads for the command
    (its share of the CPUs)."""
    failed = [u for u in upstream if not u.ok]
    if failed:
        first = failed[0]
        return StageResult(video, stage, "blocked", f"{first.stage} of {first.video} failed")
    record = record_path(Path(out), video, stage)
    output = Path(argv[argv.index("--out") + 1]) if "--out" in argv else None
    if record.is_file() and (output is None or output.exists()):
        try:
            if json.loads(record.read_text()).get("argv") == argv:
                return StageResult(video, stage, "skipped")
        except (OSError, ValueError):
            pass  # a damaged record: run the stage again
    torch.set_num_threads(max(1, int(threads)))
    t0 = time.time()
    error = run_command(argv, parser_of)
    seconds = time.time() - t0
    if error is not None:
        return StageResult(video, stage, "failed", error.splitlines()[0] if error else error, seconds)
    record.parent.mkdir(parents=True, exist_ok=True)
    tmp = record.with_suffix(".tmp")
    tmp.write_text(json.dumps({"argv": argv, "seconds": seconds, "finished": time.time()}))
    os.replace(tmp, record)
    return StageResult(video, stage, "done", None, seconds)
