"""A campaign file: many videos, one robot, one camera, one mask source, and what to run on each.

::

    robot: planar-snake-11            # shipped name or robot YAML (relative to this file)
    intrinsics: camera.yaml           # optional: a calibration for every video (a dataset's meta.json K otherwise)
    fov_deg: 68                       # or, with no calibration: the horizontal field of view [deg]
    masks: label                      # label (label → fit-labels → one segmenter trained on all labels),
                                      # segmenter:MODEL.pt, truth (datasets) or a folder of masks per video
    label: {backend: grabcut}         # flags of `snaketrack label` (masks: label)
    fit_labels: {}                    # flags of `snaketrack fit-labels` (masks: label)
    train: {epochs: 20}               # flags of `snaketrack train` (masks: label)
    track: {track_size: 640x360}      # flags of `snaketrack track`
    estimate: {estimator: ukf}        # flags of `snaketrack estimate`; false: no estimate stage
    videos:
      - path: clips/run1.mp4
        box: 100,80,300,120           # the robot's box in the first frame (masks: label)
        track: {static_camera: true}  # per-video overrides of any section
      - glob: clips/day2/*.mp4
        box: 90,70,320,130

A section's keys are the command's long flags with ``_`` for ``-``
(``track_size: 640x360`` is ``--track-size 640x360``; ``true`` is a bare
flag, ``false`` or null leaves it out). :func:`load_campaign` checks every
path and key before anything runs and lists every problem at once.
"""
from __future__ import annotations

import glob as globlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import yaml

from snaketrack.batch.stages import ParserOf
from snaketrack.datasets.boxes import parse_box
from snaketrack.errors import InputError, SnaketrackError
from snaketrack.models.robot import available_robots, load_robot
from snaketrack.tracker.calib.camera import FieldOfView

SECTIONS = ("label", "fit_labels", "train", "track", "estimate")
COMMAND_OF = {"label": "label", "fit_labels": "fit-labels", "train": "train", "track": "track",
              "estimate": "estimate"}
_TOP = {"robot", "intrinsics", "fov_deg", "masks", "videos", *SECTIONS}


@dataclass(frozen=True)
class Video:
    """One video of a campaign: ``name`` (its output folder), ``path``, the labeller's ``box`` (or None) and
    each section's flags after the campaign's and the video's own."""

    name: str
    path: Path
    box: Optional[str]
    sections: dict[str, dict[str, Any]]


@dataclass(frozen=True)
class Campaign:
    """A checked campaign file (module doc). ``masks`` is ``label``, ``truth``, ``segmenter:MODEL`` or a folder."""

    path: Path
    robot: str
    intrinsics: Optional[Path]
    masks: str
    videos: tuple[Video, ...]
    fov_deg: Optional[float] = None
    train: dict[str, Any] = field(default_factory=dict)
    estimate: bool = True

    @property
    def labels(self) -> bool:
        """Whether the masks come from labelling every video and training one segmenter on them."""
        return self.masks == "label"


def flags(section: dict[str, Any]) -> list[str]:
    """The command-line flags of a section: ``{track_size: 640x360, no_video: true}`` →
    ``['--track-size', '640x360', '--no-video']``."""
    out: list[str] = []
    for key, value in section.items():
        flag = "--" + str(key).replace("_", "-")
        if value is True:
            out.append(flag)
        elif value is False or value is None:
            continue
        elif isinstance(value, (list, tuple)):
            out += [flag, *map(str, value)]
        else:
            out += [flag, str(value)]
    return out


def _known_flags(command: str, parser_of: ParserOf) -> set[str]:
    return {s for a in parser_of(command)._actions for s in a.option_strings}


def _slug(path: Path, taken: set[str]) -> str:
    base = re.sub(r"[^A-Za-z0-9_.-]+", "_", path.stem if path.is_file() else path.name) or "video"
    name, k = base, 2
    while name in taken:
        name, k = f"{base}-{k}", k + 1
    taken.add(name)
    return name


def load_campaign(path: str | os.PathLike, parser_of: ParserOf) -> Campaign:
    """Read and check a campaign file, each section's flags against its command's parser from ``parser_of``
    (:data:`~snaketrack.batch.stages.ParserOf`); raises one :class:`InputError` listing every problem."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such campaign file")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise InputError(f"{path}: not YAML ({str(e).splitlines()[0]})") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not a text file; expected a campaign in YAML") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a mapping with robot, masks and videos")
    root = path.resolve().parent
    problems: list[str] = []

    def where(p: str | os.PathLike) -> Path:
        p = Path(os.path.expanduser(str(p)))
        return p if p.is_absolute() else root / p

    for key in sorted(set(data) - _TOP):
        problems.append(f"unknown key {key!r} (expected {', '.join(sorted(_TOP))})")
    robot = data.get("robot")
    if not robot:
        problems.append("robot: missing (a shipped robot name or a robot YAML file)")
    else:
        if str(robot) not in available_robots() and not where(robot).is_file():
            problems.append(f"robot: {robot!r} is neither a shipped robot nor a file")
        elif str(robot) not in available_robots():
            robot = str(where(robot))
            try:
                load_robot(robot)
            except SnaketrackError as e:
                problems.append(f"robot: {' '.join(str(e).split())}")
    intrinsics = None
    if data.get("intrinsics"):
        intrinsics = where(data["intrinsics"])
        if not intrinsics.is_file():
            problems.append(f"intrinsics: no such file {intrinsics}")
    fov_deg = data.get("fov_deg")
    if fov_deg is not None:
        if intrinsics is not None:
            problems.append("fov_deg: give intrinsics or fov_deg, not both")
        elif isinstance(fov_deg, bool) or not isinstance(fov_deg, (int, float)):
            problems.append(f"fov_deg: {fov_deg!r}; expected a horizontal field of view in degrees")
        else:
            try:
                FieldOfView(fov_deg)
            except InputError as e:
                problems.append(f"fov_deg: {fov_deg!r}; {str(e).split('; ', 1)[-1]}")
    masks = str(data.get("masks", "truth"))
    if masks.startswith("segmenter:"):
        model = where(masks[len("segmenter:"):])
        if not model.is_file():
            problems.append(f"masks: no such segmenter file {model}")
        masks = f"segmenter:{model}"
    elif masks not in ("label", "truth"):
        if not where(masks).is_dir():
            problems.append(f"masks: {masks!r}; expected label, truth, segmenter:MODEL.pt or a folder")
        masks = str(where(masks))
    sections: dict[str, dict] = {}
    for name in SECTIONS:
        value = data.get(name, {})
        if name == "estimate" and value is False:
            sections[name] = {}
            continue
        if value is None:
            value = {}
        if not isinstance(value, dict):
            problems.append(f"{name}: expected a mapping of {COMMAND_OF[name]}'s flags")
            value = {}
        sections[name] = value
    known = {name: _known_flags(COMMAND_OF[name], parser_of) for name in SECTIONS}
    reserved = {"label": {"--box", "--out"}, "fit_labels": {"--out", "--robot", "--intrinsics", "--fov-deg"},
                "train": {"--out"}, "track": {"--out", "--robot", "--intrinsics", "--fov-deg", "--masks"},
                "estimate": {"--out"}}

    def check_section(name: str, section: dict, at: str) -> None:
        for key in section:
            flag = "--" + str(key).replace("_", "-")
            if flag not in known[name]:
                problems.append(f"{at}{name}.{key}: not a flag of snaketrack {COMMAND_OF[name]}")
            elif flag in reserved[name]:
                problems.append(f"{at}{name}.{key}: set by the campaign itself")

    for name in SECTIONS:
        check_section(name, sections[name], "")
    videos: list[Video] = []
    taken: set[str] = {"segmenter"}  # the campaign's own model folder
    entries = data.get("videos")
    if not isinstance(entries, list) or not entries:
        problems.append("videos: expected a list of {path: …} or {glob: …} entries")
        entries = []
    for k, entry in enumerate(entries):
        at = f"videos[{k}]."
        if isinstance(entry, str):
            entry = {"path": entry}
        if not isinstance(entry, dict) or ("path" in entry) == ("glob" in entry):
            problems.append(f"videos[{k}]: expected a mapping with path or glob")
            continue
        for key in sorted(set(entry) - {"path", "glob", "box", *SECTIONS}):
            problems.append(f"{at}{key}: unknown key (expected path, glob, box, {', '.join(SECTIONS)})")
        paths = [where(entry["path"])] if "path" in entry else \
            [Path(p) for p in sorted(globlib.glob(str(where(entry["glob"]))))]
        if "glob" in entry and not paths:
            problems.append(f"{at}glob: {entry['glob']!r} matches no file")
        own = {}
        for name in SECTIONS:
            value = entry.get(name) or {}
            if not isinstance(value, dict):
                problems.append(f"{at}{name}: expected a mapping of flags")
                value = {}
            check_section(name, value, at)
            own[name] = value
        box = entry.get("box")
        if masks == "label":
            if box is None:
                problems.append(f"{at}box: required when masks is label (X,Y,W,H of the robot in the first frame)")
            else:
                box = ",".join(map(str, box)) if isinstance(box, (list, tuple)) else str(box)
                try:
                    parse_box(box)
                except InputError as e:
                    problems.append(f"{at}box: {box!r}; {str(e).split(': ', 1)[-1]}")
        for p in paths:
            if not p.exists():
                problems.append(f"{at}path: no such video or folder {p}")
                continue
            merged = {name: {**sections[name], **own[name]} for name in SECTIONS}
            videos.append(Video(_slug(p, taken), p, None if box is None else str(box), merged))
    if problems:
        raise InputError(f"{path}: " + "; ".join(problems))
    return Campaign(path=path, robot=str(robot), intrinsics=intrinsics, masks=masks, videos=tuple(videos),
                    train=sections["train"], estimate=data.get("estimate", {}) is not False,
                    fov_deg=None if fov_deg is None else float(fov_deg))
