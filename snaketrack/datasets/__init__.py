"""Data on disk and in streams: frame sources, the dataset layout, box prompts and the labellers' backends.

- :func:`open_frames`: a video, an image folder or a dataset folder as ``(index, rgb)`` frames.
- :class:`Dataset` / :class:`DatasetWriter`: the folder layout of frames, masks, ``meta.json``, ``truth.jsonl``.
- :class:`GrabCutBackend` / :class:`SamBackend`: a robot mask from a box prompt (the labeller:
  :mod:`snaketrack.labelling`).
"""
from snaketrack._exports import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(__name__, {
    "Box": "boxes", "parse_box": "boxes", "mask_to_box": "boxes", "propagate_box": "boxes",
    "FrameSource": "video", "open_frames": "video",
    "Dataset": "layout", "DatasetWriter": "layout", "read_image": "layout", "read_mask": "layout",
    "GrabCutBackend": "grabcut_backend", "SamBackend": "sam_backend", "load_sam": "sam_backend",
    "write_toy_dataset": "toy",
})
