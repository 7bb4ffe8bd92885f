"""``snaketrack robot show``: draw a robot file's silhouette, to check the file before tracking.

::

    snaketrack robot show NAME|FILE [--q Q1,Q2,...] [--size WxH] --out robot.png
    snaketrack robot show NAME|FILE --frame IMAGE [--pose X,Y,Z,YAW[,PITCH,ROLL]] [--q ...]
        [--intrinsics FILE | --fov-deg DEG] --out overlay.png

Alone: the robot straight and in a sample pose (or ``--q``), seen from above at an angle, with a
side panel of its links and joints (:func:`snaketrack.tracker.robot_view.robot_sheet`). Over a
frame: the tracker's silhouette at the base pose ``--pose`` in the camera frame
(:func:`snaketrack.tracker.robot_view.frame_view`; yaw, pitch, roll as in
:func:`~snaketrack.tracker.robot_view.base_rotation`).
"""
from __future__ import annotations

import argparse
import math
import warnings
from pathlib import Path

import numpy as np

from snaketrack.commands import Command, add_camera_arguments, camera_of
from snaketrack.errors import FileFormatError, InputError, MissingFileError, SnaketrackWarning

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


def _add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("robot", metavar="NAME|FILE", help="a shipped robot's name or a robot YAML file")
    p.add_argument("--frame", default=None, metavar="IMAGE",
                   help="draw the silhouette over this image (default: the robot alone, with a table of its links)")
    p.add_argument("--pose", default=None, metavar="X,Y,Z,YAW[,PITCH,ROLL]",
                   help="with --frame: link 1's origin (the tail end) in the camera frame [m] (x right, y down, "
                        "z forward) and its yaw, pitch, roll [rad] from lying flat under a camera looking straight "
                        "down (yaw 0: the body along the image's x); default: lying flat, centred, spanning 60%% "
                        "of the width; write --pose=-0.2,... when it starts with a minus")
    p.add_argument("--q", default=None, metavar="Q1,Q2,...",
                   help="joint angles [rad], in the robot file's joint order (default: zeros over a frame; alone, a "
                        "sample curved pose; write --q=-0.3,... when it starts with a minus)")
    add_camera_arguments(p, "a 65 deg horizontal field of view (a phone's); used with --frame only")
    p.add_argument("--size", default="1280x720", metavar="WxH",
                   help="image size of the robot alone [px] (default 1280x720; over a frame, the frame's size)")
    p.add_argument("--out", required=True, metavar="PNG", help="image to write (.png or .jpg)")


def _read_frame(path: str) -> np.ndarray:
    from snaketrack.datasets.layout import read_image

    try:
        return read_image(path)
    except (MissingFileError, FileFormatError) as e:
        raise type(e)(f"--frame {e}") from None


def _run(args: argparse.Namespace) -> int:
    import cv2

    from snaketrack.io import atomic_write_bytes, parse_size
    from snaketrack.models.robot import load_robot
    from snaketrack.tracker import robot_view as rv

    out = Path(args.out)
    if out.suffix.lower() not in (".png", ".jpg", ".jpeg"):
        raise InputError(f"--out {out}: expected a .png or .jpg file name")
    robot = load_robot(args.robot)
    q = None if args.q is None else parse_q(args.q, robot)
    if args.frame is None:
        for flag, value in (("--pose", args.pose), ("--intrinsics", args.intrinsics), ("--fov-deg", args.fov_deg)):
            if value is not None:
                raise InputError(f"{flag} places the robot in a frame's camera; give --frame IMAGE too")
        w, h = parse_size(args.size, "--size")
        img = rv.robot_sheet(robot, w, h, q)
        what = "straight and " + ("at --q" if q is not None else "in a sample pose")
    else:
        from snaketrack.tracker.camera import DEFAULT_FOV_DEG, FieldOfView, Undistorter, source_camera

        frame = _read_frame(args.frame)
        h, w = frame.shape[:2]
        intrinsics = camera_of(args) or FieldOfView(DEFAULT_FOV_DEG)
        camera = source_camera({}, w, h, intrinsics, f"--frame {args.frame}")
        if camera.has_distortion:  # the tracker works on undistorted frames
            undistort = Undistorter(camera)
            frame, camera = undistort.frame(frame), undistort.output_camera
        qv = np.zeros(robot.dof) if q is None else q
        if args.pose is None:
            pose = rv.centred_pose(robot, camera, qv)
        else:
            t0, (yaw, pitch, roll) = parse_pose(args.pose)
            pose = rv.Pose(qv, rv.base_rotation(yaw, pitch, roll), t0)
        img, mask = rv.frame_view(frame, robot, camera, pose)
        if not mask.any():
            warnings.warn("the robot's silhouette falls outside the frame; check --pose (z is the distance "
                          "along the optical axis [m])", SnaketrackWarning, stacklevel=1)
        x, y, z = pose.t0
        what = f"over {args.frame}, base at ({x:.3f}, {y:.3f}, {z:.3f}) m, fx {camera.fx:.1f} px"
    ok, buf = cv2.imencode(out.suffix.lower(), cv2.cvtColor(img, cv2.COLOR_RGB2BGR))
    if not ok:
        raise InputError(f"--out {out}: OpenCV cannot encode this image format")
    atomic_write_bytes(out, buf.tobytes())
    print(f"{out}: {robot.name} ({robot.n_links} links, {robot.total_length:.3f} m) {what}; "
          f"{img.shape[1]}x{img.shape[0]} px")
    return 0


COMMANDS = [Command(name="robot show", help="draw a robot file's silhouette, alone or over a frame",
                    add_arguments=_add_arguments, run=_run,
                    description="Draw a robot file's silhouette (the tracker's own model) to check the file: "
                                "alone, straight and in a sample pose with a table of its links and joints, or "
                                "over a frame at a given pose and camera.")]
