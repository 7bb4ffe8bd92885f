"""Data on disk and in streams: frame sources, the dataset layout, and the auto-labeller.

- :func:`open_frames`: a video, an image folder or a dataset folder as ``(index, rgb)`` frames.
- :class:`Dataset` / :class:`DatasetWriter`: the folder layout of frames, masks, ``meta.json``, ``truth.jsonl``.
- :func:`label_video`: box-prompted labels of a video (SAM or GrabCut), each frame prompted by the last good mask.
- :func:`fit_labels`: labels replaced or trimmed by the robot model's silhouette fitted to them;
  :class:`FittedBackend` / :class:`LabelFitter`: the same while labelling.
"""
from snaketrack._exports import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(__name__, {
    "Box": "boxes", "parse_box": "boxes", "mask_to_box": "boxes", "propagate_box": "boxes",
    "FrameSource": "video", "open_frames": "video",
    "Dataset": "layout", "DatasetWriter": "layout", "read_image": "layout", "read_mask": "layout",
    "LabelConfig": "label", "Labeller": "label", "label_video": "label",
    "GrabCutBackend": "grabcut_backend", "SamBackend": "sam_backend", "load_sam": "sam_backend",
    "FitConfig": "fit_labels", "fit_labels": "fit_labels", "FittedBackend": "fit_labels",
    "LabelFitter": "fit_labels",
    "write_toy_dataset": "toy",
})
