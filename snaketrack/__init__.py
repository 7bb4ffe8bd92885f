"""snaketrack: track a snake robot from one camera and hand its states on.

Rooms (sub-packages) follow the flow of data, see ``docs/`` and DESIGN.md:
``models`` → ``sim`` → ``datasets`` → ``training`` → ``tracker`` →
``estimation`` → ``service``; ``commands`` holds the CLI subcommands.
"""
from snaketrack.errors import SnaketrackError

__version__ = "0.1.0"
__all__ = ["SnaketrackError", "__version__"]
