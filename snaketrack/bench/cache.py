"""Where benchmark clips are rendered once and reused: ``$SNAKETRACK_BENCH_CACHE``, else ``~/.cache/snaketrack/bench``.

A benchmark that tracks synthetic clips renders each into this folder under a
name made of the parameters that shape it (scene, robot, seed, and what else
the benchmark varies: ``drone-arcsnake-s0``, ``static-planar-s0-w8``) and
reads it from there on every later run; a clip shorter than a run asks for is
continued. ``--data DIR`` points a benchmark at another folder of such clips.
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path

#: the environment variable naming the cache folder
ENV = "SNAKETRACK_BENCH_CACHE"


def cache_dir() -> Path:
    """The folder benchmark clips are kept in (not created here)."""
    env = os.environ.get(ENV)
    if env:
        return Path(env).expanduser()
    return Path("~/.cache/snaketrack/bench").expanduser()


def add_data_argument(p: argparse.ArgumentParser) -> None:
    """``--data DIR``: the folder of the benchmark clips, rendered into it when absent (default: the cache)."""
    p.add_argument("--data", type=Path, default=None, metavar="DIR",
                   help=f"folder of the benchmark clips, each rendered into it when absent (default: ${ENV}, "
                        f"else ~/.cache/snaketrack/bench)")


def data_dir(args: argparse.Namespace) -> Path:
    """The clips' folder of :func:`add_data_argument`'s ``--data``."""
    return args.data if args.data is not None else cache_dir()
