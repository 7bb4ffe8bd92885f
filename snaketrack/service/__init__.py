"""The live tracking service: a camera in, robot states out to controllers, Foxglove and MCAP.

- :class:`TrackingService` / :class:`ServiceConfig`: capture, tracking and publishing (``snaketrack serve``).
- :class:`Capture`, :class:`PushSource`, :class:`RecordedFeed`, :class:`StreamFeed`: where frames come from.
- :class:`Publisher`: the topics, through the Foxglove SDK's WebSocket server and MCAP writer.
- :class:`StateClient` / :class:`RobotState`: subscribe from Python (``snaketrack listen``).
- :class:`TokenGate`: the token check at the WebSocket handshake.
"""
from snaketrack._exports import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(__name__, {
    "TrackingService": "service", "ServiceConfig": "service",
    "Capture": "capture", "PushSource": "capture", "RecordedFeed": "capture", "StreamFeed": "capture",
    "Backoff": "capture", "Frame": "capture", "LatestFrame": "capture", "SourceDropped": "capture",
    "Publisher": "publisher",
    "StateClient": "client", "RobotState": "client", "ServiceError": "client",
    "TokenGate": "gate",
})
