"""A method family's options as its data (issue 41 item 6): each option is declared once in the vocabulary
(`vocab.Option`: its default, check, label, help and the families that read it), and the config, the command line,
the checks, the tuning's alternatives and the registry of estimators follow from the declarations."""
from __future__ import annotations

import argparse
import dataclasses

import pytest

from metacl_lite import vocab
from metacl_lite.errors import UsageError
from metacl_lite.importance import ESTIMATORS, Importance, estimator, estimator_of
from metacl_lite.lab.checks import check_options, option_values
from metacl_lite.training import METHODS, TrainConfig


def test_the_config_has_one_field_per_declared_option_with_its_default_in_the_declared_order():
    fields = [f.name for f in dataclasses.fields(TrainConfig)]
    names = [o.name for o in vocab.OPTION_TABLE]
    assert fields[fields.index(names[0]): fields.index(names[0]) + len(names)] == names
    assert fields[:fields.index(names[0])] == ["epochs", "batch_size", "bundle_size", "inner_lr", "outer_lr", "beta",
                                               "gamma"]  # Appendix B's, then the options, then the run's settings
    cfg = TrainConfig()
    assert {o.name: getattr(cfg, o.name) for o in vocab.OPTION_TABLE} == {o.name: o.default for o in vocab.OPTION_TABLE}
    assert option_values({}) == {k: vocab.OPTIONS[k].default for k in vocab.OMEGA_OPTIONS}


def test_every_default_passes_its_own_check_and_a_bad_value_is_refused_naming_the_option():
    for o in vocab.OPTION_TABLE:
        vocab.check_option(o.name, o.default)
        with pytest.raises(UsageError, match=f"^{o.name}=-1 "):
            TrainConfig(**{o.name: -1})
    with pytest.raises(ValueError, match=r"^pi_xi=nan must be a finite positive number"):
        vocab.check_option("pi_xi", float("nan"))
    with pytest.raises(ValueError, match=r"^fisher='exact' is not an option; choose one of empirical, expected$"):
        vocab.check_option("fisher", "exact")


def test_the_open_options_are_the_checked_ones_and_the_flags():
    from metacl_lite.cli.options import choice_options, omega_options_of, option_flag

    assert set(vocab.OMEGA_OPTIONS) == {o.name for o in vocab.OPTION_TABLE if o.open}
    with pytest.raises(UsageError, match="unknown option"):
        check_options({o.name: o.default for o in vocab.OPTION_TABLE if not o.open})
    p = argparse.ArgumentParser(exit_on_error=False)
    choice_options(p)
    flags = {a.option_strings[0] for a in p._actions if a.option_strings and a.dest != "help"}
    assert flags == {option_flag(vocab.OPTIONS[k]) for k in vocab.OMEGA_OPTIONS}
    assert omega_options_of(p.parse_args([])) == {}
    given = {k: vocab.OPTIONS[k].default for k in vocab.OMEGA_OPTIONS}
    argv = [x for k, v in given.items() for x in (option_flag(vocab.OPTIONS[k]), str(v))]
    assert omega_options_of(p.parse_args(argv)) == given == check_options(given)


def test_options_of_a_method_are_those_of_its_family():
    assert {o.name for o in vocab.options_of("pi-metacl-lambda")} == {o.name for o in vocab.OPTION_TABLE
                                                                      if "pi" in o.applies_to}
    assert "pi_xi" not in {o.name for o in vocab.options_of("ewc")}
    assert vocab.options_of("finetune") == vocab.options_of("metacl") == vocab.options_of(vocab.ORACLE) == ()


def test_an_alternative_is_tried_for_the_regularisers_that_read_every_option_it_sets():
    order = tuple(sorted(vocab.PAPER_REGULARISERS))
    for a in vocab.ALTERNATIVES:
        assert a.regularisers == tuple(r for r in order
                                       if set(a.options) <= {o.name for o in vocab.options_of(r)}) != ()
        check_options(a.options)
    assert vocab.ALTERNATIVES[0].options == {} and vocab.ALTERNATIVES[0].regularisers == order  # "base"


def test_each_regulariser_registered_its_class_and_a_second_registration_is_refused():
    assert set(ESTIMATORS) == set(vocab.REGULARISERS)
    assert all(issubclass(estimator_of(r), Importance) for r in vocab.REGULARISERS)
    assert {m.regulariser for m in METHODS.values()} - {None} == set(vocab.REGULARISERS)
    with pytest.raises(ValueError, match="'si' is not a regulariser of the vocabulary"):
        estimator("si")(type("SI", (Importance,), {}))
    with pytest.raises(ValueError, match=r"@estimator\('pi'\) is already PI, not Other"):
        estimator("pi")(type("Other", (Importance,), {}))
    assert estimator_of("pi").__name__ == "PI"


def test_an_option_is_an_open_choice_a_setting_or_a_budget():
    """`Option.role` (issue 44): the open choices are decided on validation data and recorded per method; EWC's Fisher
    is a setting of the package (config.train); the memory's M is a budget, neither open nor tuned: a run sets it,
    a results file records it per method that reads it (`checks.recorded_options`), never in config.train."""
    from metacl_lite.lab.checks import recorded_options

    assert {o.role for o in vocab.OPTION_TABLE} <= set(vocab.ROLES)
    assert vocab.OPTIONS["fisher"].role == "setting" and vocab.OPTIONS["memory"].role == "budget"
    assert vocab.BUDGET_OPTIONS == ("memory",) and vocab.RUN_OPTIONS == (*vocab.OMEGA_OPTIONS, "memory")
    assert not vocab.OPTIONS["memory"].open and "memory" not in vocab.OMEGA_OPTIONS
    assert recorded_options("agem") == ("memory",) and recorded_options("finetune") == ()
    assert recorded_options("pi") == vocab.OMEGA_OPTIONS  # as results files always recorded
    assert recorded_options("ewc-metacl-lambda-mem") == (*vocab.OMEGA_OPTIONS, "memory")
    assert "memory" not in TrainConfig().to_dict() and TrainConfig(memory=2).to_dict()["memory"] == 2
    assert TrainConfig(**TrainConfig(memory=3).to_dict()).memory == 3  # a unit's config carries a budget that is set


@pytest.mark.parametrize("value", [1.5, 1.0, "1", True, 0, -2, None])
def test_a_count_is_a_whole_number_at_least_one_and_at_most_its_limit(value):
    with pytest.raises(ValueError, match=f"^memory={value!r} must be a whole number >= 1"):
        vocab.check_option("memory", value)
    with pytest.raises(UsageError, match=f"^memory={value!r} must be a whole number"):
        TrainConfig(memory=value)
    vocab.check_option("memory", 3, {"K": 3})
    with pytest.raises(ValueError, match=r"^memory=4 must be at most K=3$"):
        vocab.check_option("memory", 4, {"K": 3})


def test_a_budget_or_an_open_choice_is_refused_where_no_method_of_the_run_reads_it():
    """A budget given to a run none of whose methods reads it would be recorded nowhere: refused, naming it. An open
    choice is the file's (config.train): taken beside a method that reads it (`--pi-xi` beside PI and EWC), refused
    where none does (issue 54: `--pi-xi` with EWC alone was recorded, and the same command without it refused)."""
    assert check_options({"memory": 2}, ["finetune", "agem"], {"K": 5}) == {"memory": 2}
    with pytest.raises(UsageError, match=r"^memory=2 applies only to the methods that read it \(agem, er, "):
        check_options({"memory": 2}, ["finetune", "mas-metacl-lambda"], {"K": 5})
    with pytest.raises(UsageError, match=r"^memory=6 must be at most K=5"):
        check_options({"memory": 6}, ["agem"], {"K": 5})
    assert check_options({"pi_xi": 0.001}, ["ewc", "pi"]) == {"pi_xi": 0.001}
    with pytest.raises(UsageError, match=r"^pi_xi=0.001 applies only to the methods that read it \(pi, "):
        check_options({"pi_xi": 0.001}, ["ewc"])
    assert check_options({"memory": 2}) == {"memory": 2}  # no methods given (a tuning): the value's check only


def test_the_budgets_are_flags_of_run_and_tune_only():
    """run and tune (issue 44: `tune --memory M` chooses the two-reference methods' gamma) take a budget; choices,
    which decides the open choices, does not."""
    from metacl_lite.cli.parser import build_parser

    p = build_parser()
    a = p.parse_args(["run", "--benchmark", "pmnist", "--K", "5", "--methods", "agem", "--memory", "3"])
    assert a.memory == 3
    from metacl_lite.cli.options import omega_options_of

    assert omega_options_of(a) == {"memory": 3}
    t = p.parse_args(["tune", "--benchmark", "pmnist"])
    assert omega_options_of(t) == {} and t.memory is None
    assert omega_options_of(p.parse_args(["tune", "--memory", "2"])) == {"memory": 2}
    assert not hasattr(p.parse_args(["choices"]), "memory")


def test_a_tuning_request_checks_a_budget_as_a_run_does():
    """`tune_request` hands its methods and K to `check_options`: a memory budget for methods none of which reads
    it, or one above K, is refused before any work."""
    from metacl_lite.errors import UsageError
    from metacl_lite.lab.tuning import tune_request

    with pytest.raises(UsageError, match="applies only to the methods that read it"):
        tune_request("pmnist", 20, methods=["mas"], options={"memory": 1})
    with pytest.raises(UsageError, match="memory=6 must be at most K=5"):
        tune_request("pmnist", 5, methods=["mas-metacl-lambda-mem"], options={"memory": 6})
