"""``snaketrack bench service``: a short soak on the loopback prints the service's figures as JSON."""
import json
import math

from posed_dataset import write_posed_dataset


def test_a_short_soak_prints_latency_drops_and_memory(tmp_path, capsys, run_bench):
    dataset = write_posed_dataset(tmp_path / "ds", 12, seed=4)
    code = run_bench("service", ["--dataset", dataset, "--seconds", "6", "--track-size", "320x240",
                                        "--threads", "1", "--out", tmp_path / "out"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("latency_ms_p50", "latency_ms_p95", "fps", "rss_mb_start", "rss_mb_end", "reference_fps"):
        assert math.isfinite(out[key]) and out[key] > 0, key
    assert out["latency_ms_p50"] <= out["latency_ms_p95"]
    assert out["frames_tracked"] == out["fast_client_states"] > 0  # the fast client got every state
    assert out["frames_captured"] == out["frames_tracked"] + out["frames_dropped"] or \
        out["frames_captured"] == out["frames_tracked"] + out["frames_dropped"] + 1  # one may be in the slot
    # how many the slow client misses depends on the tracker's rate here (the service tests count them)
    assert out["slow_client_states"] + out["slow_client_drops"] <= out["frames_tracked"]
    assert out["slow_client_states"] <= out["fast_client_states"]
    assert (tmp_path / "out" / "soak.png").is_file()
    # where the CPU went: the tracker's thread and both clients are named; the reference at the service's skip
    assert out["cpu_ms_per_state"]["snaketrack-track"] > 0 and out["cpu_ms_per_state_total"] > 0
    assert {"client-fast", "client-slow"} <= set(out["cpu_ms_per_state"])
    assert out["first_state_s_in_service"] > 0 and out["first_state_s"] > 0
    assert out["reference_stride"] >= 1 and out["reference_fps_at_stride"] > 0
    assert out["reference_frames_at_stride"] >= 2


def test_thread_cpu_is_told_by_thread_name():
    import threading
    import time

    from snaketrack.bench.service_rate import thread_cpu_s

    spent, done = [], threading.Event()

    def spin():  # busy until this thread has used 0.1 s of CPU by its own clock, then wait to be read
        while time.thread_time() < 0.1:
            pass
        spent.append(time.thread_time())
        done.wait(30)

    t = threading.Thread(target=spin, name="spinner")
    t.start()
    while not spent:
        time.sleep(0.01)
    cpu = thread_cpu_s()
    done.set()
    t.join()
    assert abs(cpu["spinner"] - spent[0]) <= 0.03  # /proc's clock ticks against the thread's own clock


def _write_video(dataset, path, fps=24.0):
    """The dataset's frames as an MJPG video of ``fps`` frames/s."""
    import cv2

    files = sorted((dataset / "frames").iterdir())
    h, w = cv2.imread(str(files[0])).shape[:2]
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), fps, (w, h))
    for f in files:
        writer.write(cv2.imread(str(f)))
    writer.release()
    return len(files)


def test_a_video_is_played_from_a_folder_of_its_frames(tmp_path):
    from snaketrack.bench.service_rate import _frames_folder
    from snaketrack.datasets.video import open_frames

    dataset = write_posed_dataset(tmp_path / "ds", 5, seed=2)
    n = _write_video(dataset, tmp_path / "clip.avi")
    video = open_frames(tmp_path / "clip.avi")
    folder = open_frames(_frames_folder(video, tmp_path / "frames", progress=False))
    assert len(folder) == n and folder.fps == 24.0 and (folder.width, folder.height) == (video.width, video.height)
    for (i, a), b in zip(video.frames(), (folder.frame(i) for i in range(n))):
        assert (a == b).all(), i  # lossless: the frames the video gives


def test_a_video_with_a_live_segmenter(tmp_path, capsys, run_bench):
    import torch

    from snaketrack.training.model import SegmenterConfig, build_model, save_model

    dataset = write_posed_dataset(tmp_path / "ds", 8, seed=4)
    _write_video(dataset, tmp_path / "clip.avi")
    cfg = SegmenterConfig(encoder="resnet18", input_size=(64, 96))
    torch.manual_seed(0)
    save_model(tmp_path / "m.pt", build_model(cfg), cfg)
    code = run_bench("service", ["--dataset", tmp_path / "clip.avi", "--robot", "planar-snake-11",
                                 "--masks", f"segmenter:{tmp_path / 'm.pt'}", "--segmenter-scale", "0.5",
                                 "--seconds", "4", "--threads", "1", "--out", tmp_path / "out"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["masks"] == f"segmenter:{tmp_path / 'm.pt'}" and out["frames_captured"] > 0
    # an untrained network may see no robot (no state is published then), but every frame went through it
    assert out["frames_tracked"] > 0 and out["fast_client_states"] <= out["frames_tracked"]
    assert out["cpu_ms_per_state"]["snaketrack-prepare"] > 0
    assert math.isfinite(out["reference_cpu_ms_per_frame"])


def test_bench_service_refuses_masks_other_than_a_segmenter(tmp_path, capsys, run_bench):
    code = run_bench("service", ["--dataset", tmp_path, "--masks", "truth"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "--masks truth" in err and len(err.splitlines()) == 1
