"""The tracker's ``device``: the CPU's track is the default's, every tensor the renderer makes follows its
inputs' device, and a session on a GPU hands that GPU to its renderer, its refinement and its segmenter.

No GPU is needed: torch is made to see one (:func:`snaketrack.device.cuda_count`) where a test only
checks which device each part is given, and a default device of ``meta`` stands in for a second device
where a test checks that no tensor is left behind (a tensor made without naming its device lands there,
and any arithmetic between it and the inputs' fails).
"""
import pytest
import torch

from snaketrack import device
from snaketrack.datasets.video import open_frames
from snaketrack.errors import InputError
from snaketrack.models.chain import point_jacobian
from snaketrack.models.robot import load_robot
from snaketrack.tracker.calib.camera import Camera
from snaketrack.tracker.fit.refine import refine_core
from snaketrack.tracker.render.silhouette import SilhouetteRenderer, render_with_jacobian, soft_silhouette
from snaketrack.tracker.run.loop import open_session
from snaketrack.tracker.run.pipeline import PipelineConfig, TrackingSession

from posed_dataset import write_posed_dataset

N = 4


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    return write_posed_dataset(tmp_path_factory.mktemp("device") / "ds", N, seed=5)


@pytest.fixture
def gpus(monkeypatch):
    def see(n: int) -> None:
        monkeypatch.setattr(device, "cuda_count", lambda: n)
    return see


def _rows(dataset, **session_kw) -> list[dict]:
    frames = open_frames(dataset)
    session = TrackingSession(load_robot(frames.meta["robot"]), Camera.from_meta(frames.meta), frames.fps,
                              **session_kw)
    rows = []
    for i, rgb in frames.frames():
        rows += [r.row for r in session.step(rgb, mask=frames.mask(i), index=i)]
    return rows


def test_the_cpu_s_track_is_the_default_s_to_the_last_digit(dataset, gpus):
    """The torch core: the one whose tensors the device places (the compiled one runs on the CPU alone)."""
    gpus(0)  # the default, auto, is the CPU here
    config = PipelineConfig(corrupt_masks=True, corrupt_seed=5, hold_frames=0, refine_core="torch", refine_steps=5)
    default, cpu = _rows(dataset, config=config), _rows(dataset, config=config, device="cpu")
    assert len(default) == N and [r["status"] for r in default] == ["tracked"] * N
    assert cpu == default


def _planar_primitives():
    robot = load_robot("planar-snake-11")
    r = SilhouetteRenderer(robot, [[400, 0, 159.5], [0, 400, 119.5], [0, 0, 1]], 320, 240)
    q = torch.linspace(-0.3, 0.3, r.layout.n_joints, dtype=torch.float64)
    P, G = point_jacobian(robot, r.model, q, torch.eye(3, dtype=torch.float64),
                          torch.tensor([0.0, 0.0, 1.2], dtype=torch.float64))
    return r, P, G


def test_the_renderer_makes_its_tensors_on_its_inputs_device():
    """With torch's default device ``meta``, every tensor made without naming a device would land there:
    the silhouette and its Jacobian on the CPU inputs come out whole, on the CPU, as without it."""
    r, P, G = _planar_primitives()
    radii = torch.as_tensor(r.model.radius, dtype=torch.float64)
    cyl = r.model.cylinders
    assert cyl is not None and cyl.any() and not cyl.all()  # both kinds: the primitives are reordered

    def render():
        kw = dict(with_offset=True, offset_px=0.4, cylinders=cyl)
        return (render_with_jacobian(P[None, :, 0], P[None, :, 1], radii, r.K, (20, 10, 280, 220), G,
                                     image_size=(320, 240), compute_dtype=torch.float32, **kw),
                render_with_jacobian(P[None, :, 0], P[None, :, 1], radii, r.K, (20, 10, 280, 220), G, **kw),
                soft_silhouette(P[None, :, 0], P[None, :, 1], radii, r.K, (20, 10, 280, 220),
                                offset_px=torch.tensor([0.4], dtype=torch.float64, device="cpu"), cylinders=cyl))

    ref = render()
    with torch.device("meta"):
        got = render()
    for a, b in zip(ref[:2], got[:2]):
        assert a.rows.numel() > 100 and a.jac.shape[1] == G.shape[-1] + 1
        for x, y in ((a.sil, b.sil), (a.rows, b.rows), (a.jac, b.jac)):
            assert y.device.type == "cpu" and torch.equal(x, y)
    assert got[2].device.type == "cpu" and torch.equal(ref[2], got[2]) and float(ref[2].sum()) > 100


def test_on_a_gpu_auto_refines_with_the_torch_core_and_compiled_is_refused():
    assert refine_core("auto", device="cuda") == refine_core("torch", device="cuda:1") == "torch"
    assert refine_core("auto", device="cpu") in ("compiled", "torch")  # compiled where numba is installed
    with pytest.raises(InputError, match="refine core 'compiled' runs on the CPU"):
        refine_core("compiled", device="cuda")


def test_a_session_gives_its_device_to_the_renderer_and_the_refiners(gpus):
    gpus(1)
    robot = load_robot("planar-snake-11")
    camera = Camera.from_K([[400, 0, 159.5], [0, 400, 119.5], [0, 0, 1]], 320, 240)
    session = TrackingSession(robot, camera).start()  # auto: the GPU torch sees
    tracker = session.tracker
    assert session.device == "cuda"
    assert tracker.renderer.device == torch.device("cuda")
    for refiner in (tracker.refiner, tracker.search_refiner, tracker.search.wide_refiner):
        assert refiner.device == torch.device("cuda") and refiner.core == "torch"
    cpu = TrackingSession(robot, camera, device="cpu").start()
    assert cpu.device == "cpu" and cpu.tracker.renderer.device == torch.device("cpu")
    with pytest.raises(InputError, match="refine core 'compiled' runs on the CPU"):
        TrackingSession(robot, camera, config=PipelineConfig(refine_core="compiled"), device="cuda:0").start()


def test_a_recorded_source_s_segmenter_is_loaded_on_the_session_s_device(dataset, gpus, tmp_path, monkeypatch):
    import snaketrack.tracker.run.loop as run_module

    gpus(1)
    asked = []

    def load(path, device="cpu", **kw):
        asked.append((str(path), device, kw.get("setting")))
        return object()

    monkeypatch.setattr(run_module, "load_segmenter", load)  # where the run looks it up
    model = tmp_path / "m.pt"
    model.write_bytes(b"")
    _, session, masks = open_session(dataset, masks=f"segmenter:{model}")
    assert asked == [(str(model), "cuda", "live")] and session.device == "cuda"
    assert session.segmenter is masks.segmenter
    _, session, _ = open_session(dataset, masks=f"segmenter:{model}", config=PipelineConfig(device="cpu"))
    assert asked[-1][1] == "cpu" and session.device == "cpu"


def test_a_bad_device_is_refused_by_the_configuration_and_a_missing_gpu_by_the_session(gpus):
    gpus(0)
    with pytest.raises(InputError, match="expected cpu, cuda, cuda:N or auto"):
        PipelineConfig(device="tpu")
    config = PipelineConfig(device="cuda:1")  # a GPU is looked for where the session runs
    robot = load_robot("planar-snake-11")
    camera = Camera.from_K([[400, 0, 159.5], [0, 400, 119.5], [0, 0, 1]], 320, 240)
    with pytest.raises(InputError, match="--device cuda:1: torch sees no CUDA GPU"):
        TrackingSession(robot, camera, config=config)
    assert TrackingSession(robot, camera, config=config, device="cpu").device == "cpu"
