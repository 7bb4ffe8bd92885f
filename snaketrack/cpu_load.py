"""A CPU-bound competitor process, for measuring a run on a shared CPU.

:class:`Competitor` starts ``python -c "while True: pass"`` (bounded: it ends
by itself after ``limit_s``, even if the process that started it dies) and
stops it on leaving the ``with`` block. The shared-CPU benchmark
(``snaketrack bench shared-cpu``) runs ``track`` and ``serve`` quiet and
beside one.
"""
from __future__ import annotations

import subprocess
import sys
from typing import Optional

#: The competitor's program: a busy loop that ends after ``limit`` seconds.
BUSY_LOOP = "import time\nend = time.monotonic() + {limit}\nwhile time.monotonic() < end:\n    pass\n"


class Competitor:
    """One busy-looping process while the ``with`` block runs (module doc); ``limit_s`` [s] bounds its life."""

    def __init__(self, limit_s: float = 600.0):
        self.limit_s = float(limit_s)
        self.process: Optional[subprocess.Popen] = None

    def __enter__(self) -> "Competitor":
        self.process = subprocess.Popen([sys.executable, "-c", BUSY_LOOP.format(limit=self.limit_s)],
                                        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        return self

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def __exit__(self, *exc) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self.process = None
