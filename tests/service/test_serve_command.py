"""``snaketrack serve`` / ``listen`` as processes: SIGTERM closes a readable, indexed MCAP and exits 0;
kill -9 leaves one the ``mcap`` reader recovers up to the last written chunk; bad arguments get one line
and exit status 2 before anything starts."""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest
from mcap.reader import make_reader
from mcap.records import Message
from mcap.stream_reader import StreamReader

from snaketrack.service import StateClient

from posed_dataset import write_posed_dataset


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    return write_posed_dataset(tmp_path_factory.mktemp("serve") / "ds", 10, seed=2)


def _start(args):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.Popen([sys.executable, "-m", "snaketrack", "serve", *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    line = proc.stderr.readline()
    assert line.startswith("serving ws://127.0.0.1:"), line + proc.stderr.read()
    return proc, line.split()[1]


def _states(url, n):
    with StateClient(url) as client:
        got = []
        for s in client.states(timeout=30):
            got.append(s)
            if len(got) >= n:
                break
    return got


def test_sigterm_flushes_and_closes_the_recording_and_exits_0(dataset, tmp_path):
    record = tmp_path / "run.mcap"
    proc, url = _start([dataset, "--port", 0, "--loop", "--realtime", "--refine-steps", 3, "--record", record])
    try:
        assert len(_states(url, 5)) == 5
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    figures = json.loads(out.strip().splitlines()[-1])
    assert figures["frames_tracked"] >= 5
    with open(record, "rb") as f:
        reader = make_reader(f)
        summary = reader.get_summary()
        assert summary is not None and summary.chunk_indexes  # indexed
        n = sum(1 for _ in reader.iter_messages(topics=["/snake/joint_states"]))
    assert n == figures["frames_tracked"]


def test_kill_9_leaves_a_recording_readable_up_to_its_last_chunk(dataset, tmp_path):
    record = tmp_path / "run.mcap"
    proc, url = _start([dataset, "--port", 0, "--loop", "--realtime", "--refine-steps", 3, "--record", record])
    try:
        assert len(_states(url, 5)) == 5
        time.sleep(2.5)  # the service finishes a chunk every second
        proc.kill()
        proc.wait(30)
    finally:
        proc.kill()
    with open(record, "rb") as f:
        try:
            summary = make_reader(f).get_summary()
        except Exception:
            summary = None
    assert summary is None  # no summary, no footer: a killed file
    messages = 0
    with open(record, "rb") as f:
        try:
            for record_ in StreamReader(f).records:
                messages += isinstance(record_, Message)
        except Exception:  # the truncated tail: everything before it was read
            pass
    assert messages >= 5


def _fails(args, match, capsys=None):
    """``snaketrack ARGS`` exits with status 2 and one line on stderr holding ``match``: in a process of its
    own, or, given ``capsys``, through the console script's entry point in this one (no start-up cost)."""
    args = [str(a) for a in args]
    if capsys is None:
        r = subprocess.run([sys.executable, "-m", "snaketrack", *args], capture_output=True, text=True, timeout=60)
        status, out, err = r.returncode, r.stdout, r.stderr
    else:
        from snaketrack.cli import main

        try:
            status = main(args)
        except SystemExit as e:
            status = e.code
        out, err = capsys.readouterr()
    assert status == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and match in lines[0], err
    assert out == ""


def test_bad_arguments_get_one_line_and_status_2(dataset, tmp_path, capsys):
    model = tmp_path / "model.pt"
    model.write_bytes(b"")
    token = tmp_path / "token"
    token.write_text("short\n")
    existing = tmp_path / "old.mcap"
    existing.write_bytes(b"x")
    _fails(["serve", "7", "--robot", "planar-snake-11", "--intrinsics", "none.yaml", "--masks", f"segmenter:{model}"],
           "no camera answered")
    _fails(["serve", "http://127.0.0.1:9/stream", "--robot", "planar-snake-11", "--masks", f"segmenter:{model}"],
           "no stream answered", capsys)
    _fails(["serve", "0", "--robot", "planar-snake-11", "--masks", f"segmenter:{tmp_path / 'none.pt'}"],
           "no such segmenter file", capsys)
    _fails(["serve", dataset, "--host", "0.0.0.0", "--token-file", token], "at least 8 characters", capsys)
    _fails(["serve", dataset, "--token-file", tmp_path / "missing"], "no such file", capsys)
    _fails(["serve", dataset, "--host", "0.0.0.0"], "needs a token", capsys)
    _fails(["serve", dataset, "--record", existing], "the file exists", capsys)
    _fails(["serve", tmp_path / "nothing.mp4"], "no such video file", capsys)
    _fails(["serve", dataset, "--threads", "0"], "--threads 0: expected at least 1", capsys)
    _fails(["serve", dataset, "--catch-up-gap", "-1"], "--catch-up-gap -1 and --catch-up-s 1.0", capsys)
    _fails(["listen", "ws://127.0.0.1:9"], "no service answered", capsys)
    _fails(["listen", "http://127.0.0.1:9"], "expected a WebSocket URL")
    _fails(["listen", "ws://127.0.0.1:99999"], "Port out of range", capsys)
    assert existing.read_bytes() == b"x"
    (tmp_path / "no-masks").mkdir()
    _fails(["serve", dataset, "--masks", tmp_path / "no-masks"], "000000.png: no such mask", capsys)


def test_a_port_in_use_is_one_line_and_leaves_no_recording(dataset, tmp_path, capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        _fails(["serve", dataset, "--port", port, "--record", tmp_path / "new.mcap"], f"--port {port}: cannot serve",
               capsys)
    assert not (tmp_path / "new.mcap").exists()  # a second try is not refused for the file a failed one left


def test_an_unreadable_frame_is_skipped_with_one_line_and_counted(dataset, tmp_path):
    broken = tmp_path / "ds"
    shutil.copytree(dataset, broken)
    (broken / "masks" / "000001.png").write_bytes(b"not a png")
    r = subprocess.run([sys.executable, "-m", "snaketrack", "serve", broken, "--port", "0", "--max-frames", "4",
                        "--refine-steps", "3"], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    skipped = [line for line in r.stderr.splitlines() if "frame skipped" in line]
    assert len(skipped) == 1 and "000001.png: not a readable mask image" in skipped[0], r.stderr
    figures = json.loads(r.stdout.strip().splitlines()[-1])
    assert figures["errors"] == 1 and figures["frames_tracked"] == 3


def test_listen_prints_the_states_as_json_lines(dataset):
    proc, url = _start([dataset, "--port", 0, "--loop", "--realtime", "--refine-steps", 3])
    try:
        r = subprocess.run([sys.executable, "-m", "snaketrack", "listen", url, "--count", "3"], capture_output=True,
                           text=True, timeout=120)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
    assert r.returncode == 0, r.stderr
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    assert len(rows) == 3 and all(len([k for k in row if k.startswith("q_")]) == 10 for row in rows)
    assert proc.returncode == 0


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_during_the_first_search_beside_a_busy_process_exits_0_with_a_closed_recording(dataset, tmp_path,
                                                                                                sig):
    """Signalled at once, while the first frame's pose search runs on a CPU shared with a busy process: exit
    status 0, no native library's abort message, an indexed MCAP holding exactly the states published."""
    from snaketrack.cpu_load import Competitor

    record = tmp_path / "run.mcap"
    with Competitor(limit_s=300):
        proc, url = _start([dataset, "--port", 0, "--loop", "--realtime", "--record", record])
        try:
            time.sleep(0.5)
            proc.send_signal(sig)
            out, err = proc.communicate(timeout=120)
        finally:
            proc.kill()
    assert proc.returncode == 0, err
    assert "terminate called" not in err and "Traceback" not in err, err
    figures = json.loads(out.strip().splitlines()[-1])
    with open(record, "rb") as f:
        reader = make_reader(f)
        summary = reader.get_summary()
        assert summary is not None and summary.chunk_indexes is not None  # closed: summary and footer written
        states = sum(1 for _ in reader.iter_messages(topics=["/snake/state"]))
        status = [json.loads(msg.data) for _, _, msg in reader.iter_messages(topics=["/snake/status"])]
    assert states <= figures["frames_tracked"]
    assert status and status[-1]["state"] == "ended"
