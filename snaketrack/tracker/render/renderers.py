"""The tracker's silhouette renderers by name.

``own`` (:class:`~snaketrack.tracker.render.silhouette.SilhouetteRenderer`, analytic capsules and
cylinders, the default), ``pytorch3d``
(:class:`~snaketrack.tracker.render.render_pytorch3d.PyTorch3DRenderer`, the robot's meshes rasterised by
PyTorch3D, the own renderer's edge on each part's outline) and ``pytorch3d-shader`` (the same, blended by
PyTorch3D's SoftSilhouetteShader); the last two need PyTorch3D (docs/renderer.md)."""
from __future__ import annotations

from snaketrack.errors import InputError
from snaketrack.tracker.render.render_pytorch3d import PyTorch3DRenderer
from snaketrack.tracker.render.silhouette import SilhouetteRenderer, SilhouetteSettings

RENDERERS = ("own", "pytorch3d", "pytorch3d-shader")


def check_renderer(name: str) -> None:
    """Raise :class:`InputError` (one line) for an unknown renderer, or for ``pytorch3d`` where PyTorch3D does
    not import."""
    if name not in RENDERERS:
        raise InputError(f"--renderer {name!r}; expected {', '.join(RENDERERS)}")
    if name.startswith("pytorch3d"):
        try:
            from pytorch3d import _C  # noqa: F401
        except (ImportError, OSError) as e:
            reason = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise InputError(f"--renderer {name}: PyTorch3D does not import here ({reason}); `make pytorch3d` "
                             "creates .venv-pytorch3d with it: run .venv-pytorch3d/bin/snaketrack") from None


def make_renderer(name: str, robot, K, width: int, height: int, model=None, settings=None, device=None):
    """The renderer ``name`` (:data:`RENDERERS`) for ``robot`` seen with intrinsics ``K`` (3, 3) [px] on a
    ``width`` × ``height`` image, drawing ``model`` (a :class:`~snaketrack.tracker.render.primitives.CapsuleModel`)
    with ``settings`` (:class:`~snaketrack.tracker.render.silhouette.SilhouetteSettings`) on ``device`` (a torch
    device; None: the CPU)."""
    check_renderer(name)
    settings = settings if settings is not None else SilhouetteSettings()
    if name.startswith("pytorch3d"):
        blend = "shader" if name == "pytorch3d-shader" else "outline"
        return PyTorch3DRenderer(robot, K, width, height, model, settings, device=device, blend=blend)
    return SilhouetteRenderer(robot, K, width, height, model, settings, device=device)
