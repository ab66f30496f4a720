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
