"""snaketrack: track a snake robot from one camera and hand its states on.

Sub-packages follow the flow of data: ``models`` (robots) → ``sim`` (worlds
with truth) → ``datasets`` (frames, masks, labels) → ``training`` (the
segmenter) → ``tracker`` (frames to states) → ``estimation`` (states to
Jacobians); ``commands`` holds the CLI subcommands. Each sub-package exports
its public names, e.g. ``from snaketrack.tracker import TrackingSession``.
"""
from snaketrack.errors import SnaketrackError

__version__ = "0.1.0"
__all__ = ["SnaketrackError", "__version__"]
