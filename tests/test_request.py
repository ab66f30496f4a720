"""The request of a grid command (`lab.request`): built and checked once, frozen, carrying the benchmark's spec."""
import dataclasses

import pytest

from metacl_lite.data.specs import get_spec
from metacl_lite.errors import UsageError
from metacl_lite.lab import grid as G
from metacl_lite.lab import tuning as TU
from metacl_lite.lab.request import RunRequest, TuneRequest


def test_a_run_request_carries_the_spec_and_the_resolved_configuration(hparams_file, tmp_path):
    req = G.run_request("pmnist", 5, seeds=[0, 1], methods=["finetune"], out=tmp_path / "r.json", n_tasks=2,
                        epochs=1)
    assert isinstance(req, RunRequest) and req.spec is get_spec("pmnist") and req.benchmark == "pmnist"
    assert req.config["seeds"] == [0, 1] and req.config["methods"] == ["finetune"] and req.config["n_tasks"] == 2
    assert req.cfgs["finetune"] == req.base_cfg and req.options["device"] == "cpu"
    with pytest.raises(dataclasses.FrozenInstanceError):
        req.K = 20


def test_a_tune_request_records_its_protocol(tmp_path):
    req = TU.tune_request("pmnist", 5, n_tasks=2, epochs=1, seeds=[100], methods=["ewc"], out=tmp_path / "t.json",
                          write_hparams=False, beta_grid=[0.1, 1.0])
    assert isinstance(req, TuneRequest) and req.spec is get_spec("pmnist") and not req.write
    assert req.protocol["beta_grid"] == [0.1, 1.0] and req.protocol["seeds"] == [100] and "ewc" in req.protocol[
        "method_options"]


@pytest.mark.parametrize("kw, needle", [(dict(seeds=[0, 0]), "seed 0 is given twice"),
                                        (dict(methods=["nope"]), "nope"),
                                        (dict(redo=["ewc"], methods=["finetune"]), "--redo ewc: not among")])
def test_a_bad_request_is_refused_where_it_is_built(hparams_file, tmp_path, kw, needle):
    with pytest.raises(UsageError, match=needle):
        G.run_request("pmnist", 5, **{"out": tmp_path / "r.json", **kw})
    assert not (tmp_path / "r.json").exists()
