"""``snaketrack bench``: the registry lists every benchmark with a description, a few run their ``--quick``
configuration to a JSON object, and a wrong name or flag is one line on stderr and exit status 2."""
import json

import pytest

from snaketrack.bench import registry
from snaketrack.bench.cache import ENV, cache_dir

#: cheap benchmarks run by ``--quick`` here: a statics solve, the estimators, the Hu et al. table
QUICK = ["statics", "estimators", "reproduce-statics-table"]


def test_every_benchmark_has_a_name_a_line_and_quick_flags_it_takes():
    found = registry.benchmarks()
    assert len(found) >= 30
    for name, bench in found.items():
        assert name == bench.name and name == name.lower() and " " not in name
        assert bench.description and "\n" not in bench.description and len(bench.description) <= 100, name
        parser = registry.parser_for(bench)
        dests = {a.dest for a in parser._actions}
        assert set(bench.quick) <= dests, (name, set(bench.quick) - dests)


def test_list_prints_each_name_with_its_description(capsys):
    from snaketrack.cli import main

    assert main(["bench", "--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    found = registry.benchmarks()
    assert [line.split()[0] for line in lines] == list(found)
    for line, bench in zip(lines, found.values()):
        assert line.endswith(bench.description)


@pytest.mark.parametrize("name", QUICK)
def test_quick_runs_print_one_json_object(name, capsys, run_bench):
    assert run_bench(name, ["--quick"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert isinstance(out, dict) and out


def test_quick_fills_only_the_flags_not_given():
    bench = registry.lookup("statics")
    assert registry.parse(bench, ["--quick"]).repeats == bench.quick["repeats"]
    assert registry.parse(bench, ["--quick", "--repeats", "3"]).repeats == 3
    assert registry.parse(bench, []).repeats == 1000  # the full run's default


def test_the_statics_table_is_the_paper_s(capsys, run_bench):
    """The reproduced Table 1 agrees with the paper to its printed two decimals (an independent reference)."""
    assert run_bench("reproduce-statics-table") == 0
    out = json.loads(capsys.readouterr().out)
    assert out["all_within_tolerance"] and len(out["cases"]) == 9


@pytest.mark.parametrize("argv", [["no-such-bench"], ["statics", "--no-such-flag"], ["statics", "--repeats", "x"],
                                  [], ["statics", "--list"], ["--list", "statics"]])
def test_a_wrong_name_or_flag_is_one_line_and_status_2(argv, capsys):
    from snaketrack.cli import main

    assert main(["bench", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("snaketrack: error: ") and len(err.strip().splitlines()) == 1, err


def test_the_cache_folder_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv(ENV, str(tmp_path))
    assert cache_dir() == tmp_path
    monkeypatch.delenv(ENV)
    assert cache_dir().parts[-3:] == (".cache", "snaketrack", "bench")
