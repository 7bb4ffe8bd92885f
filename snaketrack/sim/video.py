"""Synthetic field video of a snake robot with ground truth, rendered by MuJoCo.

Pipeline (one call of :func:`render_video`):

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
3. **Camera**: :mod:`snaketrack.sim.camera_path` (static / handheld / drone),
   a MuJoCo camera whose pose is set every frame; ``K`` from its ``fovy``
   (shared/notes/mujoco-camera.md). MuJoCo's camera looks along its −z with
   y up, so its rotation is ``R_wc · diag(1, −1, −1)``.
4. **Render**: RGB (4× multisampled) and a segmentation render with MuJoCo's
   ``Renderer`` (headless, ``MUJOCO_GL=egl``); the mask is every pixel whose
   nearest surface is one of the robot's *visual* geoms
   (``robot_geom_ids``): the hard-edged, visible silhouette (obstacles in
   front of the robot hide it in the mask too; distractors never touch it).
5. **Degradations** (:func:`degrade`): camera motion blur (a line kernel
   along the image motion of the ground point at the image centre, times
   the exposure fraction), the robot's own motion blur (each link blurred
   along its image motion between the neighbouring frames and composited
   over the camera-blurred image), a slight defocus, vignetting, white balance,
   signal-dependent sensor noise and a first JPEG compression at a random
   quality (the dataset writer stores the result as JPEG again, quality 92,
   as a re-encoded video would). The mask and truth are not degraded.
6. **Output**: :class:`~snaketrack.datasets.layout.DatasetWriter`
   (``frames/``, ``masks/``, ``meta.json``, ``truth.jsonl``; atomic, resumable),
   then ``video.mp4`` and ``contact_sheet.png`` (mask outline in cyan, the
   truth's link centres projected with ``K`` in red).

Truth (one JSON object a frame, DESIGN.md names): ``frame``, ``t`` (s from the
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
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Optional

import cv2
import numpy as np

from snaketrack.errors import InputError
from snaketrack.sim.camera_path import SCENES, CameraPath, camera_path, project
from snaketrack.sim.scene import LightSchedule, SceneConfig, dress_scene

os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("PYOPENGL_PLATFORM", os.environ["MUJOCO_GL"])


@dataclass(frozen=True)
class Degradation:
    """Image degradations; set ``enabled=False`` for clean renders.

    exposure: range of the exposure time as a fraction of the frame interval (per clip).
    defocus_px: range of the Gaussian defocus sigma [px] (per clip).
    noise_gain: range of the signal-dependent noise variance per unit intensity (per clip).
    noise_floor: range of the read-noise standard deviation, intensity in [0, 1] (per clip).
    vignette: range of the corner darkening fraction (per clip).
    jpeg_quality: range of the first JPEG compression's quality (per frame).
    """

    enabled: bool = True
    exposure: tuple[float, float] = (0.3, 0.7)
    defocus_px: tuple[float, float] = (0.25, 0.6)
    noise_gain: tuple[float, float] = (0.0004, 0.0015)
    noise_floor: tuple[float, float] = (0.003, 0.008)
    vignette: tuple[float, float] = (0.1, 0.3)
    jpeg_quality: tuple[int, int] = (55, 90)


@dataclass(frozen=True)
class VideoConfig:
    """A synthetic video.

    scene: ``static``, ``handheld`` or ``drone``.
    robot: shipped robot name or a robot YAML path.
    frames: number of frames; fps: frame rate [1/s]; width, height: [px].
    seed: seeds the physics, the scene, the camera path and the noise.
    obstacles: the OAL posts (and their physics) or an empty floor.
    start_time: [s] into the physics run of the first frame.
    pitch_amplitude: [rad] pitch wave for robots with 2-DOF joints.
    target_width_px: the robot body's nominal width in the image [px]; sets the focal length.
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

    def __post_init__(self) -> None:
        if self.scene not in SCENES:
            raise InputError(f"scene {self.scene!r}; expected one of {', '.join(SCENES)}")
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
            raise InputError(f"body width {self.target_width_px!r} px (target_width_px, --body-width-px); expected 0.5..200")


@dataclass(frozen=True)
class Motion:
    """Recorded robot motion at the frame times.

    times: (T,) frame times from the first frame [s]; sim_times: (T,) times in the physics run [s].
    qpos: (T, nq) MuJoCo qpos per frame. source: how it was made.
    """

    times: np.ndarray
    sim_times: np.ndarray
    qpos: np.ndarray
    source: str
    xml: str


def robot_motion(config: VideoConfig) -> Motion:
    """Simulate the OAL world and pick the physics steps at the frame times."""
    from snaketrack.models.robot import load_robot
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
    import mujoco

    q = np.empty(4)
    mujoco.mju_mat2Quat(q, np.ascontiguousarray(R, dtype=float).reshape(9))
    return -q if q[0] < 0 else q


class _World:
    """The dressed, compiled world with the robot's bookkeeping."""

    def __init__(self, config: VideoConfig, motion: Motion):
        import mujoco

        from snaketrack.models.robot import load_robot
        from snaketrack.sim.mjcf import joint_qpos_addresses, robot_geom_ids

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
                                        config.scene_config, seed=config.seed,
                                        variant=SCENES.index(config.scene))
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
        self.geom_link = np.full(self.model.ngeom, -1, dtype=int)
        for g in self.robot_geoms:
            self.geom_link[g] = links.index(int(self.model.geom_bodyid[g]))
        self.qadr = joint_qpos_addresses(self.model, self.robot)
        vr = np.array(self.robot.visual.body_radius)
        self.body_diameter = float(2 * vr.mean())


def motion_blur_kernel(length: float, angle: float) -> Optional[np.ndarray]:
    """A normalised line kernel of ``length`` [px] at ``angle`` [rad], or None below half a pixel."""
    if length < 0.5:
        return None
    n = int(math.ceil(length)) | 1
    n = max(n, 3)
    k = np.zeros((n * 4 + 1, n * 4 + 1), np.float32)
    c = n * 2
    for s in np.linspace(-length / 2, length / 2, 8 * n):
        x, y = c + 4 * s * math.cos(angle), c + 4 * s * math.sin(angle)
        k[int(round(y)), int(round(x))] += 1
    k = cv2.resize(k, (n, n), interpolation=cv2.INTER_AREA)
    return k / k.sum()


def _kernel_for(flow: np.ndarray, exposure: float) -> Optional[np.ndarray]:
    return motion_blur_kernel(float(np.linalg.norm(flow)) * exposure, float(math.atan2(flow[1], flow[0])))


def degrade(rgb: np.ndarray, rng: np.random.Generator, clip: dict, flow: np.ndarray,
            cfg: Degradation, link_map: Optional[np.ndarray] = None,
            link_flows: Optional[np.ndarray] = None) -> np.ndarray:
    """Apply blur, vignetting, white balance, sensor noise and JPEG to an RGB uint8 image.

    clip: per-clip settings from :func:`clip_settings`; flow: (2,) image motion
        [px] over one frame interval at the image centre (the camera's motion);
        rng: this frame's generator.
    link_map: (H, W) int, the robot link seen at each pixel (−1: not the robot);
        link_flows: (N, 2) each link's image motion [px per frame interval].
        Each link is blurred along its own motion and composited over the
        camera-blurred image (the robot moves against the ground).
    """
    if not cfg.enabled:
        return rgb
    img0 = rgb.astype(np.float32) / 255.0
    img = img0
    k = _kernel_for(flow, clip["exposure"])
    if k is not None:
        img = cv2.filter2D(img0, -1, k, borderType=cv2.BORDER_REFLECT)
    if link_map is not None and link_flows is not None:
        img = img.copy() if img is img0 else img
        H, W = link_map.shape
        ys_all, xs_all = np.nonzero(link_map >= 0)
        links_all = link_map[ys_all, xs_all]
        for link, fl in enumerate(link_flows):
            kl = _kernel_for(np.asarray(fl), clip["exposure"])
            if kl is None:
                continue
            sel = links_all == link
            if not sel.any():
                continue
            ys, xs = ys_all[sel], xs_all[sel]
            pad = kl.shape[0] + 2
            y0, y1 = max(ys.min() - pad, 0), min(ys.max() + pad + 1, H)
            x0, x1 = max(xs.min() - pad, 0), min(xs.max() + pad + 1, W)
            region = (link_map[y0:y1, x0:x1] == link).astype(np.float32)
            w = np.clip(2 * cv2.filter2D(region, -1, kl, borderType=cv2.BORDER_CONSTANT), 0, 1)[..., None]
            blurred = cv2.filter2D(img0[y0:y1, x0:x1], -1, kl, borderType=cv2.BORDER_REFLECT)
            img[y0:y1, x0:x1] = w * blurred + (1 - w) * img[y0:y1, x0:x1]
    img = cv2.GaussianBlur(img, (0, 0), clip["defocus_px"])
    img = img * clip["vignette_map"][..., None] * clip["wb"][None, None]
    var = clip["noise_gain"] * np.clip(img, 0, 1) + clip["noise_floor"] ** 2
    img = img + rng.standard_normal(img.shape, dtype=np.float32) * np.sqrt(var)
    out = np.clip(img * 255 + 0.5, 0, 255).astype(np.uint8)
    q = int(rng.integers(cfg.jpeg_quality[0], cfg.jpeg_quality[1] + 1))
    ok, buf = cv2.imencode(".jpg", out, [cv2.IMWRITE_JPEG_QUALITY, q])
    return cv2.imdecode(buf, cv2.IMREAD_UNCHANGED) if ok else out


def clip_settings(cfg: Degradation, width: int, height: int, seed: int) -> dict:
    """Per-clip degradation settings (exposure, defocus, noise, vignette map, white balance)."""
    rng = np.random.default_rng([seed, 77])
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    r2 = ((xx - width / 2) ** 2 + (yy - height / 2) ** 2) / ((width / 2) ** 2 + (height / 2) ** 2)
    return {
        "exposure": float(rng.uniform(*cfg.exposure)),
        "defocus_px": float(rng.uniform(*cfg.defocus_px)),
        "noise_gain": float(rng.uniform(*cfg.noise_gain)),
        "noise_floor": float(rng.uniform(*cfg.noise_floor)),
        "vignette_map": (1 - rng.uniform(*cfg.vignette) * r2).astype(np.float32),
        "wb": rng.uniform(0.94, 1.06, 3).astype(np.float32),
    }


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
    """Renders the frames of one :class:`VideoConfig` (a session: set up once, render frame by frame).

    >>> # r = VideoRenderer(VideoConfig(frames=10, width=320, height=180)); rgb, mask, truth = r.frame(0)
    """

    def __init__(self, config: VideoConfig, motion: Optional[Motion] = None):
        import mujoco

        self.config = config
        self.motion = motion or robot_motion(config)
        self.world = _World(config, self.motion)
        w = self.world
        self.path = camera_path(config.scene, self.motion.times, w.axis_points, body_diameter=w.body_diameter,
                                width=config.width, height=config.height, seed=config.seed,
                                target_width_px=config.target_width_px)
        self.K = self.path.K(config.width, config.height)
        w.model.cam_fovy[w.cam] = math.degrees(self.path.fovy)
        self.lights = LightSchedule(w.model, w.dressing, seed=config.seed,
                                    duration=float(self.motion.times[-1]) + 1.0 / config.fps)
        self.renderer = mujoco.Renderer(w.model, height=config.height, width=config.width)
        self.option = mujoco.MjvOption()
        self.option.sitegroup[:] = 0
        self.clip = clip_settings(config.degradation, config.width, config.height, config.seed)
        self.link_flows = self._link_flows()

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

    def close(self) -> None:
        self.renderer.close()

    def __enter__(self) -> "VideoRenderer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def frame(self, i: int) -> tuple[np.ndarray, np.ndarray, dict]:
        """Render frame ``i``: RGB uint8 (H, W, 3) degraded, mask bool (H, W), truth dict."""
        import mujoco

        cfg, w = self.config, self.world
        m, d = w.model, w.data
        d.qpos[:] = self.motion.qpos[i]
        t = float(self.motion.times[i])
        self.lights.apply(m, t, w.axis_points[i].mean(axis=0) * np.array([1, 1, 0]))
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
        img = degrade(rgb, rng, self.clip, flow, cfg.degradation, link_map, self.link_flows[i])

        # truth
        b = w.link_ids[0]
        p_b = d.xpos[b].copy()
        R_b = d.xmat[b].reshape(3, 3).copy()
        head = d.site_xpos[w.head_site].copy()
        to_cam = lambda p: R_wc.T @ (p - c)  # noqa: E731
        uv = project(self.K, c, R_wc, w.axis_points[i])[:, :2]
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
            "distractors": {"rocks": w.dressing.rocks, "sticks": w.dressing.sticks, "boxes": w.dressing.boxes},
            "degradation": asdict(cfg.degradation),
            "camera_convention": "OpenCV: x right, y down, z forward; camera_quat_world is R_wc (camera axes in world), w x y z",
            "mask": "MuJoCo segmentation of the robot's visual geoms (group 1), visible pixels only",
            "config": _config_key(cfg),
        }


def _config_key(cfg: VideoConfig) -> dict:
    d = asdict(cfg)
    return json_safe(d)


def json_safe(obj):
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    if isinstance(obj, np.generic):
        return obj.item()
    return obj


def contact_sheet(root: str | os.PathLike, n: int = 12, cols: int = 4, tile_width: int = 320) -> np.ndarray:
    """A grid of ``n`` evenly spaced frames of a dataset with the mask outline (cyan) and truth link centres (red).

    Link centres come from the truth's joint angles and base pose through
    :func:`snaketrack.models.kinematics.forward_kinematics_np`, projected with meta.json's K,
    so the sheet also shows that the two renderers agree. Returns RGB uint8.
    """
    from snaketrack.datasets.layout import Dataset
    from snaketrack.models.kinematics import forward_kinematics_np
    from snaketrack.models.robot import load_robot
    from snaketrack.models.rotations import quat_to_matrix
    import torch

    ds = Dataset(root)
    robot = load_robot(ds.meta.get("robot_file") or ds.meta["robot"])
    truth = ds.truth or []
    K = ds.K
    idx = np.unique(np.linspace(0, len(ds) - 1, min(n, len(ds))).round().astype(int))
    tiles = []
    for i in idx:
        img = ds.frame(int(i)).copy()
        mask = ds.mask(int(i))
        if mask is not None:
            cnts, _ = cv2.findContours(mask.astype(np.uint8), cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_NONE)
            cv2.drawContours(img, cnts, -1, (0, 255, 255), 1)
        if i < len(truth) and K is not None:
            tr = truth[i]
            R = quat_to_matrix(torch.tensor(tr["base_quat_cam"], dtype=torch.float64)).numpy()
            fk = forward_kinematics_np(robot, np.array(tr["joint_angles"]), R, np.array(tr["base_position_cam"]))
            pc = fk["centres"]
            uv = (pc @ K.T)[:, :2] / pc[:, 2:3]
            for u, v in uv:
                cv2.circle(img, (int(round(u)), int(round(v))), 2, (255, 0, 0), -1)
        s = tile_width / img.shape[1]
        tile = cv2.resize(img, (tile_width, int(round(img.shape[0] * s))), interpolation=cv2.INTER_AREA)
        cv2.putText(tile, f"{int(i)}", (4, 14), cv2.FONT_HERSHEY_SIMPLEX, 0.45, (255, 255, 255), 1, cv2.LINE_AA)
        tiles.append(tile)
    while len(tiles) % cols:
        tiles.append(np.zeros_like(tiles[0]))
    rows = [np.concatenate(tiles[r:r + cols], axis=1) for r in range(0, len(tiles), cols)]
    return np.concatenate(rows, axis=0)


def write_mp4(root: str | os.PathLike, fps: float) -> Path:
    """Encode ``frames/*.jpg`` of a dataset into ``video.mp4`` (OpenCV mp4v), atomically."""
    from snaketrack.datasets.layout import Dataset

    ds = Dataset(root)
    out = Path(root) / "video.mp4"
    tmp = Path(root) / ".video.mp4.tmp.mp4"
    first = ds.frame(0)
    h, w = first.shape[:2]
    writer = cv2.VideoWriter(str(tmp), cv2.VideoWriter_fourcc(*"mp4v"), float(fps), (w, h))
    if not writer.isOpened():
        raise InputError(f"{out}: OpenCV could not open an mp4v writer")
    for i in range(len(ds)):
        writer.write(cv2.cvtColor(ds.frame(i), cv2.COLOR_RGB2BGR))
    writer.release()
    os.replace(tmp, out)
    return out


def render_video(config: VideoConfig, out: str | os.PathLike, resume: bool = False, progress: bool = True,
                 extras: bool = True) -> dict:
    """Render ``config`` into the dataset folder ``out``; returns a summary dict.

    resume: continue an interrupted run (the folder's meta.json must hold the same config);
        without it, a folder that already holds frames is refused.
    extras: also write ``video.mp4`` and ``contact_sheet.png``.
    """
    from snaketrack.datasets.layout import DatasetWriter
    from snaketrack.io import atomic_write_bytes, read_json, write_json

    out = Path(out)
    existing = list((out / "frames").glob("*.jpg")) if (out / "frames").is_dir() else []
    if existing and not resume:
        raise InputError(f"{out}: already holds {len(existing)} frames; choose a new --out or pass --resume")
    if resume and (out / "meta.json").is_file():
        old = read_json(out / "meta.json").get("config")
        if old is not None and old != _config_key(config):
            raise InputError(f"{out / 'meta.json'}: holds a different configuration; resume needs the same flags")
    with VideoRenderer(config) as r:
        meta = r.meta()
        with DatasetWriter(out, meta, resume=resume, masks=True, truth=True) as writer:
            start = writer.next_frame
            it = range(start, config.frames)
            if progress:
                from tqdm import tqdm

                it = tqdm(it, desc=f"sim video {config.scene}", unit="frame", initial=start, total=config.frames,
                          mininterval=0.5)
            for i in it:
                img, mask, truth = r.frame(i)
                writer.write_frame(img, mask, truth)
    from snaketrack.datasets.layout import Dataset

    ds = Dataset(out)
    tr = ds.truth or []
    widths = np.array([x["body_width_px"] for x in tr], float)
    pixels = np.array([x["mask_pixels"] for x in tr], float)
    meta["stats"] = {
        "body_width_px_median": float(np.median(widths)) if len(widths) else None,
        "body_width_px_min": float(widths.min()) if len(widths) else None,
        "body_width_px_max": float(widths.max()) if len(widths) else None,
        "mask_pixels_min": int(pixels.min()) if len(pixels) else None,
        "frames_without_robot": int((pixels == 0).sum()),
    }
    write_json(out / "meta.json", meta)
    if extras:
        write_mp4(out, config.fps)
        sheet = contact_sheet(out)
        ok, buf = cv2.imencode(".png", cv2.cvtColor(sheet, cv2.COLOR_RGB2BGR))
        atomic_write_bytes(out / "contact_sheet.png", buf.tobytes())
    return {"out": str(out), "frames": len(ds), **meta["stats"], "fovy_deg": meta["fovy_deg"]}
