"""The auto-labeller: robot masks for a video from one box, held to the robot model where it is known.

It stands above the tracker (the robot model is fitted with it) and below the commands.

- :func:`label_video`: box-prompted labels of a video (SAM or GrabCut), each frame prompted by the last good mask.
- :func:`fit_labels`: labels replaced or trimmed by the robot model's silhouette fitted to them;
  :class:`FittedBackend` / :class:`LabelFitter`: the same while labelling.
- :class:`GatedBackend`: every label held to the model fitted from the first frame on.
"""
from snaketrack._exports import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(__name__, {
    "LabelConfig": "label", "Labeller": "label", "label_video": "label",
    "FitConfig": "fit_labels", "fit_labels": "fit_labels", "FittedBackend": "fit_labels",
    "LabelFitter": "fit_labels",
    "GateConfig": "label_gate", "GatedBackend": "label_gate",
    "GuidedBackend": "guided_backend",
})
