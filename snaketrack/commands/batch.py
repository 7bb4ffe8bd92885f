"""``snaketrack batch``: a campaign of videos through the pipeline on Ray.

::

    snaketrack batch CAMPAIGN.yaml [--address auto|ray://HOST:PORT] [--workers N] --out DIR

Checking and wiring only: the campaign file is :mod:`snaketrack.batch.campaign`, the run
:func:`snaketrack.batch.runner.run_campaign`.
"""
from __future__ import annotations

import argparse
import sys

from snaketrack.commands import Command, command_parser
from snaketrack.errors import InputError
from snaketrack.extras import require


def _add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("campaign", metavar="CAMPAIGN.yaml",
                   help="the campaign: robot, camera, mask source, videos (docs/batch.md)")
    p.add_argument("--address", default=None,
                   help="a running Ray cluster ('auto', or ray://HOST:PORT); default: a local Ray on this machine")
    p.add_argument("--workers", type=int, default=None,
                   help="CPUs of the local Ray (default: this machine's); each stage takes one, training all")
    p.add_argument("--train-gpus", type=float, default=0.0, help="GPUs the training task asks for (default 0)")
    p.add_argument("--out", required=True, help="output folder: one folder per video, summary.json, summary.csv")


def _run(args: argparse.Namespace) -> int:
    from snaketrack.batch.campaign import load_campaign
    from snaketrack.batch.runner import Resources, run_campaign

    require("batch", "batch")
    if args.workers is not None and args.workers < 1:
        raise InputError(f"--workers {args.workers}; expected a positive number")
    campaign = load_campaign(args.campaign, command_parser)
    summary = run_campaign(campaign, args.out, command_parser, args.address, args.workers,
                           Resources(train_gpus=args.train_gpus))
    for row in summary["per_video"]:
        if row["status"] != "ok":
            print(f"{row['video']}: {row['failed_stage']} failed: {row['error']}", file=sys.stderr)
    print(f"{summary['ok']} of {summary['videos']} videos done; wrote {args.out}/summary.json, summary.csv")
    return 0 if summary["failed"] == 0 else 1


COMMANDS = [Command(name="batch", help="run a campaign of videos through the pipeline on Ray (local or a cluster)",
                    add_arguments=_add_arguments, run=_run)]
