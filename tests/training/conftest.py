import pytest

from snaketrack.datasets.toy import write_toy_dataset


@pytest.fixture(scope="session")
def toy_root(tmp_path_factory):
    """A small labelled toy dataset (24 frames, 128x96, truth masks as labels)."""
    return write_toy_dataset(tmp_path_factory.mktemp("toy") / "ds", 24, 128, 96, seed=5, thickness_frac=0.08)
