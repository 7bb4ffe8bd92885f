"""The benchmarks ``snaketrack bench`` runs: one module each in :mod:`snaketrack.bench.suite`.

Each module there defines ``BENCHMARK``, a :class:`Benchmark`: its name, a
one-line description, the flags it takes and ``run(args) -> dict``, the
JSON-able result. ``--quick`` sets the flags of :attr:`Benchmark.quick` (few
frames, one clip) unless they are given on the command line, so that every
benchmark has a configuration that runs in seconds to a minute.
"""
from __future__ import annotations

import argparse
import importlib
import pkgutil
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from snaketrack.errors import InputError


@dataclass(frozen=True)
class Benchmark:
    """One benchmark.

    name: the word after ``snaketrack bench`` (``tracker``, ``pose-floor``).
    description: one line for ``--list`` and ``--help``.
    add_arguments: adds the benchmark's flags to its parser.
    run: measures; returns the result as a JSON-able dict (numpy values allowed: :func:`snaketrack.io.to_json`).
    quick: the flags' values (by their ``dest``) of ``--quick``.
    """

    name: str
    description: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], dict]
    quick: Mapping[str, Any] = field(default_factory=dict)


def benchmarks() -> dict[str, Benchmark]:
    """Every benchmark of :mod:`snaketrack.bench.suite`, by name, sorted."""
    import snaketrack.bench.suite as pkg

    found: dict[str, Benchmark] = {}
    for info in pkgutil.iter_modules(pkg.__path__):
        bench = importlib.import_module(f"{pkg.__name__}.{info.name}").BENCHMARK
        if bench.name in found:
            raise RuntimeError(f"two benchmarks are named {bench.name!r}")
        found[bench.name] = bench
    return dict(sorted(found.items()))


def lookup(name: str) -> Benchmark:
    """The benchmark called ``name``; InputError naming the way to list them when there is none."""
    found = benchmarks()
    if name not in found:
        raise InputError(f"no benchmark named {name!r} (snaketrack bench --list)")
    return found[name]


class _Parser(argparse.ArgumentParser):
    """A benchmark's flags; a bad or missing flag raises InputError (one line, exit status 2 from the CLI)."""

    def error(self, message: str):
        raise InputError(f"{message} (see {self.prog} --help)")


def parser_for(bench: Benchmark, prog: str = "snaketrack bench") -> argparse.ArgumentParser:
    """The argument parser of ``bench``, with ``--quick``."""
    p = _Parser(prog=f"{prog} {bench.name}", description=bench.description)
    quick = ", ".join(f"{k}={v}" for k, v in bench.quick.items()) or "its defaults"
    p.add_argument("--quick", action="store_true",
                   help=f"a short configuration that runs in seconds to a minute ({quick}); flags given win")
    bench.add_arguments(p)
    return p


def parse(bench: Benchmark, argv: Sequence[str], prog: str = "snaketrack bench") -> argparse.Namespace:
    """``argv`` parsed by :func:`parser_for`; with ``--quick``, :attr:`Benchmark.quick` fills the flags not given."""
    p = parser_for(bench, prog)
    args = p.parse_args(list(argv))
    if args.quick:
        p.set_defaults(**bench.quick)
        args = p.parse_args(list(argv))
    return args


def run(name: str, argv: Sequence[str] = ()) -> dict:
    """Run the benchmark ``name`` with the flags ``argv``; its result."""
    bench = lookup(name)
    return bench.run(parse(bench, argv))
