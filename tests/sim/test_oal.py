"""The OAL world: generated model, recorded states vs MuJoCo replay, gait, locomotion signature, halt, CLI."""
import math

import mujoco
import numpy as np
import pytest

from snaketrack.cli import main
from snaketrack.errors import InputError
from snaketrack.io import read_csv_columns, read_json
from snaketrack.models.kinematics import forward_kinematics_np
from snaketrack.models.robot import load_robot
from snaketrack.sim.gait import Gait, GaitParams, gait_time
from snaketrack.sim.mjcf import joint_qpos_addresses
from snaketrack.sim.oal import OALConfig, oal_model, simulate_oal


def _paper_obstacles():
    # Jacobian paper eq. (8): (0.5k + 0.25, 0.1) and (0.5k, -0.1), k = -3..10
    return {(round(0.5 * k + 0.25, 9), 0.1) for k in range(-3, 11)} | {(round(0.5 * k, 9), -0.1) for k in range(-3, 11)}


def _geoms(model, prefix):
    names = [mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_GEOM, g) or "" for g in range(model.ngeom)]
    return [g for g, n in enumerate(names) if n.startswith(prefix)]


@pytest.fixture(scope="module")
def runs():
    """Three 10 s runs shared by the tests below (about 1 s of simulation together)."""
    return {
        "obstacles": simulate_oal(OALConfig()),
        "free": simulate_oal(OALConfig(obstacles=False)),
        "halt": simulate_oal(OALConfig(halt=(5.0, 7.0))),
    }


# ---------------------------------------------------------------- generated model

def test_obstacles_and_friction_in_the_compiled_model():
    cfg = OALConfig()
    model, robot = oal_model(cfg)
    obs = _geoms(model, "obstacle_")
    assert len(obs) == 28
    got = {(round(float(x), 9), round(float(y), 9)) for x, y in model.geom_pos[obs][:, :2]}
    assert got == _paper_obstacles()
    assert np.allclose(model.geom_size[obs][:, 0], 0.05)  # cylinder radius [m]
    assert model.geom_type[obs].tolist() == [mujoco.mjtGeom.mjGEOM_CYLINDER] * 28
    floor = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, "floor")
    snake = _geoms(model, "col_link_")
    assert len(snake) == robot.n_links
    assert model.geom_friction[floor][0] == pytest.approx(cfg.floor_friction)
    assert np.allclose(model.geom_friction[snake][:, 0], cfg.snake_friction)
    assert np.allclose(model.geom_friction[obs][:, 0], cfg.obstacle_friction)
    # MuJoCo uses the larger friction of a pair: snake-floor sees the floor's, snake-obstacle the low one
    assert max(cfg.snake_friction, cfg.floor_friction) == cfg.floor_friction
    assert max(cfg.snake_friction, cfg.obstacle_friction) < cfg.floor_friction
    assert model.opt.cone == mujoco.mjtCone.mjCONE_ELLIPTIC
    assert model.opt.timestep == pytest.approx(1 / 240)
    # a free joint at the root, so the floor carries the weight
    assert model.jnt_type[0] == mujoco.mjtJoint.mjJNT_FREE
    assert len(_geoms(oal_model(OALConfig(obstacles=False))[0], "obstacle_")) == 0


@pytest.mark.parametrize("name", ["planar-snake-11", "arcsnake-4"])
def test_joints_and_actuators_match_the_robot_file(name):
    cfg = OALConfig(robot=name)
    model, robot = oal_model(cfg)
    assert model.nq == 7 + robot.dof and model.nv == 6 + robot.dof and model.nu == robot.dof
    for j, jn in enumerate(robot.joint_names):
        jid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, jn)
        assert jid >= 0
        assert model.jnt_range[jid].tolist() == pytest.approx([robot.lower[j], robot.upper[j]])
        aid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_ACTUATOR, f"motor_{jn}")
        assert aid == j and model.actuator_trnid[aid, 0] == jid
        assert model.actuator_ctrlrange[aid].tolist() == pytest.approx([-cfg.torque_limit, cfg.torque_limit])
        # a plain torque motor: no position gain or kv damping inside MuJoCo
        assert model.actuator_gainprm[aid, 0] == 1.0 and not np.any(model.actuator_biasprm[aid])
    masses = [model.body_mass[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, f"link_{i + 1}")]
              for i in range(robot.n_links)]
    assert masses == pytest.approx(robot.masses.tolist())


def _numpy_chain(robot, q, R0, t0):
    """Independent chain: homogeneous transforms T_{i+1} = T_i · Trans(L_i x) · Rot(axes, q)."""
    def rot(axis, a):
        c, s = math.cos(a), math.sin(a)
        return {"x": np.array([[1, 0, 0], [0, c, -s], [0, s, c]]),
                "y": np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]]),
                "z": np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])}[axis]

    T = np.eye(4)
    T[:3, :3], T[:3, 3] = R0, t0
    frames = [T]
    k = 0
    for i, joint in enumerate(robot.joints):
        step = np.eye(4)
        step[0, 3] = robot.links[i].length
        R = np.eye(3)
        for axis in joint.axes:
            R = R @ rot(axis, q[k])
            k += 1
        step[:3, :3] = R
        T = T @ step
        frames.append(T)
    return np.array(frames)


@pytest.mark.parametrize("name", ["planar-snake-11", "arcsnake-4"])
def test_link_bodies_follow_the_kinematic_chain(name):
    model, robot = oal_model(OALConfig(robot=name))
    data = mujoco.MjData(model)
    rng = np.random.default_rng(7)
    ids = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, f"link_{i + 1}") for i in range(robot.n_links)]
    for _ in range(4):
        q = rng.uniform(robot.lower, robot.upper)
        quat = rng.normal(size=4)
        data.qpos[:3] = rng.normal(size=3)
        data.qpos[3:7] = quat / np.linalg.norm(quat)
        data.qpos[joint_qpos_addresses(model, robot)] = q
        mujoco.mj_kinematics(model, data)
        R0 = data.xmat[ids[0]].reshape(3, 3)
        chain = _numpy_chain(robot, q, R0, data.qpos[:3])
        np.testing.assert_allclose(data.xpos[ids], chain[:, :3, 3], atol=1e-12)
        np.testing.assert_allclose(data.xmat[ids].reshape(-1, 3, 3), chain[:, :3, :3], atol=1e-12)
        fk = forward_kinematics_np(robot, q, R0, data.qpos[:3])
        np.testing.assert_allclose(fk["origins"], data.xpos[ids], atol=1e-12)
        head = data.site_xpos[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, "head_site")]
        mid = chain[-1, :3, 3] + 0.5 * robot.links[-1].length * chain[-1, :3, 0]
        np.testing.assert_allclose(head, mid, atol=1e-12)


# ---------------------------------------------------------------- gait

def test_gait_is_eq9_with_tail_to_head_wave_sign():
    robot = load_robot("planar-snake-11")
    g = Gait(robot, GaitParams(ramp_time=0.0))
    t = np.linspace(0, 3, 50)
    phi, _ = g.reference(t)
    k = np.arange(1, 11)
    np.testing.assert_allclose(phi, np.pi / 3 * np.sin(4 * t[:, None] + np.pi / 3 * k), atol=1e-12)
    # a crest of joint k reappears at joint k-1 (towards the tail, link 1) a moment later
    lag = (np.pi / 3) / 4
    np.testing.assert_allclose(g.reference(t + lag)[0][:, :-1], phi[:, 1:], atol=1e-12)


@pytest.mark.parametrize("kw", [dict(), dict(halt=(1.0, 1.7), resume="phase"), dict(halt=(1.0, 1.7)),
                                dict(ramp_time=0.8, pitch_amplitude=0.2)])
def test_gait_rate_is_the_time_derivative(kw):
    for name in ("planar-snake-11", "arcsnake-4"):
        g = Gait(load_robot(name), GaitParams(**kw))
        t = np.linspace(0.013, 2.9, 400)
        t = t[np.all(np.abs(t[:, None] - np.array([0.8, 1.0, 1.7])) > 2e-3, axis=1)]  # away from kinks/jumps
        h = 1e-6
        fd = (g.reference(t + h)[0] - g.reference(t - h)[0]) / (2 * h)
        np.testing.assert_allclose(g.reference(t)[1], fd, atol=1e-5)


def test_gait_halt_and_resume_modes():
    robot = load_robot("planar-snake-11")
    free = Gait(robot, GaitParams())
    ref = Gait(robot, GaitParams(halt=(5.0, 7.0), resume="reference"))
    pha = Gait(robot, GaitParams(halt=(5.0, 7.0), resume="phase"))
    during = np.linspace(5.0, 6.99, 20)
    for g in (ref, pha):
        phi, phidot = g.reference(during)
        np.testing.assert_allclose(phi, free.reference(np.array([5.0]))[0].repeat(20, 0), atol=0)
        assert not np.any(phidot)
    after = np.linspace(7.0, 10.0, 30)
    np.testing.assert_allclose(ref.reference(after)[0], free.reference(after)[0], atol=0)
    np.testing.assert_allclose(pha.reference(after)[0], free.reference(after - 2.0)[0], atol=0)
    # phase resume is continuous, reference resume jumps
    eps = 1e-9

    def jump(g):
        return np.abs(g.reference(np.array([7.0]))[0] - g.reference(np.array([7.0 - eps]))[0]).max()

    assert jump(pha) < 1e-6 < 0.1 < jump(ref)
    assert gait_time(np.array([6.0]), (5.0, 7.0), "phase")[1].tolist() == [0.0]


def test_two_dof_gait_drives_yaw_and_respects_limits():
    robot = load_robot("arcsnake-4")
    t = np.linspace(0, 5, 300)
    phi, _ = Gait(robot, GaitParams()).reference(t)
    yaw = [i for i, n in enumerate(robot.joint_names) if n.startswith("yaw")]
    pitch = [i for i, n in enumerate(robot.joint_names) if n.startswith("pitch")]
    assert np.abs(phi[:, yaw]).max() > 0.5 and not np.any(phi[:, pitch])
    assert np.all(phi <= robot.upper * 0.95 + 1e-12) and np.all(phi >= robot.lower * 0.95 - 1e-12)
    phi2, _ = Gait(robot, GaitParams(pitch_amplitude=0.1)).reference(t)
    assert np.abs(phi2[:, pitch]).max() == pytest.approx(0.1, abs=1e-3)


def test_bad_settings_raise_input_error():
    for kw in (dict(halt=(7.0, 5.0)), dict(resume="sideways"), dict(dt=-1.0), dict(seed=-1), dict(cone="round")):
        with pytest.raises(InputError):
            OALConfig(**kw)
    with pytest.raises(InputError):
        GaitParams(resume="later")
    with pytest.raises(InputError, match="would never happen"):
        OALConfig(duration=1.0, halt=(5.0, 50.0))


# ---------------------------------------------------------------- recorded states

def test_recorded_states_agree_with_mujoco_replay(runs):
    r = runs["obstacles"]
    model, robot = oal_model(r.config)
    data = mujoco.MjData(model)
    T = len(r.t)
    assert r.t.shape == (T,) and r.phi.shape == (T, 10) and r.theta.shape == (T, 11) and r.qpos.shape == (T, 17)
    np.testing.assert_allclose(r.t[1] - r.t[0], 1 / 240)
    head_id = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, "head_site")
    ids = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, f"link_{i + 1}") for i in range(robot.n_links)]
    for n in range(0, T, 97):
        data.qpos[:] = r.qpos[n]
        mujoco.mj_kinematics(model, data)
        np.testing.assert_allclose(r.head_xy[n], data.site_xpos[head_id][:2], atol=1e-12)
        np.testing.assert_allclose(r.phi[n], r.qpos[n, joint_qpos_addresses(model, robot)], atol=0)
        yaw = np.arctan2(data.xmat[ids][:, 3], data.xmat[ids][:, 0])
        d = np.angle(np.exp(1j * (r.theta[n] - yaw)))
        assert np.abs(d).max() < 0.02  # links stay nearly flat, so link yaw ≈ θ
    np.testing.assert_allclose(np.diff(r.theta, axis=1), r.phi, atol=1e-12)  # φ_i = θ_{i+1} − θ_i
    # speeds are the time derivatives of the recorded positions: MuJoCo's semi-implicit Euler
    # gives q_{n+1} = q_n + dt * v_{n+1} exactly for joints, and up to the rotation of the site offset for the head
    dt = r.config.dt
    fdq = (r.phi[1:] - r.phi[:-1]) / dt
    np.testing.assert_allclose(fdq, r.phidot[1:], atol=1e-6)
    fd = (r.head_xy[1:] - r.head_xy[:-1]) / dt
    assert np.median(np.abs(fd - r.head_vxy[1:])) < 0.05 * np.median(np.abs(r.head_vxy))
    assert np.percentile(np.abs(fd - r.head_vxy[1:]), 99) < 0.1


def test_locomotion_signature(runs):
    go, free = runs["obstacles"].summary(), runs["free"].summary()
    assert go["head_displacement_x_m"] > 1.5  # advances along the obstacle rows
    assert go["head_displacement_m"] > 0 and free["head_displacement_m"] < 0.2 * go["head_displacement_m"]
    # the joints follow the gait in both cases
    assert go["tracking_rms_rad"] < 0.05 and free["tracking_rms_rad"] < 0.05
    assert go["mean_speed_m_s"] > 0.1


def test_halt_stops_the_joints_and_resumes(runs):
    r = runs["halt"]
    before = (r.t > 4.0) & (r.t < 5.0)
    held = (r.t >= 5.25) & (r.t < 7.0)
    moving = np.abs(r.phidot[before]).mean()
    assert moving > 1.0
    assert np.abs(r.phidot[held]).max() < 0.01 * moving
    assert np.abs(r.head_vxy[held]).max() < 1e-2
    assert np.ptp(r.phi_ref[held], axis=0).max() == 0
    after = r.t > 7.5
    assert np.abs(r.phidot[after]).mean() > 0.5 * moving
    x = r.head_xy[:, 0]
    assert x[-1] - x[np.searchsorted(r.t, 7.0)] > 0.2  # advances again after the halt
    # the reference jump at the resume neither bucks the snake off the floor nor throws it out of the channel
    assert r.qpos[:, 2].max() < 0.06 and np.abs(r.head_xy[:, 1]).max() < 0.15


def test_torques_respect_the_motor_torque_speed_line(runs):
    r = runs["halt"]
    ts, w0 = r.config.torque_limit, r.config.motor_speed
    # the torque applied at step n used the speed measured at step n
    hi = np.minimum(ts, ts * (1 - r.phidot / w0))
    lo = np.maximum(-ts, -ts * (1 + r.phidot / w0))
    assert np.all(r.torque <= hi + 1e-12) and np.all(r.torque >= lo - 1e-12)
    assert np.any(np.isclose(r.torque, hi)) or np.any(np.isclose(r.torque, lo))  # the limit was reached


def test_same_seed_same_bytes_and_seed_matters(tmp_path):
    a = simulate_oal(OALConfig(duration=0.5, seed=3))
    b = simulate_oal(OALConfig(duration=0.5, seed=3))
    c = simulate_oal(OALConfig(duration=0.5, seed=4))
    a.write_states_csv(tmp_path / "a.csv")
    b.write_states_csv(tmp_path / "b.csv")
    c.write_states_csv(tmp_path / "c.csv")
    assert (tmp_path / "a.csv").read_bytes() == (tmp_path / "b.csv").read_bytes()
    assert (tmp_path / "a.csv").read_bytes() != (tmp_path / "c.csv").read_bytes()
    np.testing.assert_array_equal(a.qpos, b.qpos)


def test_arcsnake_runs():
    r = simulate_oal(OALConfig(robot="arcsnake-4", duration=1.0))
    assert r.phi.shape == (240, 6) and r.theta.shape == (240, 4)
    assert np.all(np.isfinite(r.qpos)) and np.abs(r.phidot).max() > 0.1


def _base_roll_and_link_heights(res):
    """Base link roll about its own axis [rad] (T,) and every link's axis end points' heights [m] (T, N+1)."""
    model, robot = oal_model(res.config)
    data = mujoco.MjData(model)
    ids = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, f"link_{i + 1}") for i in range(robot.n_links)]
    roll, z = [], []
    for q in res.qpos[::6]:
        data.qpos[:] = q
        mujoco.mj_kinematics(model, data)
        R = data.xmat[ids[0]].reshape(3, 3)
        roll.append(math.atan2(R[2, 1], R[2, 2]))  # rotation about the link's x axis (Z-Y-X Euler roll)
        ends = data.xpos[ids, 2].tolist() + [data.xpos[ids[-1], 2] + robot.links[-1].length * data.xmat[ids[-1]][6]]
        z.append(ends)
    return np.unwrap(np.array(roll)), np.array(z), robot


def test_arcsnake_with_pitch_wave_stays_upright_among_the_posts():
    """The video's 3-D gait (pitch wave 0.15 rad) must crawl, not tumble.

    Physical bounds, independent of the simulator's output: the chain has no roll
    actuator, so lying upright the base roll stays small; a joint end lifted by the
    pitch wave is at most r + L sin(2 A_p) above the floor (twice the amplitude
    allows for tracking error). With round capsules the base rolled over within
    1.2 s here (roll -3 rad, tail 0.17 m up a post).
    """
    amp = 0.15
    res = simulate_oal(OALConfig(robot="arcsnake-4", pitch_amplitude=amp, duration=3.0))
    roll, z, robot = _base_roll_and_link_heights(res)
    assert np.abs(roll).max() < 0.3
    r, L = robot.links[0].radius, robot.links[0].length
    assert z.max() < r + L * math.sin(2 * amp)
    assert z.min() > 0.5 * r  # on (not through) the floor
    assert np.linalg.norm(res.head_xy, axis=1).max() > 0.02  # it moves


# ---------------------------------------------------------------- command

def test_cli_writes_states_summary_and_plot(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["sim", "oal", "--duration", "0.5", "--halt", "0.2:0.3", "--resume", "phase", "--seed", "2",
                 "--out", str(out)]) == 0
    cols = read_csv_columns(out / "states.csv")
    expect = (["t"] + [f"phi_{j}" for j in range(1, 11)] + [f"phidot_{j}" for j in range(1, 11)]
              + [f"theta_{i}" for i in range(1, 12)] + ["head_x", "head_y", "head_vx", "head_vy"])
    assert list(cols) == expect and len(cols["t"]) == 120
    s = read_json(out / "summary.json")
    assert {"head_displacement_m", "mean_speed_m_s"} <= set(s)
    assert s["config"]["halt"] == [0.2, 0.3] and s["config"]["resume"] == "phase" and s["seed"] == 2
    assert (out / "head_path.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    np.testing.assert_allclose(cols["head_x"], simulate_oal(OALConfig(duration=0.5, halt=(0.2, 0.3), resume="phase",
                                                                      seed=2)).head_xy[:, 0])
    assert main(["sim", "oal", "--duration", "0.2", "--no-plot", "--out", str(out)]) == 0
    assert not (out / "head_path.png").exists()  # the earlier run's plot does not stand beside these states

def test_cli_bad_input_is_one_line_and_status_2(tmp_path, capsys):
    assert main(["sim", "oal", "--halt", "7:5", "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--halt" in err[0]
    assert main(["sim", "oal", "--robot", "no-such-robot", "--out", str(tmp_path / "y")]) == 2
