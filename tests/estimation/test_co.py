"""CO estimator: the closed form against cvxpy's solution of problem (5), and its halt options."""
import numpy as np
import pytest

from snaketrack.errors import InputError
from snaketrack.estimation.co import COConfig, COEstimator, CvxpyCO, broyden_update


@pytest.mark.parametrize("n_joints", [1, 3, 10])
def test_closed_form_equals_cvxpy(n_joints):
    rng = np.random.default_rng(n_joints)
    ref = CvxpyCO(n_joints)
    for _ in range(5):
        J = rng.normal(0, 0.3, (2, n_joints))
        phidot = rng.normal(0, 3, n_joints)
        rdot = rng.normal(0, 0.5, 2)
        expected = ref.solve(J, phidot, rdot)
        np.testing.assert_allclose(broyden_update(J, phidot, rdot), expected, atol=1e-6, rtol=0)


def test_closed_form_equals_rebuilt_cvxpy_problem_with_other_solver():
    rng = np.random.default_rng(7)
    ref = CvxpyCO(5, solver="OSQP", parametrised=False, eps_abs=1e-10, eps_rel=1e-10, polish=True)
    J, phidot, rdot = rng.normal(size=(2, 5)), rng.normal(size=5), rng.normal(size=2)
    np.testing.assert_allclose(broyden_update(J, phidot, rdot), ref.solve(J, phidot, rdot), atol=1e-6)


def test_closed_form_is_feasible_and_minimal():
    rng = np.random.default_rng(1)
    J, phidot, rdot = rng.normal(size=(2, 6)), rng.normal(size=6), rng.normal(size=2)
    J1 = broyden_update(J, phidot, rdot)
    np.testing.assert_allclose(J1 @ phidot, rdot, atol=1e-12)
    # any other feasible update: J1 + N with N phidot = 0 has a larger change
    for _ in range(20):
        N = rng.normal(size=(2, 6))
        N -= np.outer(N @ phidot, phidot) / (phidot @ phidot)
        assert np.linalg.norm(J1 + N - J) >= np.linalg.norm(J1 - J)


def test_batched_closed_form_matches_loop():
    rng = np.random.default_rng(2)
    J, phidot, rdot = rng.normal(size=(7, 2, 4)), rng.normal(size=(7, 4)), rng.normal(size=(7, 2))
    out = broyden_update(J, phidot, rdot)
    for b in range(7):
        np.testing.assert_allclose(out[b], broyden_update(J[b], phidot[b], rdot[b]), rtol=1e-14)


def test_zero_phidot_leaves_estimate_unchanged_and_cvxpy_finds_it_infeasible():
    J = np.ones((2, 3))
    np.testing.assert_array_equal(broyden_update(J, np.zeros(3), np.array([0.1, 0.2])), J)
    assert CvxpyCO(3).solve(J, np.zeros(3), np.array([0.1, 0.2])) is None


def test_estimator_with_cvxpy_solver_matches_closed_form_over_a_sequence():
    rng = np.random.default_rng(3)
    a, b = COEstimator(4), COEstimator(4, COConfig(solver="cvxpy"))
    for _ in range(15):
        p, r = rng.normal(size=4), rng.normal(size=2)
        np.testing.assert_allclose(a.predict(p), b.predict(p), atol=1e-6)
        a.update(p, r)
        b.update(p, r)
    np.testing.assert_allclose(a.jacobian, b.jacobian, atol=1e-6)
    assert a.covariance is None


def _halt_sequence(rng, J=4, T=400, still=(100, 300), jitter=1e-3, noise=1e-3):
    Jt = rng.normal(0, 0.2, (2, J))
    phidot = rng.normal(0, 3, (T, J))
    phidot[still[0]:still[1]] = rng.normal(0, jitter, (still[1] - still[0], J))
    rdot = phidot @ Jt.T + rng.normal(0, noise, (T, 2))
    return Jt, phidot, rdot


def test_paper_behaviour_diverges_during_a_noisy_halt_and_guard_prevents_it():
    from snaketrack.estimation.kf import KalmanJacobianEstimator

    rng = np.random.default_rng(4)
    Jt, phidot, rdot = _halt_sequence(rng, jitter=1e-3, noise=1e-2)
    plain, guarded, kf = COEstimator(4), COEstimator(4, COConfig(min_phidot=0.05)), KalmanJacobianEstimator(4)
    for n in range(300):
        for e in (plain, guarded, kf):
            e.update(phidot[n], rdot[n])
        if n == 99:
            before = guarded.jacobian
            assert np.linalg.norm(plain.jacobian - Jt) < 0.1 * np.linalg.norm(Jt)
    # each halted step sets J along phidot to rdot/|phidot| ~ noise/jitter: far from the truth
    assert np.linalg.norm(plain.jacobian - Jt) > 5 * np.linalg.norm(Jt)
    np.testing.assert_array_equal(guarded.jacobian, before)
    # the Kalman filter weighs the near-zero-phidot measurements by their information: it stays put
    assert np.linalg.norm(kf.jacobian - Jt) < 0.1 * np.linalg.norm(Jt)


def test_reset_after_halt_resets_once_at_resume():
    rng = np.random.default_rng(5)
    Jt, phidot, rdot = _halt_sequence(rng)
    est = COEstimator(4, COConfig(reset_after_halt=True, halt_speed=0.05, halt_min_steps=24))
    for n in range(301):
        est.update(phidot[n], rdot[n])
        if n == 299:
            assert est.resets == 0
    assert est.resets == 1
    # after the reset (J = 0) and one update, J phidot_300 reproduces rdot_300
    np.testing.assert_allclose(est.jacobian @ phidot[300], rdot[300], atol=1e-12)
    assert np.linalg.matrix_rank(est.jacobian) == 1


def test_short_pause_is_not_a_halt():
    est = COEstimator(2, COConfig(reset_after_halt=True, halt_min_steps=10))
    for _ in range(5):
        est.update(np.zeros(2), np.zeros(2))
    est.update(np.ones(2), np.ones(2))
    assert est.resets == 0


def test_input_errors():
    with pytest.raises(InputError, match="phidot"):
        COEstimator(3).update(np.zeros(4), np.zeros(2))
    with pytest.raises(InputError, match="solver"):
        COEstimator(3, COConfig(solver="magic"))
    with pytest.raises(InputError, match="j0"):
        COEstimator(3, COConfig(j0=np.zeros((3, 2))))
