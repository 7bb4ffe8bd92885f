"""The segmenter: DeepLabV3+ (segmentation-models-pytorch) built, trained, selected, saved and loaded.

- :class:`TrainConfig` / :func:`train`: training on labelled datasets, resumable.
- :func:`load_segmenter` / :class:`Segmenter`: a model file ready to ``predict(rgb) -> mask``.
- :func:`segment_source`: a video or frame folder masked into a dataset folder.
- :func:`evaluate_segmenter`: mean IoU against a dataset's masks.
"""
from snaketrack._exports import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(__name__, {
    "TrainConfig": "config", "train": "train", "TrainResult": "train",
    "SegmenterConfig": "model", "build_model": "model", "save_model": "model", "load_model": "model",
    "Segmenter": "segmenter", "load_segmenter": "segmenter",
    "SegmentationData": "data",
    "evaluate_segmenter": "evaluate", "mean_iou": "evaluate",
    "segment_source": "segment",
})
