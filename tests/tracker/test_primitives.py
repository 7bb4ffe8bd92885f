"""The silhouette model's free-end inset: the capsule end that covers a flat-ended cylinder's area."""
import numpy as np
import pytest

from snaketrack.tracker.render.primitives import _capsule_2d, free_end_inset


def test_free_end_inset_balances_the_areas():
    none = lambda x, y: np.zeros(np.shape(x), bool)  # noqa: E731
    r = 0.02
    # no cap: a half disc of radius r has the area of a band πr/4 long
    assert free_end_inset(r, [none], [none], cells_per_radius=80) == pytest.approx(np.pi * r / 4, rel=2e-3)
    # a cap at least as wide as the body hides the capsule's end: no inset
    big = _capsule_2d(0.0, 0.0, 1.2 * r)
    assert free_end_inset(r, [big], [big]) == 0.0
    # the inset is the band's missing area over its width 2r, whatever the cap
    h = r / 400
    x = np.arange(-3 * r, 3 * r, h) + h / 2
    X, Y = np.meshgrid(x, x)
    cap = _capsule_2d(0.0, 0.0, 0.9 * r)
    d = free_end_inset(r, [cap], [cap], cells_per_radius=80)
    band = (X <= 0) & (np.abs(Y) <= r)
    body = _capsule_2d(-4 * r, -d, r)(X, Y)
    c = cap(X, Y)
    assert abs(int((band | c).sum()) - int((body | c).sum())) * h * h < 2e-3 * np.pi * r * r
