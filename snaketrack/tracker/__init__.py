"""Frames to states: the camera, the differentiable silhouette, the filter, the refinement, the session.

Sub-packages, each one idea: ``render`` (the silhouette and its derivatives), ``fit`` (the model fitted
to a mask: observation, occlusion, refinement, search), ``calib`` (camera, calibration, up direction,
ground), ``run`` (the session, the frame loop, its outputs and quality figures); beside them the
state's layout (``state``), the filter (``filter``), the settings (``config``), the reading of the chain
(``reading``) and the :class:`Tracker` that ties fit, render and filter together (``tracker``).

- :class:`TrackingSession` / :class:`PipelineConfig`: the whole pipeline, one frame at a time; the one
  session object: it owns the :class:`Tracker`, the ground tracker and the first frames' reading hold.
- :func:`track_source` / :class:`RunOptions`: a recorded video or dataset into an output folder.
- :class:`Tracker` / :class:`TrackerConfig`: the core under the session: prediction, refinement, search and
  re-acquisition on masks.
- :class:`Camera`, :func:`load_calibration`: intrinsics, distortion, size.
- :class:`SilhouetteRenderer`: the robot's soft silhouette and its derivatives.
- :class:`TrackState`: one frame's joint angles, base pose and head (camera frame).
- :func:`quality_metrics`, :func:`plot_quality`: how good a track is without truth.
"""
from typing import TYPE_CHECKING

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
    "MaskCorruptor": "run.corrupt", "GroundTracker": "calib.ground",
    "open_up": "calib.gravity",
    "TrackWriter": "run.outputs", "StateStream": "run.outputs", "OverlayVideo": "run.outputs",
    "overlay_frame": "run.outputs",
    "tracking_metrics": "run.evaluation", "plot_tracking": "run.evaluation",
    "quality_metrics": "run.quality", "plot_quality": "run.quality",
})

if TYPE_CHECKING:  # the names the lazy exports give, re-exported for type checkers and editors
    from snaketrack.tracker.calib.camera import (
        Camera as Camera,
    )
    from snaketrack.tracker.calib.camera import (
        Undistorter as Undistorter,
    )
    from snaketrack.tracker.calib.camera import (
        load_calibration as load_calibration,
    )
    from snaketrack.tracker.calib.camera import (
        save_calibration as save_calibration,
    )
    from snaketrack.tracker.calib.gravity import open_up as open_up
    from snaketrack.tracker.calib.ground import GroundTracker as GroundTracker
    from snaketrack.tracker.config import RefineConfig as RefineConfig
    from snaketrack.tracker.config import TrackerConfig as TrackerConfig
    from snaketrack.tracker.render.silhouette import SilhouetteRenderer as SilhouetteRenderer
    from snaketrack.tracker.run.corrupt import MaskCorruptor as MaskCorruptor
    from snaketrack.tracker.run.evaluation import plot_tracking as plot_tracking
    from snaketrack.tracker.run.evaluation import tracking_metrics as tracking_metrics
    from snaketrack.tracker.run.loop import (
        RunOptions as RunOptions,
    )
    from snaketrack.tracker.run.loop import (
        open_session as open_session,
    )
    from snaketrack.tracker.run.loop import (
        track_source as track_source,
    )
    from snaketrack.tracker.run.outputs import (
        OverlayVideo as OverlayVideo,
    )
    from snaketrack.tracker.run.outputs import (
        StateStream as StateStream,
    )
    from snaketrack.tracker.run.outputs import (
        TrackWriter as TrackWriter,
    )
    from snaketrack.tracker.run.outputs import (
        overlay_frame as overlay_frame,
    )
    from snaketrack.tracker.run.pipeline import (
        FrameResult as FrameResult,
    )
    from snaketrack.tracker.run.pipeline import (
        PipelineConfig as PipelineConfig,
    )
    from snaketrack.tracker.run.pipeline import (
        TrackingSession as TrackingSession,
    )
    from snaketrack.tracker.run.pipeline import (
        make_tracker as make_tracker,
    )
    from snaketrack.tracker.run.quality import plot_quality as plot_quality
    from snaketrack.tracker.run.quality import quality_metrics as quality_metrics
    from snaketrack.tracker.state import StateLayout as StateLayout
    from snaketrack.tracker.state import TrackState as TrackState
    from snaketrack.tracker.tracker import Tracker as Tracker
