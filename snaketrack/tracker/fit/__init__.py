"""Fitting the model to a mask: the observation, occlusion, the refinement, the pose search."""
