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
