"""snaketrack: track a snake robot from one camera and hand its states on.

Sub-packages stand in layers, each importing only those below it (the
contracts under ``[tool.importlinter]`` in pyproject.toml, checked by ``make
lint``), from the top:

- ``cli`` and ``commands``: the ``snaketrack`` command and its subcommands;
- ``bench``: the measurements;
- ``batch`` beside ``experiments``: campaigns of videos, and experiments that
  close the loop over a world, the service and the estimators;
- ``service``: tracked states streamed live;
- ``labelling``: robot masks from one box, held to the fitted robot model;
- ``tracker`` (frames to states) beside ``estimation`` (states to Jacobians);
- ``training`` (the segmenter) beside ``sim`` (worlds with truth);
- ``datasets`` (frame sources, the dataset layout, box prompts) beside
  ``models`` (robots);
- the shared modules: ``io``, ``masks``, ``mask_edges``, ``video_writer``,
  ``threads``, ``cpu_load``, ``extras``, ``errors``.

Each sub-package exports its public names, e.g. ``from snaketrack.tracker
import TrackingSession``.
"""
from snaketrack.errors import SnaketrackError

__version__ = "0.1.0"
__all__ = ["SnaketrackError", "__version__"]
