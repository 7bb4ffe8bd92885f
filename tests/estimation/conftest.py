"""Fixtures for the estimation tests."""
import pytest

from snaketrack.estimation.synthetic import synthetic_trajectory


@pytest.fixture
def short_synthetic():
    """3 s at 30 fps, 4 joints: the size of a short tracked clip."""
    return synthetic_trajectory(duration=3.0, dt=1 / 30, n_joints=4, seed=3, drift_rad_s=0.2)
