"""The robot's visual geometry as triangle meshes fixed to its link frames (for the mesh renderer).

Each primitive of a :class:`~snaketrack.tracker.render.primitives.CapsuleModel` is tessellated with trimesh
(``trimesh.creation``): a capsule (a sphere when its end points meet) or a flat-ended cylinder, around its axis
``A→B`` in its link's frame. A link whose robot file names a mesh (``visual: {mesh: ...}``,
:class:`~snaketrack.models.robot.Visual`) is drawn by that file's mesh instead of its primitives. Boxes
(:func:`box_mesh`) are there for mesh files and tests.

A regular polygon of ``n`` sections inscribed in a circle is narrower than the circle; the tessellated
radius is scaled by ``(π/n) / sin(π/n)`` (1.0016 at n = 32), which makes the polygon's width averaged over
the directions it is seen from the circle's: a tube's silhouette is then ±0.3 % of its width off at n = 32.

Each vertex carries a growth direction ``g`` and an axial direction ``g_axial`` (in its link's frame): the part
grown so that its outline moves by δ [m] has the vertices ``v + δ (g + w g_axial)``, w ≥ 0 set by the view
(``render_pytorch3d.axial_weight``). A capsule's or sphere's radius grows by δ: ``g`` the unit vector from the
axis, no axial part. A flat-ended cylinder: ``g`` the unit radial vector and ``g_axial`` the axis' unit vector
outward at the vertex's end; with w = tan(α/2) (α the angle between the axis and the line of sight) the outline of
its end discs moves by δ where it crosses the axis' image and its sides by δ, as eroding or dilating its outline in
the image does (within 8 % between, for α ≤ 60°), where growing both ends by δ (w = 1) would move the discs'
outline by up to 1.4 δ. A mesh file's vertices: its unit vertex normals (exact where the faces meet smoothly,
approximate at sharp corners), no axial part. The mesh renderer's edge offset grows and shrinks the parts along
them.

Units: metres. Shapes: V vertices, F faces.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from snaketrack.errors import FileFormatError, MissingFileError
from snaketrack.models.robot import Robot

SECTIONS = 32


@dataclass(frozen=True)
class LinkMeshes:
    """Triangle meshes fixed to link frames, as one vertex list.

    link: (V,) link index (0-based) each vertex is fixed to; verts: (V, 3) vertex positions in their link's
    frame [m]; faces: (F, 3) vertex indices (int64); parts: (P, 4) each part's (first vertex, end vertex, first
    face, end face): one per tessellated primitive or mesh file, its vertices and faces contiguous; grow,
    grow_axial: (V, 3) each vertex's growth and axial directions in its link's frame (module doc) [m/m].

    ``link`` / ``verts`` have the fields :func:`snaketrack.models.chain.point_jacobian` reads of a silhouette
    model (``a_local`` = ``b_local`` = the vertices), so the vertices' pose Jacobian comes from the same code
    as the capsules'.
    """

    link: np.ndarray
    verts: np.ndarray
    faces: np.ndarray
    parts: np.ndarray
    grow: np.ndarray
    grow_axial: np.ndarray

    @property
    def a_local(self) -> np.ndarray:
        return self.verts

    @property
    def b_local(self) -> np.ndarray:
        return self.verts

    @property
    def n_verts(self) -> int:
        return int(len(self.verts))


def _width_scale(sections: int) -> float:
    a = np.pi / sections
    return float(a / np.sin(a))


def _along(mesh, a: np.ndarray, b: np.ndarray):
    """``mesh`` (built along z, centred at the origin) turned onto the axis a→b and moved to its middle."""
    import trimesh  # deferred: optional, the pytorch3d extra

    axis = b - a
    n = float(np.linalg.norm(axis))
    T = np.eye(4) if n < 1e-12 else trimesh.geometry.align_vectors([0.0, 0.0, 1.0], axis / n)
    T = np.array(T, float)
    T[:3, 3] = 0.5 * (a + b)
    mesh.apply_transform(T)
    return mesh


def capsule_mesh(a, b, radius: float, sections: int = SECTIONS):
    """A capsule (a sphere when ``a = b``) of ``radius`` [m] around the segment a→b (3,) [m], as a trimesh."""
    import trimesh  # deferred: optional, the pytorch3d extra

    a, b = np.asarray(a, float), np.asarray(b, float)
    r = radius * _width_scale(sections)
    length = float(np.linalg.norm(b - a))
    if length < 1e-12:
        mesh = trimesh.creation.uv_sphere(radius=r, count=[sections // 2 + 1, sections])
    else:
        mesh = trimesh.creation.capsule(height=length, radius=r, count=[sections, sections])
    return _along(mesh, a, b)


def cylinder_mesh(a, b, radius: float, sections: int = SECTIONS):
    """A flat-ended cylinder of ``radius`` [m] from a to b (3,) [m], as a trimesh."""
    import trimesh  # deferred: optional, the pytorch3d extra

    a, b = np.asarray(a, float), np.asarray(b, float)
    mesh = trimesh.creation.cylinder(radius=radius * _width_scale(sections), height=float(np.linalg.norm(b - a)),
                                     sections=sections)
    return _along(mesh, a, b)


def capsule_growth(verts, a, b) -> np.ndarray:
    """Growth directions (V, 3) of a capsule's (or sphere's) vertices ``verts`` (V, 3) around the segment a→b
    (3,) [m]: the unit vectors from the nearest axis point."""
    v, a, b = np.asarray(verts, float), np.asarray(a, float), np.asarray(b, float)
    ab = b - a
    t = np.clip((v - a) @ ab / max(float(ab @ ab), 1e-24), 0.0, 1.0)
    d = v - (a + t[:, None] * ab)
    return d / np.maximum(np.linalg.norm(d, axis=1, keepdims=True), 1e-12)


def cylinder_growth(verts, a, b) -> tuple[np.ndarray, np.ndarray]:
    """Growth and axial directions (V, 3) each of a flat-ended cylinder's vertices ``verts`` (V, 3) (all on its
    end discs) from a to b (3,) [m]: the unit radial vector (none at a disc's centre) and the axis' unit vector
    outward at the vertex's end."""
    v, a, b = np.asarray(verts, float), np.asarray(a, float), np.asarray(b, float)
    u = (b - a) / max(float(np.linalg.norm(b - a)), 1e-12)
    t = (v - a) @ u
    radial = v - a - t[:, None] * u
    n = np.linalg.norm(radial, axis=1, keepdims=True)
    radial = np.where(n > 1e-9, radial / np.maximum(n, 1e-12), 0.0)
    end = np.where(t > 0.5 * float(np.linalg.norm(b - a)), 1.0, -1.0)
    return radial, end[:, None] * u


def box_mesh(extents, centre=(0.0, 0.0, 0.0)):
    """An axis-aligned box of side lengths ``extents`` (3,) [m] centred at ``centre`` (3,) [m], as a trimesh."""
    import trimesh  # deferred: optional, the pytorch3d extra

    mesh = trimesh.creation.box(extents=np.asarray(extents, float))
    mesh.apply_translation(np.asarray(centre, float))
    return mesh


def load_mesh(path: str):
    """The triangle mesh of the file ``path`` (STL, OBJ, PLY, ... as trimesh reads them), one trimesh."""
    import trimesh  # deferred: optional, the pytorch3d extra

    try:
        mesh = trimesh.load_mesh(path, force="mesh")
    except FileNotFoundError:
        raise MissingFileError(f"{path}: mesh file not found") from None
    except Exception as e:  # trimesh raises several kinds for files it cannot read
        raise FileFormatError(f"{path}: not a mesh trimesh reads ({e})") from None
    if len(mesh.faces) == 0:
        raise FileFormatError(f"{path}: a mesh with no faces")
    return mesh


def robot_meshes(robot: Robot, model, sections: int = SECTIONS) -> LinkMeshes:
    """The robot as meshes: each primitive of ``model`` (a :class:`CapsuleModel`) tessellated in its link's
    frame, and the links with a mesh file (``robot.visual.mesh``) drawn by that file's mesh instead."""
    files: tuple[Optional[str], ...] = tuple(robot.visual.mesh) or (None,) * robot.n_links
    cyl = model.cylinders if model.cylinders is not None else np.zeros(model.n, bool)
    parts = []
    for i in range(model.n):
        link = int(model.link[i])
        if files[link] is not None:
            continue
        a, b = model.a_local[i], model.b_local[i]
        if cyl[i]:
            mesh = cylinder_mesh(a, b, float(model.radius[i]), sections)
            parts.append((link, mesh, cylinder_growth(mesh.vertices, a, b)))
        else:
            mesh = capsule_mesh(a, b, float(model.radius[i]), sections)
            g = capsule_growth(mesh.vertices, a, b)
            parts.append((link, mesh, (g, np.zeros_like(g))))
    for link, f in enumerate(files):
        if f is not None:
            parts.append((link, load_mesh(f), None))
    return join_meshes([p[0] for p in parts], [p[1] for p in parts], [p[2] for p in parts])


def join_meshes(links, meshes, grows=None) -> LinkMeshes:
    """One :class:`LinkMeshes` of trimeshes ``meshes`` fixed to links ``links`` (one index each), one part each;
    ``grows``: each mesh's growth and axial directions ((V, 3), (V, 3)), or None for its unit vertex normals and
    no axial part (default: all None)."""
    link_v, verts, faces, parts, grow, axial = [], [], [], [], [], []
    n0 = f0 = 0
    for i, (link, m) in enumerate(zip(links, meshes)):
        v = np.asarray(m.vertices, float)
        f = np.asarray(m.faces, np.int64)
        g = None if grows is None else grows[i]
        link_v.append(np.full(len(v), int(link)))
        verts.append(v)
        faces.append(f + n0)
        grow.append(np.asarray(m.vertex_normals, float) if g is None else np.asarray(g[0], float))
        axial.append(np.zeros((len(v), 3)) if g is None else np.asarray(g[1], float))
        parts.append((n0, n0 + len(v), f0, f0 + len(f)))
        n0, f0 = n0 + len(v), f0 + len(f)
    return LinkMeshes(np.concatenate(link_v), np.concatenate(verts), np.concatenate(faces),
                      np.asarray(parts, np.int64), np.concatenate(grow), np.concatenate(axial))
