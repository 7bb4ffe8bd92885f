"""``--device``: the resolver, and the commands that take it (their help, and one line for a GPU not there)."""
import pytest

from snaketrack import cli, device
from snaketrack.device import resolve_device
from snaketrack.errors import InputError
from snaketrack.training.distributed import workers_device


@pytest.fixture
def gpus(monkeypatch):
    """``gpus(n)``: torch is made to see ``n`` CUDA GPUs (the resolver's only question to it)."""
    def see(n: int) -> None:
        monkeypatch.setattr(device, "cuda_count", lambda: n)
    return see


def test_auto_is_cuda_where_torch_sees_a_gpu_else_cpu(gpus):
    gpus(0)
    assert resolve_device("auto") == resolve_device(None) == "cpu"
    gpus(2)
    assert resolve_device("auto") == "cuda"


def test_cpu_and_cuda_resolve_to_themselves(gpus):
    gpus(2)
    assert [resolve_device(s) for s in ("cpu", "cuda", "cuda:0", "cuda:1", " cuda:1 ")] == \
        ["cpu", "cuda", "cuda:0", "cuda:1", "cuda:1"]
    gpus(0)
    assert resolve_device("cpu") == "cpu"


def test_cuda_without_a_gpu_is_one_line(gpus):
    gpus(0)
    for spec in ("cuda", "cuda:0"):
        with pytest.raises(InputError, match=rf"^--device {spec}: torch sees no CUDA GPU here \(.*\); use "
                                             r"--device cpu or auto$"):
            resolve_device(spec)


def test_a_gpu_index_past_the_last_is_refused(gpus):
    gpus(2)
    with pytest.raises(InputError, match=r"--device cuda:2: torch sees 2 CUDA GPUs \(cuda:0 to cuda:1\)"):
        resolve_device("cuda:2")


@pytest.mark.parametrize("spec", ["gpu", "CUDA", "cuda:", "cuda:x", "cuda:-1", "cpu:0", "", "mps"])
def test_other_strings_are_refused(gpus, spec):
    gpus(1)
    with pytest.raises(InputError, match=r"expected cpu, cuda, cuda:N or auto"):
        resolve_device(spec, "--device")


def test_data_parallel_workers_take_a_gpu_each_or_the_cpu(gpus):
    gpus(2)
    assert workers_device("auto", 2) == "cuda" and workers_device("cuda", 2) == "cuda"
    assert workers_device("auto", 3) == "cpu" and workers_device("cpu", 2) == "cpu"
    with pytest.raises(InputError, match="a GPU per worker, and torch sees 2"):
        workers_device("cuda", 3)
    with pytest.raises(InputError, match="use --device cuda"):
        workers_device("cuda:1", 2)
    gpus(0)
    assert workers_device("auto", 2) == "cpu"
    with pytest.raises(InputError, match="no CUDA GPU"):
        workers_device("cuda", 2)


COMMANDS = ("track", "serve", "train", "segment", "eval-seg")


@pytest.mark.parametrize("command", COMMANDS)
def test_help_lists_the_device_option(capsys, command):
    with pytest.raises(SystemExit) as e:
        cli.main([command, "--help"])
    assert e.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "--device cpu|cuda|cuda:N|auto" in out and "default auto" in out


#: each command's arguments but ``--device``: nothing is read before the device is resolved
ARGS = {"track": ["clip", "--out", "out"], "serve": ["clip", "--robot", "planar-snake-11"],
        "train": ["data", "--out", "m.pt"], "segment": ["clip", "--model", "m.pt", "--out", "out"],
        "eval-seg": ["data", "--model", "m.pt"]}


@pytest.mark.parametrize("command", COMMANDS)
def test_cuda_on_a_machine_without_one_is_one_line_and_exit_2(gpus, capsys, tmp_path, monkeypatch, command):
    if command == "serve":
        pytest.importorskip("foxglove")  # serve needs its extra before it reads an argument
    gpus(0)
    monkeypatch.chdir(tmp_path)
    assert cli.main([command, *ARGS[command], "--device", "cuda"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("snaketrack: error: --device cuda: torch sees no CUDA GPU here")
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_a_bad_device_string_is_one_line_and_exit_2(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["track", "clip", "--out", "out", "--device", "gpu"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "snaketrack: error: --device 'gpu'; expected cpu, cuda, cuda:N or auto"]
