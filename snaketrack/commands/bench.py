"""``snaketrack bench``: list the benchmarks, or run one and print its result as JSON.

The benchmarks are those of :mod:`snaketrack.bench.registry`; progress goes
to stderr and the result, one JSON object, to stdout.
"""
from __future__ import annotations

import argparse
import sys

from snaketrack.commands import Command, command_parser
from snaketrack.errors import InputError


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--list", action="store_true", help="list the benchmarks with one line each")
    p.add_argument("name", nargs="?", help="the benchmark to run (snaketrack bench --list)")
    p.add_argument("options", nargs=argparse.REMAINDER,
                   help="the benchmark's flags (snaketrack bench NAME --help); --quick: a short configuration")


def run(args: argparse.Namespace) -> int:
    from snaketrack.bench import registry

    if args.list:
        if args.name is not None:
            raise InputError("--list takes no benchmark name")
        found = registry.benchmarks()
        width = max(len(name) for name in found)
        for name, bench in found.items():
            print(f"{name:<{width}}  {bench.description}")
        return 0
    if args.name is None:
        raise InputError("name a benchmark, or --list to see them")
    bench = registry.lookup(args.name)
    options = registry.parse(bench, args.options)
    options.parser_of = command_parser  # for a benchmark that runs the commands (batch): the suite sits below them
    from snaketrack.io import to_json

    result = bench.run(options)
    sys.stdout.write(to_json(result) + "\n")
    return 0


COMMANDS = [Command("bench", "run a benchmark and print its result as JSON (--list: the benchmarks)",
                    add_arguments, run,
                    description="Run one benchmark and print its result, one JSON object, on stdout (progress on "
                                "stderr); `snaketrack bench --list` lists them, `snaketrack bench NAME --help` "
                                "gives a benchmark's flags, and --quick a short configuration of any of them.")]
