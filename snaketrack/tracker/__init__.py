"""Frames to states: the camera, the differentiable silhouette, the filter, the refinement, the session.

- :class:`TrackingSession` / :class:`PipelineConfig`: the whole pipeline, one frame at a time.
- :func:`track_source` / :class:`RunOptions`: a recorded video or dataset into an output folder.
- :class:`Tracker` / :class:`TrackerConfig`: prediction, refinement, search and re-acquisition on masks.
- :class:`Camera`, :func:`load_calibration`: intrinsics, distortion, size.
- :class:`SilhouetteRenderer`: the robot's soft silhouette and its derivatives.
- :class:`TrackState`: one frame's joint angles, base pose and head (camera frame).
- :func:`quality_metrics`, :func:`plot_quality`: how good a track is without truth.
"""
from snaketrack._exports import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(__name__, {
    "TrackingSession": "pipeline", "PipelineConfig": "pipeline", "FrameResult": "pipeline",
    "make_tracker": "pipeline",
    "track_source": "run", "open_session": "run", "RunOptions": "run",
    "Tracker": "tracker", "TrackerConfig": "config", "RefineConfig": "config",
    "Camera": "camera", "Undistorter": "camera", "load_calibration": "camera", "save_calibration": "camera",
    "SilhouetteRenderer": "render",
    "TrackState": "state", "StateLayout": "state",
    "MaskCorruptor": "corrupt", "GroundTracker": "ground", "ReadingHold": "reading", "open_up": "gravity",
    "TrackWriter": "outputs", "StateStream": "outputs", "OverlayVideo": "outputs", "overlay_frame": "outputs",
    "tracking_metrics": "evaluation", "plot_tracking": "evaluation",
    "quality_metrics": "quality", "plot_quality": "quality",
})
