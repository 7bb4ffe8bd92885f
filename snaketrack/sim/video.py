"""Synthetic field video of a snake robot with ground truth, rendered by MuJoCo.

Pipeline (one call of :func:`~snaketrack.sim.video_dataset.render_video`;
:class:`VideoRenderer` renders steps 1–5 frame by frame):

1. **Motion**: the obstacle-aided-locomotion run of :mod:`snaketrack.sim.oal`
   (``simulate_oal``; the same physics for every robot; 2-DOF robots such as
   ``arcsnake-4`` get a small pitch wave, ``VideoConfig.pitch_amplitude``).
   The clip starts ``start_time`` seconds into the run (after the gait's
   amplitude ramp) and frame i shows the physics step nearest to
   ``start_time + i / fps`` (exact when fps divides 240).
2. **World**: the same MJCF as the physics (``oal_world_xml``), dressed by
   :mod:`snaketrack.sim.scene` (textured ground, moving sun with shadows,
   distractors). Only static things are added, so the recorded ``qpos``
   replays as it is (``mj_forward``, no stepping).
   With ``distractors`` (:mod:`snaketrack.sim.lab`: people's legs, a chair, a
   tether, a door frame) their mocap bodies are added too and posed every
   frame; they are not robot geoms. The ``lab`` scene is an office floor:
   carpet, no rocks or sticks, all four lab distractors, the ``low-handheld`` camera.
3. **Camera**: :mod:`snaketrack.sim.camera_path` (static / handheld / drone / low-handheld),
   a MuJoCo camera whose pose is set every frame; ``K`` from its ``fovy``.
   MuJoCo's camera looks along its −z with
   y up, so its rotation is ``R_wc · diag(1, −1, −1)``.
4. **Render**: RGB (4× multisampled) and a segmentation render with MuJoCo's
   ``Renderer`` (headless, ``MUJOCO_GL=egl``); the mask is every pixel whose
   nearest surface is one of the robot's *visual* geoms
   (``robot_geom_ids``): the hard-edged, visible silhouette (obstacles in
   front of the robot hide it in the mask too; distractors never touch it).
5. **Degradations** (:func:`~snaketrack.sim.degrade.degrade`): camera motion blur (a line kernel
   along the image motion of the ground point at the image centre, times
   the exposure fraction), the robot's own motion blur (each link blurred
   along its image motion between the neighbouring frames and composited
   over the camera-blurred image), a slight defocus, vignetting, white balance,
   signal-dependent sensor noise and a first JPEG compression at a random
   quality (the dataset writer stores the result as JPEG again, quality 92,
   as a re-encoded video would). The mask and truth are not degraded.
6. **Output** (:mod:`snaketrack.sim.video_dataset`):
   :class:`~snaketrack.datasets.layout.DatasetWriter` (``frames/``,
   ``masks/``, ``meta.json``, ``truth.jsonl``; atomic, resumable), then
   ``video.mp4`` and ``contact_sheet.png`` (mask outline in cyan, the truth's
   link centres projected with ``K`` in red).

Truth (one JSON object a frame, docs/conventions.md): ``frame``, ``t`` (s from the
first frame), ``sim_time`` (s into the physics run), ``joint_angles`` (rad,
robot file order), ``base_position_cam`` / ``base_quat_cam`` (link 1's frame
in the OpenCV camera frame, quaternion w, x, y, z), ``head_position_cam``,
``base_position_world``, ``base_quat_world``, ``head_position_world`` (the
head point: centre of the head link's axis), ``camera_position_world``,
``camera_quat_world`` (rotation ``R_wc`` of the OpenCV camera frame in the
world), ``mask_pixels``, ``body_width_px`` (mask area / projected axis length).

Randomness: every random choice comes from ``seed`` and, for per-frame
noise, from (seed, frame index), so the same seed gives the same bytes and a
resumed run continues exactly where it stopped.
"""
from __future__ import annotations

import math
import os
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Optional

import numpy as np

from snaketrack.errors import InputError
from snaketrack.models.robot import load_robot
from snaketrack.sim.camera_path import SCENES, CameraPath, camera_path, project
from snaketrack.sim.degrade import Degradation, clip_settings, degrade
from snaketrack.sim.lab import DISTRACTORS, LabProps, add_lab_bodies, add_room, lab_look
from snaketrack.sim.mjcf import joint_qpos_addresses, robot_geom_ids
from snaketrack.sim.scene import LightSchedule, SceneConfig, dress_scene

os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("PYOPENGL_PLATFORM", os.environ["MUJOCO_GL"])

# the camera paths, and ``lab``: an office floor seen by the low handheld camera, with the lab distractors
VIDEO_SCENES = SCENES + ("lab",)


@dataclass(frozen=True)
class VideoConfig:
    """A synthetic video.

    scene: ``static``, ``handheld``, ``drone``, ``low-handheld`` (camera paths) or ``lab`` (the
        ``low-handheld`` camera over office carpet with every lab distractor); default ``drone``.
    robot: shipped robot name or a robot YAML path; default ``planar-snake-11``.
    frames: number of frames; default 300.
    seed: seeds the physics, the scene, the camera path and the noise; default 0.
    width: image width [px], 32..1920; default 640.
    height: image height [px], 32..1080; default 360.
    fps: frame rate [1/s], at most 240; default 30.
    obstacles: the OAL posts (and their physics), else an empty floor; default True.
    start_time: time into the physics run of the first frame [s]; default 1.
    pitch_amplitude: pitch wave for robots with 2-DOF joints [rad]; default 0.15.
    target_width_px: the body's nominal width in the image [px], sets the focal length; default 11.
    scene_config: ground, sun and distractors (:class:`~snaketrack.sim.scene.SceneConfig`); default SceneConfig().
    degradation: image degradations (:class:`~snaketrack.sim.degrade.Degradation`); default Degradation().
    distractors: lab distractors beside the robot, of :data:`~snaketrack.sim.lab.DISTRACTORS`
        (None: the scene's own, all of them for ``lab`` and none otherwise).
    """

    scene: str = "drone"
    robot: str = "planar-snake-11"
    frames: int = 300
    seed: int = 0
    width: int = 640
    height: int = 360
    fps: float = 30.0
    obstacles: bool = True
    start_time: float = 1.0
    pitch_amplitude: float = 0.15
    target_width_px: float = 11.0
    scene_config: SceneConfig = field(default_factory=SceneConfig)
    degradation: Degradation = field(default_factory=Degradation)
    distractors: Optional[tuple] = None

    def __post_init__(self) -> None:
        if self.scene not in VIDEO_SCENES:
            raise InputError(f"scene {self.scene!r}; expected one of {', '.join(VIDEO_SCENES)}")
        if self.distractors is not None:
            bad = [k for k in self.distractors if k not in DISTRACTORS]
            if bad:
                raise InputError(f"distractors {', '.join(map(str, bad))}; expected some of {', '.join(DISTRACTORS)}")
            object.__setattr__(self, "distractors", tuple(k for k in DISTRACTORS if k in self.distractors))
        for name in ("frames", "width", "height"):
            v = getattr(self, name)
            if not isinstance(v, (int, np.integer)) or v < 1:
                raise InputError(f"{name} = {v!r}; expected a positive integer")
        if self.width < 32 or self.height < 32 or self.width > 1920 or self.height > 1080:
            raise InputError(f"image size {self.width}x{self.height}; expected 32..1920 x 32..1080 px")
        if not (isinstance(self.fps, (int, float)) and 0 < self.fps <= 240):
            raise InputError(f"fps = {self.fps!r}; expected 0 < fps <= 240")
        if not isinstance(self.seed, (int, np.integer)) or self.seed < 0:
            raise InputError(f"seed = {self.seed!r}; expected a non-negative integer")
        if not (self.start_time >= 0):
            raise InputError(f"start_time = {self.start_time!r} s; expected >= 0")
        if not (0.5 <= self.target_width_px <= 200):
            raise InputError(f"body width {self.target_width_px!r} px (target_width_px, --body-width-px); "
                             "expected 0.5..200")


    @property
    def lab_distractors(self) -> tuple:
        """The distractors this video shows: ``distractors``, or the scene's own."""
        if self.distractors is not None:
            return self.distractors
        return DISTRACTORS if self.scene == "lab" else ()

    @property
    def camera(self) -> str:
        """The camera path's name (:data:`~snaketrack.sim.camera_path.SCENES`)."""
        return "low-handheld" if self.scene == "lab" else self.scene

    @property
    def dressing(self) -> SceneConfig:
        """The scene dressing: ``scene_config``, for ``lab`` with carpet and no rocks or sticks unless set."""
        sc = self.scene_config
        if self.scene != "lab":
            return sc
        return replace(sc, ground=sc.ground or "carpet", rocks=0 if sc.rocks is None else sc.rocks,
                       sticks=0 if sc.sticks is None else sc.sticks)


@dataclass(frozen=True)
class Motion:
    """Recorded robot motion at the frame times.

    times: (T,) frame times from the first frame [s]; sim_times: (T,) times in the physics run [s].
    qpos: (T, nq) MuJoCo qpos per frame. source: how it was made.
    xml: the MJCF of the physics world the motion was recorded in.
    """

    times: np.ndarray
    sim_times: np.ndarray
    qpos: np.ndarray
    source: str
    xml: str


def robot_motion(config: VideoConfig) -> Motion:
    """Simulate the OAL world and pick the physics steps at the frame times."""
    # deferred: the module imports without torch (`snaketrack sim video --help` reads its scenes)
    from snaketrack.sim.oal import OALConfig, oal_world_xml, simulate_oal

    robot = load_robot(config.robot)
    pitch = 0.0 if all(len(j.axes) == 1 for j in robot.joints) else config.pitch_amplitude
    dt = 1 / 240
    duration = config.start_time + (config.frames - 1) / config.fps + 2 * dt
    oal = OALConfig(duration=duration, dt=dt, obstacles=config.obstacles, seed=config.seed,
                    robot=config.robot, pitch_amplitude=pitch)
    res = simulate_oal(oal)
    want = config.start_time + np.arange(config.frames) / config.fps
    k = np.clip(np.round(want / dt).astype(int), 0, len(res.t) - 1)
    sim_t = res.t[k]
    return Motion(times=sim_t - sim_t[0], sim_times=sim_t, qpos=res.qpos[k].copy(),
                  source=f"simulate_oal(robot={config.robot}, obstacles={config.obstacles}, seed={config.seed}, "
                         f"pitch_amplitude={pitch})",
                  xml=oal_world_xml(oal))


def _mat2quat(R: np.ndarray) -> np.ndarray:
    import mujoco  # deferred: the module imports without MuJoCo

    q = np.empty(4)
    mujoco.mju_mat2Quat(q, np.ascontiguousarray(R, dtype=float).reshape(9))
    return -q if q[0] < 0 else q


class _World:
    """The dressed, compiled world with the robot's bookkeeping."""

    def __init__(self, config: VideoConfig, motion: Motion):
        import mujoco  # deferred: the module imports without MuJoCo

        self.robot = load_robot(config.robot)
        root = ET.fromstring(motion.xml)
        # where the robot goes: (T * N, 2) axis points, for distractor placement and framing
        base = mujoco.MjModel.from_xml_string(motion.xml)
        d = mujoco.MjData(base)
        self.link_ids = np.array([mujoco.mj_name2id(base, mujoco.mjtObj.mjOBJ_BODY, f"link_{i + 1}")
                                  for i in range(self.robot.n_links)])
        pts = []
        L = self.robot.lengths
        for q in motion.qpos:
            d.qpos[:] = q
            mujoco.mj_kinematics(base, d)
            o = d.xpos[self.link_ids]
            x = d.xmat[self.link_ids].reshape(-1, 3, 3)[:, :, 0]
            e = o + x * L[:, None]
            pts.append(np.concatenate([o, 0.5 * (o + e), e[-1:]], axis=0))
        self.axis_points = np.array(pts)  # (T, 2N+1, 3)
        with tempfile.TemporaryDirectory(prefix="snaketrack-tex-") as tex:
            self.dressing = dress_scene(root, tex, self.axis_points[:, :, :2].reshape(-1, 2),
                                        config.dressing, seed=config.seed,
                                        variant=VIDEO_SCENES.index(config.scene))
            self.look = lab_look(config.seed, self.robot.visual.rgba)
            add_lab_bodies(root, config.lab_distractors, self.look, tex)
            if config.scene == "lab":
                add_room(root, self.axis_points[:, :, :2].reshape(-1, 2), config.seed)
            world = root.find("worldbody")
            ET.SubElement(world, "camera", name="video", mode="fixed", pos="0 0 3", quat="1 0 0 0", fovy="45")
            vis = root.find("visual").find("global")
            vis.set("offwidth", str(max(config.width, 640)))
            vis.set("offheight", str(max(config.height, 480)))
            ET.indent(root)
            self.model = mujoco.MjModel.from_xml_string(ET.tostring(root, encoding="unicode"))
        self.data = mujoco.MjData(self.model)
        self.cam = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_CAMERA, "video")
        self.head_site = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_SITE, "head_site")
        self.robot_geoms = robot_geom_ids(self.model, self.robot)
        links = [mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_BODY, f"link_{i + 1}")
                 for i in range(self.robot.n_links)]
        self.model_link_ids = np.array(links)  # the links' body ids in the dressed model
        self.geom_link = np.full(self.model.ngeom, -1, dtype=int)
        for g in self.robot_geoms:
            self.geom_link[g] = links.index(int(self.model.geom_bodyid[g]))
        self.qadr = joint_qpos_addresses(self.model, self.robot)
        vr = np.array(self.robot.visual.body_radius)
        self.body_diameter = float(2 * vr.mean())


def _centre_flow(path: CameraPath, i: int, K: np.ndarray) -> np.ndarray:
    """Image motion [px per frame] of the ground point seen at the image centre in frame i."""
    j = i - 1 if i > 0 else min(1, len(path) - 1)
    if j == i:
        return np.zeros(2)
    c, R = path.positions[i], path.rotations[i]
    ray = R[:, 2]
    if ray[2] > -1e-3:
        return np.zeros(2)
    P = c + ray * (-c[2] / ray[2])
    a = project(K, c, R, P[None])[0, :2]
    b = project(K, path.positions[j], path.rotations[j], P[None])[0, :2]
    return (a - b) if j < i else (b - a)


class VideoRenderer:
    """Renders the frames of one :class:`VideoConfig`: set up once, then render frame by frame.

    >>> # r = VideoRenderer(VideoConfig(frames=10, width=320, height=180)); rgb, mask, truth = r.frame(0)
    """

    def __init__(self, config: VideoConfig, motion: Optional[Motion] = None, effects: bool = True):
        """effects: draw shadows and reflections (False: without them, about a quarter of a frame's
        render time on a software OpenGL, for a simulation that must keep up with the wall clock)."""
        import mujoco  # deferred: the module imports without MuJoCo

        self.config = config
        self.motion = motion or robot_motion(config)
        self.world = _World(config, self.motion)
        w = self.world
        self.path = camera_path(config.camera, self.motion.times, w.axis_points, body_diameter=w.body_diameter,
                                width=config.width, height=config.height, seed=config.seed,
                                target_width_px=config.target_width_px)
        self.K = self.path.K(config.width, config.height)
        w.model.cam_fovy[w.cam] = math.degrees(self.path.fovy)
        self.lights = LightSchedule(w.model, w.dressing, seed=config.seed,
                                    duration=float(self.motion.times[-1]) + 1.0 / config.fps)
        self.renderer = mujoco.Renderer(w.model, height=config.height, width=config.width)
        if not effects:  # the scene's flags persist across update_scene
            for flag in (mujoco.mjtRndFlag.mjRND_SHADOW, mujoco.mjtRndFlag.mjRND_REFLECTION):
                self.renderer.scene.flags[flag] = 0
        self.option = mujoco.MjvOption()
        self.option.sitegroup[:] = 0
        self.clip = clip_settings(config.degradation, config.width, config.height, config.seed)
        self.link_flows = self._link_flows()
        self.props = None
        if config.lab_distractors:
            self.props = LabProps(w.model, config.lab_distractors, config.seed, self.motion.times, w.axis_points,
                                  self.path.positions, self.path.rotations, self.K, config.width,
                                  robot_radius=0.5 * w.body_diameter, tether_radius=w.look.tether_radius)

    def _link_flows(self) -> np.ndarray:
        """(T, N, 2) image motion of each link centre [px per frame], camera and robot motion together."""
        n = self.world.robot.n_links
        T = len(self.path)
        # central difference over the neighbour frames, each seen by its own camera: image motion
        flows = np.zeros((T, n, 2))
        if T < 2:
            return flows
        for i in range(T):
            a, b = max(i - 1, 0), min(i + 1, T - 1)
            pa = project(self.K, self.path.positions[a], self.path.rotations[a], self.world.axis_points[a, n:2 * n])
            pb = project(self.K, self.path.positions[b], self.path.rotations[b], self.world.axis_points[b, n:2 * n])
            flows[i] = (pb[:, :2] - pa[:, :2]) / (b - a)
        return flows

    def _live_points(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """Axis points (2N+1, 3) of the pose in ``world.data`` and its link centres' image motion (N, 2)
        [px per frame] since the previous live frame (zero on the first)."""
        import mujoco  # deferred: the module imports without MuJoCo

        w = self.world
        mujoco.mj_kinematics(w.model, w.data)
        o = w.data.xpos[w.model_link_ids]
        x = w.data.xmat[w.model_link_ids].reshape(-1, 3, 3)[:, :, 0]
        e = o + x * w.robot.lengths[:, None]
        pts = np.concatenate([o, 0.5 * (o + e), e[-1:]], axis=0)
        n = w.robot.n_links
        uv = project(self.K, self.path.positions[i], self.path.rotations[i], pts[n:2 * n])[:, :2]
        prev = getattr(self, "_live_uv", None)
        self._live_uv = uv
        return pts, np.zeros((n, 2)) if prev is None else uv - prev

    def close(self) -> None:
        self.renderer.close()

    def __enter__(self) -> "VideoRenderer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def frame(self, i: int, qpos: Optional[np.ndarray] = None) -> tuple[np.ndarray, np.ndarray, dict]:
        """Render frame ``i``: RGB uint8 (H, W, 3) degraded, mask bool (H, W), truth dict.

        qpos: the robot's MuJoCo qpos (nq,) to show instead of the recorded motion's (a live
        simulation); the camera still flies frame ``i`` of its path, and the robot's own motion
        blur comes from the previous live frame.
        """
        import mujoco  # deferred: the module imports without MuJoCo

        cfg, w = self.config, self.world
        m, d = w.model, w.data
        if qpos is not None and self.props is not None:
            raise InputError("lab distractors follow the recorded motion; a live qpos cannot be shown with them")
        d.qpos[:] = self.motion.qpos[i] if qpos is None else qpos
        if self.props is not None:
            self.props.apply(d, i)
        t = float(self.motion.times[i])
        if qpos is None:
            axis_points, link_flow = w.axis_points[i], self.link_flows[i]
        else:
            axis_points, link_flow = self._live_points(i)
        self.lights.apply(m, t, axis_points.mean(axis=0) * np.array([1, 1, 0]))
        c = self.path.positions[i]
        R_wc = self.path.rotations[i]
        m.cam_pos[w.cam] = c
        m.cam_quat[w.cam] = _mat2quat(R_wc @ np.diag([1.0, -1.0, -1.0]))
        mujoco.mj_forward(m, d)
        self.renderer.update_scene(d, camera=w.cam, scene_option=self.option)
        rgb = self.renderer.render()
        self.renderer.enable_segmentation_rendering()
        seg = self.renderer.render()
        self.renderer.disable_segmentation_rendering()
        is_geom = seg[..., 1] == int(mujoco.mjtObj.mjOBJ_GEOM)
        link_map = np.where(is_geom, w.geom_link[np.clip(seg[..., 0], 0, len(w.geom_link) - 1)], -1)
        mask = link_map >= 0

        flow = _centre_flow(self.path, i, self.K)
        rng = np.random.default_rng([cfg.seed, i, 555])
        img = degrade(rgb, rng, self.clip, flow, cfg.degradation, link_map, link_flow)

        # truth
        b = w.link_ids[0]
        p_b = d.xpos[b].copy()
        R_b = d.xmat[b].reshape(3, 3).copy()
        head = d.site_xpos[w.head_site].copy()
        to_cam = lambda p: R_wc.T @ (p - c)  # noqa: E731
        uv = project(self.K, c, R_wc, axis_points)[:, :2]
        n = w.robot.n_links
        axis_uv = np.concatenate([uv[:n], uv[-1:]])  # link origins, then the head end
        length_px = float(np.linalg.norm(np.diff(axis_uv, axis=0), axis=1).sum())
        area = int(mask.sum())
        truth = {
            "t": t,
            "sim_time": float(self.motion.sim_times[i]),
            "joint_angles": d.qpos[w.qadr].tolist(),
            "base_position_cam": to_cam(p_b).tolist(),
            "base_quat_cam": _mat2quat(R_wc.T @ R_b).tolist(),
            "head_position_cam": to_cam(head).tolist(),
            "base_position_world": p_b.tolist(),
            "base_quat_world": _mat2quat(R_b).tolist(),
            "head_position_world": head.tolist(),
            "camera_position_world": c.tolist(),
            "camera_quat_world": _mat2quat(R_wc).tolist(),
            "mask_pixels": area,
            "body_width_px": area / max(length_px, 1e-6),
        }
        return img, mask, truth

    def meta(self) -> dict:
        cfg, w = self.config, self.world
        return {
            "K": self.K.tolist(),
            "width": cfg.width,
            "height": cfg.height,
            "fps": cfg.fps,
            "robot": w.robot.name,
            "robot_file": os.path.abspath(cfg.robot) if Path(cfg.robot).suffix else None,
            "scene": cfg.scene,
            "seed": cfg.seed,
            "source": "snaketrack sim video (MuJoCo render)",
            "frames": cfg.frames,
            "fovy_deg": math.degrees(self.path.fovy),
            "obstacles": cfg.obstacles,
            "motion": self.motion.source,
            "start_time": cfg.start_time,
            "ground": w.dressing.ground,
            "distractors": {"rocks": w.dressing.rocks, "sticks": w.dressing.sticks, "boxes": w.dressing.boxes,
                            **({"lab": self.props.summary()} if self.props is not None else {})},
            "degradation": asdict(cfg.degradation),
            "camera_convention": "OpenCV: x right, y down, z forward; "
                                 "camera_quat_world is R_wc (camera axes in world), w x y z",
            "mask": "MuJoCo segmentation of the robot's visual geoms (group 1), visible pixels only "
                    "(posts, legs, a chair or a cable in front of the robot cut it)",
            "config": config_key(cfg),
        }


def config_key(cfg: VideoConfig) -> dict:
    """``cfg`` as plain JSON values: meta.json's ``config``, which ``--resume`` checks."""
    d = asdict(cfg)
    if d["distractors"] is None:
        d.pop("distractors")  # the scene's own: keeps the key of configurations written without the field
    return json_safe(d)


def json_safe(obj):
    """``obj`` with tuples made lists and numpy scalars made Python numbers, recursively."""
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    if isinstance(obj, np.generic):
        return obj.item()
    return obj
