"""The keys of a file's units are records built and read back in one module (metacl_lite.keys)."""
import pytest

from metacl_lite.keys import RunKey, StoryKey, TuningKey, runs_of, unit_name


def test_run_key_round_trips():
    k = RunKey("pi-metacl-lambda", 3)
    assert str(k) == "pi-metacl-lambda/3"
    assert RunKey.parse("pi-metacl-lambda/3") == k
    assert RunKey.parse(str(RunKey("finetune", 12))) == ("finetune", 12)


@pytest.mark.parametrize("bad", ["pi", "pi/", "/3", "pi/x", "a/b/3", ""])
def test_run_key_refuses_other_strings(bad):
    with pytest.raises(ValueError, match="not a run key"):
        RunKey.parse(bad)


def test_tuning_and_story_keys_keep_the_file_formats():
    assert str(TuningKey("pi", "beta", 1.0, 2)) == "pi/beta=1.0/2"
    k = StoryKey("mas-metacl-lambda", "gamma", "1e-3", 20)
    assert str(k) == "mas-metacl-lambda/gamma=1e-3/K=20"
    assert StoryKey.parse(str(k)) == k
    with pytest.raises(ValueError, match="λ-story key"):
        StoryKey.parse("mas/3")


def test_runs_of_and_methods_in():
    runs = {"pi/0": "a", "pi/1": "b", "mas/0": "c"}
    assert runs_of(runs, "pi") == {0: "a", 1: "b"}
    assert {RunKey.parse(k).method for k in runs} == {"pi", "mas"}
    assert unit_name("runs", RunKey("pi", 0)) == "runs/pi/0"


def test_unit_seed_reads_the_seed_a_units_name_ends_with():
    from metacl_lite.keys import unit_seed
    assert [unit_seed(unit_name(s, k)) for s, k in [("runs", RunKey("pi", 3)), ("references", 4),
                                                     ("units", TuningKey("pi", "beta", 1.0, 5))]] == ["3", "4", "5"]
