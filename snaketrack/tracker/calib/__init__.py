"""The camera and the ground: intrinsics, calibration, the up direction, the ground plane and its tracking."""
