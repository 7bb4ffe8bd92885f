"""The authors' and the corrected variant: their settings against the authors' code and by hand."""
from __future__ import annotations

import numpy as np
import pytest

from snaketrack.errors import InputError
from snaketrack.sim.control import GaitParams
from snaketrack.sim.planar import PlanarScenario
from snaketrack.sim.planar_variants import VARIANTS, PlanarVariant, initial_joint_angles, variant


def test_variant_settings():
    a, c = variant("authors"), variant("corrected")
    # authors' code: fi = fi_r (the gait at t = 0), MFi bottom-right N*m*eye(2), fi0 not wrapped
    assert (a.start, a.head_mass, a.wrap_heading) == ("gait", "robot", False)
    assert (c.start, c.head_mass, c.wrap_heading) == ("straight", "link", True)
    assert PlanarScenario().variant == "authors"
    with pytest.raises(InputError):
        variant("paper")
    with pytest.raises(InputError):
        PlanarScenario(variant="paper")
    with pytest.raises(InputError):
        PlanarVariant("x", start="curled", head_mass="link", wrap_heading=True)


def test_each_variant_integrates_with_its_solver_unless_told():
    # start.mlx: [T, X] = ode15s(@(t, y) snakeEquations...(t, y, param), t, x0), no odeset: RelTol 1e-3, AbsTol 1e-6
    assert (variant("authors").solver, variant("corrected").solver) == (("BDF", 1e-3, 1e-6), ("RK45", 1e-6, 1e-8))
    s = PlanarScenario()
    assert (s.method, s.rtol, s.atol) == ("BDF", 1e-3, 1e-6)
    s = PlanarScenario(variant="corrected")
    assert (s.method, s.rtol, s.atol) == ("RK45", 1e-6, 1e-8)
    s = PlanarScenario(method="DOP853", rtol=1e-9)
    assert (s.method, s.rtol, s.atol) == ("DOP853", 1e-9, 1e-6)  # what is not named stays the variant's


def test_initial_joint_angles_by_hand():
    # α = 20°, δ = 30°: φ_i(0) = 20° sin((i−1) 30°), i = 1..9
    want = [0.0, 10.0, 17.320508, 20.0, 17.320508, 10.0, 0.0, -10.0, -17.320508]
    np.testing.assert_allclose(np.degrees(initial_joint_angles(VARIANTS["authors"], 9, GaitParams())), want,
                               atol=1e-6)
    assert not initial_joint_angles(VARIANTS["corrected"], 9, GaitParams()).any()
