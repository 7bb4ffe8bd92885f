"""Frames to states: the camera, the differentiable silhouette, the filter, the refinement, the session.

Sub-packages, each one idea: ``render`` (the silhouette and its derivatives), ``fit`` (the model fitted
to a mask: observation, occlusion, refinement, search), ``calib`` (camera, calibration, up direction,
ground), ``run`` (the session, the frame loop, its outputs and quality figures); beside them the
state's layout (``state``), the filter (``filter``), the settings (``config``), the reading of the chain
(``reading``) and the :class:`Tracker` that ties fit, render and filter together (``tracker``).

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
    "TrackingSession": "run.pipeline", "PipelineConfig": "run.pipeline", "FrameResult": "run.pipeline",
    "make_tracker": "run.pipeline",
    "track_source": "run.loop", "open_session": "run.loop", "RunOptions": "run.loop",
    "Tracker": "tracker", "TrackerConfig": "config", "RefineConfig": "config",
    "Camera": "calib.camera", "Undistorter": "calib.camera", "load_calibration": "calib.camera",
    "save_calibration": "calib.camera",
    "SilhouetteRenderer": "render.silhouette",
    "TrackState": "state", "StateLayout": "state",
    "MaskCorruptor": "run.corrupt", "GroundTracker": "calib.ground", "ReadingHold": "reading",
    "open_up": "calib.gravity",
    "TrackWriter": "run.outputs", "StateStream": "run.outputs", "OverlayVideo": "run.outputs",
    "overlay_frame": "run.outputs",
    "tracking_metrics": "run.evaluation", "plot_tracking": "run.evaluation",
    "quality_metrics": "run.quality", "plot_quality": "run.quality",
})
