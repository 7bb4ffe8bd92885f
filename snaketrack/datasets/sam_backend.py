"""Segment Anything behind the labeller's box-prompt protocol.

Uses the ``segment_anything`` package as its authors meant:
``sam_model_registry[model_type](checkpoint=FILE)`` builds the model and
loads the weights, :class:`segment_anything.SamPredictor` computes the
image embedding once per frame (``set_image``) and answers the box
prompt cheaply (``predict(box=..., multimask_output=False)``: a box is an
unambiguous prompt, so one mask is asked for).

Weights are never downloaded. A missing file, or one whose tensors do not
fit the chosen model type, raises a one-line error naming both.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import numpy as np

from snaketrack.datasets.boxes import Box
from snaketrack.errors import FileFormatError, InputError, MissingFileError, StateError

SAM_MODEL_TYPES = ("vit_b", "vit_l", "vit_h")


def load_sam(checkpoint: str | os.PathLike, model_type: str = "vit_b", device: str = "cpu"):
    """Build SAM ``model_type`` and load ``checkpoint``; returns the ``Sam`` module (eval mode)."""
    from segment_anything import sam_model_registry  # deferred: optional, the sam extra

    if model_type not in SAM_MODEL_TYPES:
        raise InputError(f"--sam-model {model_type!r}: expected one of {', '.join(SAM_MODEL_TYPES)}")
    path = Path(checkpoint)
    if not path.is_file():
        raise MissingFileError(f"{path}: no such SAM checkpoint (for --sam-model {model_type}); "
                               "snaketrack does not download weights: give a local checkpoint file with "
                               "--sam-checkpoint")
    try:
        sam = sam_model_registry[model_type](checkpoint=str(path))
    except RuntimeError as e:  # load_state_dict: missing / unexpected keys or size mismatch
        first = str(e).strip().splitlines()
        hint = next((l.strip() for l in first[1:] if l.strip()), first[0] if first else "")
        raise FileFormatError(f"{path}: does not match SAM model type {model_type} ({hint[:160]}); "
                              "check --sam-model against the checkpoint") from None
    except Exception as e:  # unreadable / not a torch file
        raise FileFormatError(f"{path}: not a readable SAM {model_type} checkpoint "
                              f"({type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''})") from None
    return sam.to(device).eval()


class SamBackend:
    """Box-prompted Segment Anything (see module doc).

    ``sam`` may be given directly (an already built ``Sam`` module), else
    it is loaded from ``checkpoint`` as ``model_type``.
    """

    name = "sam"

    def __init__(self, checkpoint: Optional[str | os.PathLike] = None, model_type: str = "vit_b",
                 device: str = "cpu", sam=None):
        from segment_anything import SamPredictor  # deferred: optional, the sam extra

        if sam is None:
            if checkpoint is None:
                raise InputError("--backend sam needs --sam-checkpoint FILE, a local SAM checkpoint "
                                 "(snaketrack does not download weights)")
            sam = load_sam(checkpoint, model_type, device)
        self.model_type = model_type
        self.predictor = SamPredictor(sam)

    def set_image(self, rgb: np.ndarray) -> None:
        """Compute the image embedding of one frame (RGB uint8 (H, W, 3)): the expensive step."""
        import torch  # deferred: the module imports without torch

        with torch.inference_mode():
            self.predictor.set_image(np.ascontiguousarray(rgb), image_format="RGB")

    def reset_image(self) -> None:
        self.predictor.reset_image()

    def predict(self, box: Box, prior: Optional[np.ndarray] = None) -> np.ndarray:
        """Mask bool (H, W) for the box prompt (pixels); ``prior`` is not used by SAM."""
        import torch  # deferred: the module imports without torch

        if not self.predictor.is_image_set:
            raise StateError("SamBackend.predict called before set_image(); call set_image(rgb) first")
        with torch.inference_mode():
            masks, scores, _ = self.predictor.predict(box=box.xyxy(), multimask_output=False)
        return np.asarray(masks[0], bool)
