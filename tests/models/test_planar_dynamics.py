"""Planar snake dynamics against independent physics.

Oracles: Lagrange's equations built numerically from the kinetic energy of a
link chain written independently of the model's matrices; the head and the
centre-of-mass model simulating the same robot; friction power (kinetic
energy can only fall without input); momentum balance under isotropic
friction (no net propulsion) against anisotropic friction (propulsion).
"""
from __future__ import annotations

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from snaketrack.errors import InputError
from snaketrack.models.planar_dynamics import (
    PlanarSnakeModel,
    SnakeParams,
    design_to_paper_joints,
    paper_to_design_joints,
)

P = SnakeParams()  # N = 10, m = 1 kg, l = 0.07 m, c_t = 1, c_n = 10


# ----------------------------------------------------------------- oracle
def chain_positions(r: np.ndarray, params: SnakeParams, reference: str) -> np.ndarray:
    """Link centres (N, 2) from r = [θ (N), p (2)] by walking the chain tail to head."""
    n, l = params.n_links, params.half_length_m
    th, p = r[:n], r[n:]
    xy = np.zeros((n, 2), dtype=np.result_type(r, float))
    for i in range(n - 1):
        xy[i + 1] = xy[i] + l * np.array([np.cos(th[i]) + np.cos(th[i + 1]), np.sin(th[i]) + np.sin(th[i + 1])])
    anchor = xy.mean(axis=0) if reference == "com" else xy[-1]
    return xy - anchor + p


def complex_step_jacobian(fun, r, h=1e-30):
    """Exact (to rounding) derivative of an analytic function: Im f(r + i h e_j) / h."""
    cols = [fun(r + 1j * h * e).imag / h for e in np.eye(len(r))]
    return np.stack(cols, axis=-1)


def jacobian(fun, r, h=1e-6):
    cols = []
    for j in range(len(r)):
        d = np.zeros_like(r)
        d[j] = h
        cols.append((fun(r + d) - fun(r - d)) / (2 * h))
    return np.stack(cols, axis=-1)


def lagrange_accelerations(r, rd, tau, params, reference):
    """r̈ from M(r) r̈ + c(r, ṙ) = Q_friction + Q_torque, all built numerically."""
    n, m, J = params.n_links, params.mass_kg, params.inertia

    def jac_pos(rr):  # (N, 2, N+2)
        return complex_step_jacobian(lambda x: chain_positions(x, params, reference), rr)

    def mass(rr):
        Jp = jac_pos(rr)
        M = m * np.einsum("iak,ial->kl", Jp, Jp)
        M[:n, :n] += J * np.eye(n)
        return M

    h = 1e-5
    M = mass(r)
    Mdot = (mass(r + h * rd) - mass(r - h * rd)) / (2 * h)
    grad = np.array(
        [
            (rd @ mass(r + h * e) @ rd - rd @ mass(r - h * e) @ rd) / (2 * h)
            for e in np.eye(len(r))
        ]
    )
    c = Mdot @ rd - 0.5 * grad
    # friction, written per link in its own frame: −c_t v_t t̂ − c_n v_n n̂
    Jp = jac_pos(r)
    v = Jp @ rd  # (N, 2)
    th = r[:n]
    t_hat = np.stack([np.cos(th), np.sin(th)], axis=1)
    n_hat = np.stack([-np.sin(th), np.cos(th)], axis=1)
    vt = (v * t_hat).sum(1)
    vn = (v * n_hat).sum(1)
    f = -params.c_t * vt[:, None] * t_hat - params.c_n * vn[:, None] * n_hat
    Q = np.einsum("iak,ia->k", Jp, f)
    # joint i: +τ_i on link i, −τ_i on link i+1 (drives θ_i − θ_{i+1})
    Q[: n - 1] += tau
    Q[1:n] -= tau
    return np.linalg.solve(M, Q - c)


def to_r(model: PlanarSnakeModel, q: np.ndarray) -> np.ndarray:
    return np.concatenate([model.link_angles(q), q[-2:]])


@pytest.mark.parametrize("reference", ["com", "head"])
def test_accelerations_match_lagrange_oracle(reference):
    rng = np.random.default_rng(1)
    model = PlanarSnakeModel(P, reference)
    for _ in range(3):
        q = rng.normal(size=model.n_q) * 0.6
        qd = rng.normal(size=model.n_q) * 0.5
        tau = rng.normal(size=model.n_joints) * 0.05
        qdd = model.accelerations(q, qd, tau=tau)
        want = lagrange_accelerations(to_r(model, q), to_r(model, qd), tau, P, reference)
        got = np.concatenate([model.H @ qdd[: model.n_links], qdd[-2:]])
        np.testing.assert_allclose(got, want, rtol=1e-7, atol=1e-8 * np.abs(want).max())


def test_link_positions_match_chain():
    rng = np.random.default_rng(2)
    for ref in ("com", "head"):
        model = PlanarSnakeModel(P, ref)
        q = rng.normal(size=model.n_q)
        np.testing.assert_allclose(model.link_positions(q), chain_positions(to_r(model, q), P, ref), atol=1e-12)
        qd = rng.normal(size=model.n_q)
        fd = jacobian(model.link_positions, q) @ qd
        np.testing.assert_allclose(model.link_velocities(q, qd), fd, atol=1e-8)


def test_pfl_imposes_joint_acc_and_is_consistent_with_torques():
    rng = np.random.default_rng(3)
    for ref in ("com", "head"):
        model = PlanarSnakeModel(P, ref)
        q = rng.normal(size=model.n_q) * 0.5
        qd = rng.normal(size=model.n_q) * 0.5
        u = rng.normal(size=model.n_joints)
        qdd = model.accelerations(q, qd, joint_acc=u)
        np.testing.assert_array_equal(qdd[: model.n_joints], u)
        # the torques that realise it, fed back through the full dynamics, give the same q̈
        tau = model.joint_torques(q, qd, qdd)
        np.testing.assert_allclose(model.accelerations(q, qd, tau=tau), qdd, atol=1e-9)


def test_batched_equals_loop():
    rng = np.random.default_rng(4)
    model = PlanarSnakeModel(P, "head")
    Q = rng.normal(size=(4, model.n_q))
    Qd = rng.normal(size=(4, model.n_q))
    U = rng.normal(size=(4, model.n_joints))
    batch = model.accelerations(Q, Qd, joint_acc=U)
    loop = np.stack([model.accelerations(q, qd, joint_acc=u) for q, qd, u in zip(Q, Qd, U)])
    np.testing.assert_allclose(batch, loop, atol=1e-12)


# --------------------------------------------------- head model == CoM model
def _integrate(model, q0, qd0, input_fn, mode, t_end, t_eval):
    nq = model.n_q

    def rhs(t, y):
        q, qd = y[:nq], y[nq:]
        u = input_fn(t, q, qd)
        kw = {"tau": u} if mode == "tau" else {"joint_acc": u}
        return np.concatenate([qd, model.accelerations(q, qd, **kw)])

    sol = solve_ivp(rhs, (0, t_end), np.concatenate([q0, qd0]), rtol=1e-10, atol=1e-12, t_eval=t_eval, method="DOP853")
    assert sol.success
    return sol.y.T


@pytest.mark.parametrize("mode", ["joint_acc", "tau"])
def test_head_and_com_models_give_same_link_positions(mode):
    """Same robot, same initial state, same joint input: same links to integration tolerance."""
    mc, mh = PlanarSnakeModel(P, "com"), PlanarSnakeModel(P, "head")
    k = mc.n_joints
    rng = np.random.default_rng(5)
    theta0 = np.cumsum(rng.normal(size=mc.n_links) * 0.2)
    qc0, qdc0 = mc.state_from(theta0, np.array([0.3, -0.2]))
    qdc0[:k] = rng.normal(size=k) * 0.3
    qdc0[-2:] = [0.05, 0.02]
    # same physical state in head coordinates
    qh0, qdh0 = qc0.copy(), qdc0.copy()
    qh0[-2:] = mc.link_positions(qc0)[-1]
    qdh0[-2:] = mc.link_velocities(qc0, qdc0)[-1]
    np.testing.assert_allclose(mh.link_positions(qh0), mc.link_positions(qc0), atol=1e-14)

    w, ph = 0.9, np.arange(k) * 0.5
    if mode == "joint_acc":
        # a feed-forward joint trajectory (no state feedback)
        def inp(t, q, qd):
            return -0.35 * w * w * np.sin(w * t + ph)
    else:
        # the same PD torque law on the shared joint coordinates
        def inp(t, q, qd):
            return 0.05 * (0.35 * np.sin(w * t + ph) - q[:k]) - 0.02 * qd[:k]

    t_eval = np.linspace(0, 15, 31)
    yc = _integrate(mc, qc0, qdc0, inp, mode, 15, t_eval)
    yh = _integrate(mh, qh0, qdh0, inp, mode, 15, t_eval)
    xc = mc.link_positions(yc[:, : mc.n_q])
    xh = mh.link_positions(yh[:, : mh.n_q])
    assert np.abs(xc - xc[0]).max() > 0.05  # the robot did move
    np.testing.assert_allclose(xh, xc, atol=1e-7)


# ------------------------------------------------------------- energy
@pytest.mark.parametrize("reference", ["com", "head"])
def test_kinetic_energy_never_increases_without_input(reference):
    model = PlanarSnakeModel(P, reference)
    rng = np.random.default_rng(6)
    q0 = rng.normal(size=model.n_q) * 0.4
    qd0 = rng.normal(size=model.n_q) * 1.0
    t_eval = np.linspace(0, 2.0, 401)
    y = _integrate(model, q0, qd0, lambda t, q, qd: np.zeros(model.n_joints), "tau", 2.0, t_eval)
    ke = model.kinetic_energy(y[:, : model.n_q], y[:, model.n_q :])
    assert ke[-1] < 0.5 * ke[0]  # friction dissipated a good part of it
    assert np.all(np.diff(ke) <= 1e-10 * ke[0])
    # and the instantaneous rate (work of the friction forces) is never positive
    Q, Qd = y[:, : model.n_q], y[:, model.n_q :]
    Qdd = model.accelerations(Q, Qd)
    h = 1e-6
    dke = (model.kinetic_energy(Q + h * Qd, Qd + h * Qdd) - model.kinetic_energy(Q - h * Qd, Qd - h * Qdd)) / (2 * h)
    assert np.all(dke <= 1e-8)


# ------------------------------------------------------------- friction and propulsion
def _undulate(c_t: float, c_n: float, cycles: int = 4):
    params = SnakeParams(c_t=c_t, c_n=c_n)
    model = PlanarSnakeModel(params, "com")
    k = model.n_joints
    alpha, w, delta = np.radians(30), np.radians(50), np.radians(30)
    ph = np.arange(k) * delta
    # exact tracking of φ = α sin(ωt + (i−1)δ) by its second derivative; start on the gait
    q0, qd0 = model.state_from(np.zeros(model.n_links), np.zeros(2))
    q0[:k] = alpha * np.sin(ph)
    qd0[:k] = alpha * w * np.cos(ph)
    period = 2 * np.pi / w
    t_eval = np.array([period, (cycles + 1) * period])
    y = _integrate(model, q0, qd0, lambda t, q, qd: -alpha * w * w * np.sin(w * t + ph), "joint_acc", t_eval[-1],
                   t_eval)
    return model, y


def test_isotropic_friction_gives_no_net_propulsion():
    model, y = _undulate(5.0, 5.0)
    com = model.com_position(y[:, : model.n_q])
    moved = np.linalg.norm(com[1] - com[0])
    assert moved < 1e-6  # Σ f = −c Σ v_i = −c N ṗ: the centre of mass cannot move


def test_anisotropic_friction_propels_towards_the_head():
    model, y = _undulate(1.0, 10.0)
    q = y[:, : model.n_q]
    com = model.com_position(q)
    step = com[1] - com[0]
    assert np.linalg.norm(step) > 0.1  # several cm per cycle
    heading = model.heading(q[0])
    assert step @ np.array([np.cos(heading), np.sin(heading)]) > 0.8 * np.linalg.norm(step)


# ------------------------------------------------------------- conventions and input checks
def test_joint_convention_conversion_matches_design_definition():
    model = PlanarSnakeModel(P, "com")
    rng = np.random.default_rng(7)
    q = rng.normal(size=model.n_q)
    th = model.link_angles(q)
    np.testing.assert_allclose(paper_to_design_joints(q[: model.n_joints]), th[1:] - th[:-1], atol=1e-12)
    np.testing.assert_allclose(design_to_paper_joints(th[1:] - th[:-1]), th[:-1] - th[1:], atol=1e-12)


def test_bad_inputs_raise_input_error():
    with pytest.raises(InputError):
        PlanarSnakeModel(P, "tail")
    with pytest.raises(InputError):
        SnakeParams(n_links=1)
    with pytest.raises(InputError):
        SnakeParams(c_n=-1.0)
    model = PlanarSnakeModel(P, "com")
    with pytest.raises(InputError):
        model.accelerations(np.zeros(5), np.zeros(5))
    with pytest.raises(InputError):
        model.accelerations(np.zeros(12), np.zeros(12), joint_acc=np.zeros(3))


@pytest.mark.parametrize("reference, head_mass", [("com", "link"), ("head", "link"), ("head", "robot")])
def test_fast_pfl_path_equals_generic_block_solve(reference, head_mass):
    rng = np.random.default_rng(8)
    model = PlanarSnakeModel(P, reference, head_mass=head_mass)
    for _ in range(5):
        q = rng.normal(size=model.n_q)
        qd = rng.normal(size=model.n_q)
        u = rng.normal(size=model.n_joints)
        fast = model.accelerations(q, qd, joint_acc=u)
        generic = model.accelerations(q, qd, joint_acc=u, fast=False)
        np.testing.assert_allclose(fast, generic, rtol=1e-10, atol=1e-10)


def test_passive_joints_get_zero_torque():
    """A joint marked passive is a free hinge: the torques that realise the motion vanish there."""
    rng = np.random.default_rng(9)
    for ref in ("com", "head"):
        model = PlanarSnakeModel(P, ref)
        q = rng.normal(size=model.n_q) * 0.5
        qd = rng.normal(size=model.n_q) * 0.5
        u = rng.normal(size=model.n_joints)
        passive = np.zeros(model.n_joints, dtype=bool)
        passive[[2, 4]] = True
        qdd = model.accelerations(q, qd, joint_acc=u, passive=passive)
        np.testing.assert_array_equal(qdd[: model.n_joints][~passive], u[~passive])
        tau = model.joint_torques(q, qd, qdd)
        np.testing.assert_allclose(tau[passive], 0.0, atol=1e-10)
        # and the full torque-driven dynamics with those torques reproduce the motion
        np.testing.assert_allclose(model.accelerations(q, qd, tau=tau), qdd, atol=1e-9)


def test_head_mass_robot_puts_n_m_on_the_translational_rows():
    """Authors' code: M̄'s bottom-right block is N m I₂ (eq. 24 prints m I₂); nothing else changes, so
    with the same joint accelerations θ̈_N is unchanged and p̈ is divided by N (N m p̈ = the same forces)."""
    rng = np.random.default_rng(10)
    link = PlanarSnakeModel(P, "head", head_mass="link")
    robot = PlanarSnakeModel(P, "head", head_mass="robot")
    n = P.n_links
    q = rng.normal(size=n + 2) * 0.4
    qd = rng.normal(size=n + 2) * 0.4
    Ml, nl = link.terms(q, qd)
    Mr, nr = robot.terms(q, qd)
    assert Ml[n, n] == Ml[n + 1, n + 1] == 1.0
    assert Mr[n, n] == Mr[n + 1, n + 1] == 10.0  # N m = 10 × 1 kg
    Mr[n, n] = Mr[n + 1, n + 1] = 1.0
    np.testing.assert_array_equal(Mr, Ml)
    np.testing.assert_array_equal(nr, nl)
    u = rng.normal(size=n - 1)
    al = link.accelerations(q, qd, joint_acc=u)
    ar = robot.accelerations(q, qd, joint_acc=u)
    np.testing.assert_allclose(ar[:n], al[:n], rtol=1e-12)
    np.testing.assert_allclose(ar[n:], al[n:] / 10.0, rtol=1e-12)
    with pytest.raises(InputError):
        PlanarSnakeModel(P, "head", head_mass="whole")
