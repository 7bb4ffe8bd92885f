"""``snaketrack robot show``: draw a robot file's silhouette, to check the file before tracking;
``snaketrack robot new``: write a robot file from a few numbers read off the robot.

::

    snaketrack robot show NAME|FILE [--q Q1,Q2,...] [--size WxH] --out robot.png
    snaketrack robot show NAME|FILE --frame IMAGE [--pose X,Y,Z,YAW[,PITCH,ROLL] | --view ELEV,AZIM,DIST
        [--at U,V]] [--q ...] [--intrinsics FILE | --fov-deg DEG] --out overlay.png
    snaketrack robot new --modules N --pitch M --width M [--height M] [--tail-length M] [--head-length M]
        [--caps round|flat] [--axes yaw,pitch] [--limit RAD] [--view-elevation DEG] [--colour #rrggbb] ...
        --out robot.yaml

Alone: the robot straight and in a sample pose (or ``--q``), seen from above at an angle, with a
side panel of its links and joints (:func:`snaketrack.tracker.run.robot_view.robot_sheet`). Over a
frame: the tracker's silhouette at the base pose ``--pose`` in the camera frame
(:func:`snaketrack.tracker.run.robot_view.frame_view`; yaw, pitch, roll as in
:func:`~snaketrack.tracker.run.robot_view.base_rotation`), or lying straight on the ground seen by a camera at
an elevation, azimuth and distance (``--view``, :func:`~snaketrack.tracker.run.robot_view.view_pose`).
"""
from __future__ import annotations

import argparse
import math
import warnings
from pathlib import Path

import cv2
import numpy as np

from snaketrack.commands import Command, add_camera_arguments, camera_of
from snaketrack.datasets.layout import read_image
from snaketrack.errors import FileFormatError, InputError, MissingFileError, SnaketrackWarning
from snaketrack.io import atomic_write_bytes, atomic_write_text, parse_size

_POSE_FORM = "X,Y,Z,YAW[,PITCH,ROLL]: the base's position in the camera frame [m] and its yaw, pitch, roll [rad]"


def parse_pose(text: str) -> tuple[np.ndarray, np.ndarray]:
    """``--pose X,Y,Z,YAW[,PITCH,ROLL]`` → base position (3,) [m] (camera frame, z > 0) and (yaw, pitch,
    roll) (3,) [rad]; a one-line :class:`InputError` for anything else.

    >>> parse_pose("0.1,0,1.5,0.5")
    (array([0.1, 0. , 1.5]), array([0.5, 0. , 0. ]))
    """
    try:
        v = [float(x) for x in str(text).split(",")]
    except ValueError:
        raise InputError(f"--pose {text!r}; expected numbers {_POSE_FORM}") from None
    if len(v) not in (4, 5, 6):
        raise InputError(f"--pose {text!r}: {len(v)} values; expected 4 to 6, {_POSE_FORM}")
    if not all(math.isfinite(x) for x in v):
        raise InputError(f"--pose {text!r}; expected finite numbers, {_POSE_FORM}")
    if v[2] <= 0:
        raise InputError(f"--pose {text!r}: z = {v[2]:g} m; expected z > 0 (in front of the camera)")
    angles = np.zeros(3)
    angles[:len(v) - 3] = v[3:]
    return np.array(v[:3]), angles


def parse_q(text: str, robot) -> np.ndarray:
    """``--q Q1,...,QJ`` → joint angles (J,) [rad] in the robot's joint order; a one-line :class:`InputError`
    when they are not J finite numbers. Values beyond the joint limits are drawn, with a warning."""
    try:
        q = np.array([float(x) for x in str(text).split(",")])
    except ValueError:
        raise InputError(f"--q {text!r}; expected {robot.dof} comma-separated joint angles [rad]") from None
    if q.size == robot.dof and not np.all(np.isfinite(q)):
        raise InputError(f"--q {text!r}: expected finite joint angles [rad]")
    if q.size != robot.dof:
        names = robot.joint_names
        raise InputError(f"--q {text!r}: {q.size} values; {robot.name} has {robot.dof} joint coordinates "
                         f"({names[0]} ... {names[-1]}) [rad]")
    out = (q < robot.lower) | (q > robot.upper)
    if out.any():
        bad = ", ".join(robot.joint_names[i] for i in np.flatnonzero(out))
        warnings.warn(f"--q: {bad} beyond the robot file's joint limits; drawn as given", SnaketrackWarning,
                      stacklevel=2)
    return q


def parse_numbers(text: str, flag: str, form: str, count: int) -> list[float]:
    """``count`` comma-separated finite numbers; a one-line :class:`InputError` naming ``form`` otherwise."""
    try:
        v = [float(x) for x in str(text).split(",")]
    except ValueError:
        v = []
    if len(v) != count or not all(math.isfinite(x) for x in v):
        raise InputError(f"{flag} {text!r}; expected {form}")
    return v


def _add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("robot", metavar="NAME|FILE", help="a shipped robot's name or a robot YAML file")
    p.add_argument("--frame", default=None, metavar="IMAGE",
                   help="draw the silhouette over this image (default: the robot alone, with a table of its links)")
    p.add_argument("--pose", default=None, metavar="X,Y,Z,YAW[,PITCH,ROLL]",
                   help="with --frame: link 1's origin (the tail end) in the camera frame [m] (x right, y down, "
                        "z forward) and its yaw, pitch, roll [rad] from lying flat under a camera looking straight "
                        "down (yaw 0: the body along the image's x); default: lying flat, centred, spanning 60%% "
                        "of the width; write --pose=-0.2,... when it starts with a minus")
    p.add_argument("--view", default=None, metavar="ELEV,AZIM,DIST",
                   help="with --frame, instead of --pose: the robot lying straight on the ground, seen by a camera "
                        "at ELEV deg over the ground (90: straight down), the body's heading AZIM deg on the ground "
                        "(0: across the image, tail left; 90: head away from the camera), the ground DIST m from "
                        "the camera along its optical axis")
    p.add_argument("--at", default=None, metavar="U,V",
                   help="with --view: the image point [px] where the robot's middle lies (default: the centre)")
    p.add_argument("--q", default=None, metavar="Q1,Q2,...",
                   help="joint angles [rad], in the robot file's joint order (default: zeros over a frame; alone, a "
                        "sample curved pose; write --q=-0.3,... when it starts with a minus)")
    add_camera_arguments(p, "a 65 deg horizontal field of view (a phone's); used with --frame only")
    p.add_argument("--size", default="1280x720", metavar="WxH",
                   help="image size of the robot alone [px] (default 1280x720; over a frame, the frame's size)")
    p.add_argument("--out", required=True, metavar="PNG", help="image to write (.png or .jpg)")


def _read_frame(path: str) -> np.ndarray:
    try:
        return read_image(path)
    except (MissingFileError, FileFormatError) as e:
        raise type(e)(f"--frame {e}") from None


def _run(args: argparse.Namespace) -> int:
    from snaketrack.models.robot import load_robot
    from snaketrack.tracker.run import robot_view as rv

    out = Path(args.out)
    if out.suffix.lower() not in (".png", ".jpg", ".jpeg"):
        raise InputError(f"--out {out}: expected a .png or .jpg file name")
    robot = load_robot(args.robot)
    q = None if args.q is None else parse_q(args.q, robot)
    if args.frame is None:
        for flag, value in (("--pose", args.pose), ("--view", args.view), ("--at", args.at),
                            ("--intrinsics", args.intrinsics), ("--fov-deg", args.fov_deg)):
            if value is not None:
                raise InputError(f"{flag} places the robot in a frame's camera; give --frame IMAGE too")
        w, h = parse_size(args.size, "--size")
        img = rv.robot_sheet(robot, w, h, q)
        what = "straight and " + ("at --q" if q is not None else "in a sample pose")
    else:
        from snaketrack.tracker.calib.camera import DEFAULT_FOV_DEG, FieldOfView, Undistorter, source_camera

        frame = _read_frame(args.frame)
        h, w = frame.shape[:2]
        intrinsics = camera_of(args) or FieldOfView(DEFAULT_FOV_DEG)
        camera = source_camera({}, w, h, intrinsics, f"--frame {args.frame}")
        if camera.has_distortion:  # the tracker works on undistorted frames
            undistort = Undistorter(camera)
            frame, camera = undistort.frame(frame), undistort.output_camera
        qv = np.zeros(robot.dof) if q is None else q
        if args.pose is not None and args.view is not None:
            raise InputError("--pose and --view both place the robot; give one")
        if args.at is not None and args.view is None:
            raise InputError("--at places the robot seen from --view; give --view ELEV,AZIM,DIST too")
        if args.view is not None:
            elev, azim, dist = parse_numbers(args.view, "--view", "ELEV,AZIM,DIST: degrees, degrees, metres", 3)
            if not 0 < elev <= 90 or dist <= 0:
                raise InputError(f"--view {args.view!r}: expected an elevation in (0, 90] deg and a distance > 0 m")
            at = None if args.at is None else parse_numbers(args.at, "--at", "U,V: an image point [px]", 2)
            pose = rv.view_pose(robot, camera, elev, azim, dist, qv, at)
        elif args.pose is None:
            pose = rv.centred_pose(robot, camera, qv)
        else:
            t0, (yaw, pitch, roll) = parse_pose(args.pose)
            pose = rv.Pose(qv, rv.base_rotation(yaw, pitch, roll), t0)
        img, mask = rv.frame_view(frame, robot, camera, pose)
        if not mask.any():
            warnings.warn("the robot's silhouette falls outside the frame; check --pose (z is the distance "
                          "along the optical axis [m])", SnaketrackWarning, stacklevel=1)
        x, y, z = pose.t0
        yaw, pitch, roll = rv.base_angles(pose.R0)
        what = (f"over {args.frame}, fx {camera.fx:.1f} px, at --pose={x:.3f},{y:.3f},{z:.3f},{yaw:.3f},{pitch:.3f},"
                f"{roll:.3f}")
    ok, buf = cv2.imencode(out.suffix.lower(), cv2.cvtColor(img, cv2.COLOR_RGB2BGR))
    if not ok:
        raise InputError(f"--out {out}: OpenCV cannot encode this image format")
    atomic_write_bytes(out, buf.tobytes())
    print(f"{out}: {robot.name} ({robot.n_links} links, {robot.total_length:.3f} m) {what}; "
          f"{img.shape[1]}x{img.shape[0]} px")
    return 0


def _add_new_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--modules", type=int, required=True, metavar="N",
                   help="the rigid pieces between joints, counted tail to head, both end pieces included (N links, "
                        "N-1 joints)")
    p.add_argument("--pitch", type=float, required=True, metavar="M",
                   help="distance from one joint to the next [m] (the length of every link between two joints)")
    p.add_argument("--width", type=float, required=True, metavar="M", help="the body's width [m]")
    p.add_argument("--height", type=float, default=None, metavar="M",
                   help="the body's height [m] (default: the width, a round body)")
    p.add_argument("--tail-length", type=float, default=None, metavar="M",
                   help="from the tail-end joint to the tail's tip, an end cap or bracket included [m] (default: "
                        "--pitch)")
    p.add_argument("--head-length", type=float, default=None, metavar="M",
                   help="from the head-end joint to the head's tip, an end cap or bracket included [m] (default: "
                        "--pitch)")
    p.add_argument("--caps", choices=("round", "flat"), default="round",
                   help="the tips: round (a rounded end) or flat (a square-cut end, a flat end cap, an open fork "
                        "bracket) (default round)")
    p.add_argument("--axes", default="yaw", metavar="A,B,...",
                   help="joint axes cycled tail to head: yaw, pitch, roll (or z, y, x), a joint of several joined "
                        "by + (yaw,pitch: alternating, as sidewinding needs; default yaw)")
    p.add_argument("--limit", type=float, default=1.57, metavar="RAD", help="each joint's range +-RAD (default 1.57)")
    p.add_argument("--view-elevation", type=float, default=90.0, metavar="DEG",
                   help="the camera's elevation over the ground [deg] (90: straight down): a box body seen at an "
                        "angle shows its top and side, and the silhouette is drawn that wide (default 90)")
    p.add_argument("--housing-width", type=float, default=None, metavar="M",
                   help="the joint housings' diameter [m] (default 0.9 x the body's width as seen)")
    p.add_argument("--housing-length", type=float, default=None, metavar="M",
                   help="the joint housings' length along the joint's axis [m] (default the body's width as seen)")
    p.add_argument("--mass", type=float, default=0.2, metavar="KG", help="each module's mass [kg] (simulation only; "
                                                                         "default 0.2)")
    p.add_argument("--colour", default="#d9731a", metavar="#rrggbb|R,G,B", help="the body's colour (default #d9731a)")
    p.add_argument("--housing-colour", default="#333338", metavar="#rrggbb|R,G,B",
                   help="the joint housings' colour (default #333338)")
    p.add_argument("--head-colour", default=None, metavar="#rrggbb|R,G,B",
                   help="the head module's colour (default: the body's)")
    p.add_argument("--collision", choices=("capsule", "box"), default="capsule",
                   help="the links' collision shape in simulation: box keeps boxy modules upright (default capsule)")
    p.add_argument("--name", default=None, help="the robot's name (default: the file name without .yaml)")
    p.add_argument("--description", default="", help="one line about the robot")
    p.add_argument("--force", action="store_true", help="replace an existing --out file")
    p.add_argument("--out", required=True, metavar="FILE.yaml", help="the robot file to write")


def _run_new(args: argparse.Namespace) -> int:
    from snaketrack.models.robot import load_robot
    from snaketrack.models.robot_spec import RobotSpec, parse_axes, parse_colour, robot_yaml

    out = Path(args.out)
    if out.suffix.lower() not in (".yaml", ".yml"):
        raise InputError(f"--out {out}: expected a .yaml file name")
    if out.exists() and not args.force:
        raise InputError(f"--out {out} exists; give --force to replace it")
    spec = RobotSpec(name=args.name or out.stem, modules=args.modules, pitch=args.pitch, width=args.width,
                     height=args.height, tail_length=args.tail_length, head_length=args.head_length,
                     caps=args.caps, axes=parse_axes(args.axes), limit=args.limit,
                     view_elevation_deg=args.view_elevation, housing_width=args.housing_width,
                     housing_length=args.housing_length, mass=args.mass,
                     colour=parse_colour(args.colour, "--colour"),
                     housing_colour=parse_colour(args.housing_colour, "--housing-colour"),
                     head_colour=None if args.head_colour is None else parse_colour(args.head_colour, "--head-colour"),
                     collision=args.collision, description=args.description)
    atomic_write_text(out, robot_yaml(spec))
    robot = load_robot(out)
    print(f"{out}: {robot.name}, {robot.n_links} links ({robot.total_length:.3f} m of link axes), {robot.dof} joint "
          f"coordinates; check it over a frame: snaketrack robot show {out} --frame IMAGE --view ELEV,AZIM,DIST "
          f"--out check.png")
    return 0


COMMANDS = [Command(name="robot show", help="draw a robot file's silhouette, alone or over a frame",
                    add_arguments=_add_arguments, run=_run,
                    description="Draw a robot file's silhouette (the tracker's own model) to check the file: "
                                "alone, straight and in a sample pose with a table of its links and joints, or "
                                "over a frame at a given pose and camera."),
            Command(name="robot new", help="write a robot file from a few numbers read off the robot",
                    add_arguments=_add_new_arguments, run=_run_new,
                    description="Write a robot file from numbers read off the robot: its modules, joint pitch, body "
                                "width and height, end pieces, joint axes and colours (docs/your-robot.md). The "
                                "file is checked by the same loader as every robot file.")]
