"""The shared-CPU benchmark's check that a stopped ``serve`` closed its recording with a summary, against the
mcap library's reader; a command it does not know is one line."""
from mcap.reader import make_reader
from mcap.writer import Writer

from snaketrack.bench.suite.shared_cpu import mcap_has_summary


def _record(path, finish: bool) -> None:
    with open(path, "wb") as f:
        w = Writer(f)
        w.start()
        schema = w.register_schema(name="s", encoding="jsonschema", data=b"{}")
        channel = w.register_channel(topic="/t", message_encoding="json", schema_id=schema)
        for i in range(3):
            w.add_message(channel, log_time=i, data=b"{}", publish_time=i)
        if finish:
            w.finish()


def test_a_finished_recording_has_its_summary_and_a_cut_one_has_none(tmp_path):
    done, cut = tmp_path / "done.mcap", tmp_path / "cut.mcap"
    _record(done, True)
    _record(cut, False)
    with open(done, "rb") as f:
        assert make_reader(f).get_summary() is not None
    assert mcap_has_summary(done)
    assert not mcap_has_summary(cut)
    assert not mcap_has_summary(tmp_path / "missing.mcap")
    cut.write_bytes(done.read_bytes()[:-5])  # the magic cut short
    assert not mcap_has_summary(cut)


def test_an_unknown_command_is_one_line(tmp_path, capsys, run_bench):
    assert run_bench("shared-cpu", ["--clip", str(tmp_path), "--commands", "both"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "both" in err[0] and "track" in err[0]
