"""Where the CPU's threads go when tracking: the thread policy of ``track`` and ``serve``.

The tracker's core works on small tensors (a few hundred pose entries, one
silhouette at 640×360): a second intra-op thread gains little on a quiet
machine, and on a shared one it is ruinous: OpenMP's workers wait for each
other at every parallel region, spinning, and when one of them loses its core
to another process each region waits out a scheduler slice (docs/tracking.md,
"Threads", gives the figures). The default policy (:class:`ThreadPolicy`):

- the tracker's torch: one intra-op thread and one inter-op thread;
- the segmenter's inference engine (OpenVINO, ONNX Runtime): its own thread
  count (one), running in the thread that reads and segments the next frame
  while the tracker works on this one, so it takes the second core;
- OpenMP's idle workers sleep rather than spin (``OMP_WAIT_POLICY=PASSIVE``,
  ``KMP_BLOCKTIME=0``): set in the environment before torch is loaded
  (:func:`quiet_openmp`, called by the command line), when not set already.

``--threads N`` gives the tracker and the segmenter N threads each instead.

>>> ThreadPolicy().tracker, ThreadPolicy().segmenter, ThreadPolicy.of(3).tracker
(1, 1, 3)
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional

import cv2

from snaketrack.errors import InputError

#: OpenMP settings that make idle workers sleep, set by :func:`quiet_openmp` unless already set.
#: torch's threads for GrabCut's labeller (``snaketrack label``): the fit's tracker works on small tensors,
#: and the other core makes the next frame's motion map (docs/benchmarks.md,
#: "Labels and a segmenter on scenes they were not tuned on")
LABEL_THREADS = 1

QUIET_OPENMP = {"OMP_WAIT_POLICY": "PASSIVE", "KMP_BLOCKTIME": "0"}


def quiet_openmp(environ=os.environ) -> dict[str, str]:
    """Set :data:`QUIET_OPENMP` in ``environ`` where the variables are unset; returns what holds after.
    Only effective before torch (its OpenMP runtime) is loaded."""
    for k, v in QUIET_OPENMP.items():
        environ.setdefault(k, v)
    return {k: environ[k] for k in QUIET_OPENMP}


@dataclass(frozen=True)
class ThreadPolicy:
    """Threads of a tracking run.

    tracker: torch's intra-op threads (the tracker's core; a torch-run segmenter shares them). Default 1.
    interop: torch's inter-op threads. Default 1.
    segmenter: the segmenter's inference engine threads (OpenVINO ``INFERENCE_NUM_THREADS``, ONNX Runtime
        ``intra_op_num_threads``). Default 1.
    """

    tracker: int = 1
    interop: int = 1
    segmenter: int = 1

    def __post_init__(self):
        for name in ("tracker", "interop", "segmenter"):
            if int(getattr(self, name)) < 1:
                raise InputError(f"--threads {getattr(self, name)}: expected at least 1")

    @classmethod
    def of(cls, threads: Optional[int]) -> "ThreadPolicy":
        """The policy of ``--threads``: None the default, N that many for the tracker and the segmenter."""
        if threads is None:
            return cls()
        return cls(tracker=int(threads), segmenter=int(threads))

    def apply(self) -> dict[str, int]:
        """Set torch's threads (and OpenCV's to the tracker's); returns what torch reports after.
        torch's inter-op pool can be sized only before it first runs: later, it is left as it is."""
        import torch  # deferred: the module imports without torch

        torch.set_num_threads(int(self.tracker))
        if torch.get_num_interop_threads() != int(self.interop):
            try:
                torch.set_num_interop_threads(int(self.interop))
            except RuntimeError:  # the pool already ran (a second run in one process)
                pass
        cv2.setNumThreads(int(self.tracker))
        return {"torch_threads": torch.get_num_threads(), "torch_interop_threads": torch.get_num_interop_threads(),
                "segmenter_threads": int(self.segmenter)}
