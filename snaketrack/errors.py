"""The project's exception hierarchy.

Every error raised on bad input is a subclass of :class:`SnaketrackError`;
the CLI turns one into a single line on stderr and exit status 2. Messages
name the file or field, the bad value, and what was expected.

>>> try:
...     raise InputError("robot.yaml: links[2].radius = -1; expected a positive length in metres")
... except SnaketrackError as e:
...     print(e)
robot.yaml: links[2].radius = -1; expected a positive length in metres
"""


class SnaketrackError(Exception):
    """Base class of every error this package raises on purpose."""


class InputError(SnaketrackError, ValueError):
    """A value, array or argument has the wrong shape, range or type."""


class FileFormatError(SnaketrackError, ValueError):
    """A file exists but its contents are not what was expected."""


class MissingFileError(SnaketrackError, FileNotFoundError):
    """A file or folder the user named does not exist."""


class ConvergenceError(SnaketrackError, RuntimeError):
    """An iterative solver did not converge within its budget."""


class StateError(SnaketrackError, RuntimeError):
    """A session method was called in the wrong order (e.g. step before start)."""


class SnaketrackWarning(UserWarning):
    """A warning this package issues on purpose (e.g. a fallback it took); the CLI prints it as one line."""
