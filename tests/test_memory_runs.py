"""The memory family's methods through the lab and the command line (issue 44): `run --methods
agem,er,metacl-agem,mas-metacl-lambda-mem --memory M` trains and resumes on a small stream; --memory is checked before
any work (a whole number, 1 <= M <= K, only where a method of the run reads it), recorded per method in the results
file (one budget per file: a file that would mix them is refused) and in its command; MetaCL-lambda with both
references reads MetaCL-lambda's gamma unless it has its own; the numbers do not depend on the executor, the workers or
the threads; and the paper's claims never see these methods."""
import json

import pytest

from metacl_lite import vocab
from metacl_lite.cli import main
from metacl_lite.cli.options import omega_options_of
from metacl_lite.cli.parser import build_parser
from metacl_lite.errors import ConfigMismatch, UsageError
from metacl_lite.lab import grid as G
from metacl_lite.lab import hparams as H
from metacl_lite.lab.executors import check_plan
from metacl_lite import training as T
from metacl_lite.data.mnist import permuted_mnist

MEMORY = ["agem", "er", "metacl-agem", "mas-metacl-lambda-mem"]
TINY = ["--K", "5", "--n-tasks", "2", "--epochs", "1", "--seeds", "1", "--no-progress", "--workers", "1"]
SMALL = dict(K=5, n_tasks=2, epochs=1, show_progress=False)


def test_the_memory_methods_train_and_resume_from_the_command_line(hparams_before_memory_tuning, capsys, tmp_path,
                                                                   monkeypatch):
    out = tmp_path / "r.json"
    argv = ["run", "--benchmark", "pmnist", *TINY, "--methods", ",".join(MEMORY), "--memory", "1", "--out", str(out)]
    real, calls = T.run_stream, []

    def killed_after_two(*a, **k):
        if len(calls) == 2:
            raise KeyboardInterrupt
        calls.append(a[1])
        return real(*a, **k)

    monkeypatch.setattr(G, "run_stream", killed_after_two)
    assert main(argv) == 130
    saved = json.loads(out.read_text())
    assert len(saved["runs"]) == 2
    before = {k: v["acc_matrix"] for k, v in saved["runs"].items()}
    calls.clear()
    monkeypatch.setattr(G, "run_stream", lambda *a, **k: (calls.append(a[1]), real(*a, **k))[1])
    assert main(argv) == 0, capsys.readouterr().err
    res = json.loads(out.read_text())
    assert len(calls) == 2 and set(res["runs"]) == {f"{m}/0" for m in MEMORY}  # only the two left were trained
    assert all(res["runs"][k]["acc_matrix"] == v for k, v in before.items())
    c = res["config"]
    assert c["methods"] == MEMORY and "memory" not in c["train"]
    assert {m: o["memory"] for m, o in c["method_options"].items()} == dict.fromkeys(MEMORY, 1)
    assert c["method_hparams"]["mas-metacl-lambda-mem"] == H.method_hparams("pmnist", "mas-metacl-lambda", K=5)
    assert c["hparams_source"]["mas-metacl-lambda-mem"].startswith("mas-metacl-lambda's gamma, ")
    assert all(set(u["state_bytes"]) == {"memory", "regulariser"} for u in res["runs"].values())
    assert res["runs"]["agem/0"]["state_bytes"]["memory"] == 2 * 10 * (784 + 1 + 1)  # 2 tasks x 10 classes x M, uint8
    assert c["memory_policy"] == "balanced"
    capsys.readouterr()
    assert main(["table", str(out)]) == 0
    table = capsys.readouterr().out
    assert table.index("Joint training") < table.index("A-GEM (not in the paper)") < table.index(
        "MAS-MetaCL-λ-mem (not in the paper)")


def _no_work(monkeypatch):
    def boom(*a, **k):
        raise AssertionError("training started before the input was checked")
    monkeypatch.setattr(G, "execute_unit", boom)


@pytest.mark.parametrize("value,methods,needle", [
    ("0", "agem", "--memory must be positive, got 0"),
    ("-1", "agem", "--memory must be positive, got -1"),
    ("1.5", "agem", "--memory must be an integer, got '1.5'"),
    ("1.0", "er", "--memory must be an integer, got '1.0'"),
    ("6", "agem", "memory=6 must be at most K=5"),
    ("1", "mas,finetune", "memory=1 applies only to the methods that read it"),
])
def test_a_bad_memory_stops_with_one_line_naming_it_before_any_work(capsys, tmp_path, monkeypatch, value, methods,
                                                                     needle):
    _no_work(monkeypatch)
    out = tmp_path / "r.json"
    try:
        rc = main(["run", "--benchmark", "pmnist", *TINY, "--methods", methods, "--memory", value, "--out", str(out)])
    except SystemExit as e:  # argparse's refusal
        rc = e.code
    err = capsys.readouterr().err
    assert rc == 2 and needle in err and "Traceback" not in err and not out.exists()
    assert err.strip().splitlines()[-1].count("memory") >= 1


@pytest.mark.parametrize("value", [1.5, 1.0, True, "1", 0])
def test_library_callers_get_the_same_check(hparams_file, spy_units, tmp_path, value):
    with pytest.raises(UsageError, match=f"^memory={value!r} must be a whole number >= 1"):
        G.run_experiment("pmnist", seeds=[0], methods=["agem"], out=tmp_path / "r.json", options={"memory": value},
                         **SMALL)
    assert spy_units == [] and not (tmp_path / "r.json").exists()


@pytest.fixture
def spy_units(fake_units):
    return fake_units


def test_the_budget_is_recorded_per_method_in_the_command_and_one_per_file(hparams_file, spy_units, tmp_path):
    out = tmp_path / "r.json"
    G.run_experiment("pmnist", seeds=[0], methods=["finetune", "agem", "mas-metacl-lambda-mem"], out=out,
                     options={"memory": 2}, **SMALL)
    cfgs = {(u.kind, u.method): c for u, c in spy_units}
    assert cfgs[("run", "agem")].memory == cfgs[("run", "mas-metacl-lambda-mem")].memory == 2
    assert cfgs[("run", "finetune")] == cfgs[("reference", None)] == T.TrainConfig(epochs=1)  # M is not theirs
    doc = json.loads(out.read_text())
    c = doc["config"]
    assert c["method_options"]["agem"] == {"memory": 2} and c["method_options"]["mas-metacl-lambda-mem"]["memory"] == 2
    assert "finetune" not in c["method_options"] and "memory" not in c["train"]
    command = doc["provenance"]["command"]
    assert " --memory 2" in command
    a = build_parser().parse_args(command.split()[3:])
    assert omega_options_of(a) == {"memory": 2} and a.methods == c["methods"]
    G.run_experiment("pmnist", seeds=[1], methods=["er"], out=out, options={"memory": 2}, **SMALL)  # same budget
    merged = json.loads(out.read_text())["config"]
    assert merged["method_options"]["agem"] == {"memory": 2} and merged["method_options"]["er"] == {"memory": 2}
    with pytest.raises(ConfigMismatch, match=r"memory: \[2\] in the file, \[3\] here"):
        G.run_experiment("pmnist", seeds=[0], methods=["metacl-agem"], out=out, options={"memory": 3}, **SMALL)
    with pytest.raises(ConfigMismatch, match=r"method_options\[agem\]"):
        G.run_experiment("pmnist", seeds=[0], methods=["agem"], out=out, **SMALL)  # the default M = 1
    default = tmp_path / "d.json"
    G.run_experiment("pmnist", seeds=[0], methods=["agem"], out=default, **SMALL)
    doc = json.loads(default.read_text())
    assert doc["config"]["method_options"]["agem"] == {"memory": 1} and "--memory" not in doc["provenance"]["command"]


def test_metacl_lambda_with_both_references_reads_metacl_lambdas_gamma_unless_it_has_its_own(hparams_file, tmp_path,
                                                                                           spy_units):
    hparams_file({"pmnist": {"methods": {"mas-metacl-lambda": {"gamma": 0.25}}, "source": "t.json", "command": "c"}})
    assert H.method_hparams("pmnist", "mas-metacl-lambda-mem", K=5) == {"gamma": 0.25}
    assert H.hparams_source("pmnist", ["mas-metacl-lambda-mem"], K=5) == {
        "mas-metacl-lambda-mem": "mas-metacl-lambda's gamma, default: t.json"}
    assert H.method_hparams("pmnist", "agem") == {} and H.strength_key("agem") is None
    G.run_experiment("pmnist", seeds=[0], methods=["mas-metacl-lambda-mem"], out=tmp_path / "r.json", **SMALL)
    assert [c.gamma for u, c in spy_units if u.kind == "run"] == [0.25]
    hparams_file({"pmnist": {"methods": {"mas-metacl-lambda": {"gamma": 0.25}, "mas-metacl-lambda-mem": {"gamma": 4.0}},
                             "source": "t.json", "command": "c"}})
    assert H.method_hparams("pmnist", "mas-metacl-lambda-mem", K=5) == {"gamma": 4.0}
    hparams_file({"pmnist": {"methods": {}}})
    with pytest.raises(H.MissingHparams, match="no tuned beta/gamma for mas-metacl-lambda "):
        G.run_experiment("pmnist", seeds=[0], methods=["mas-metacl-lambda-mem"], out=tmp_path / "s.json", **SMALL)
    with pytest.raises(UsageError, match=r"MetaCL-lambda methods only \(with no memory\), not mas-metacl-lambda-mem"):
        G.run_experiment("pmnist", seeds=[0], methods=["mas-metacl-lambda-mem"], gamma="0", out=tmp_path / "g.json",
                         **SMALL)


@pytest.mark.slow
def test_the_same_numbers_whatever_the_executor_the_workers_or_the_threads(hparams_file, tmp_path):
    """One seed of each memory method trained in this process, over two worker processes, and with two intra-op
    threads: the same accuracy matrices, bit for bit (the memory draws from its own seeded generator)."""
    matrices = []
    for workers, threads in ((1, 1), (2, 1), (1, 2)):
        out = tmp_path / f"r-{workers}-{threads}.json"
        G.run_experiment("pmnist", seeds=[0], methods=MEMORY, out=out, options={"memory": 2},
                         plan=check_plan("local", workers, threads), **SMALL)
        matrices.append({k: v["acc_matrix"] for k, v in json.loads(out.read_text())["runs"].items()})
    assert matrices[0] == matrices[1] == matrices[2] and len(matrices[0]) == len(MEMORY)


def test_the_claims_ignore_the_memory_methods():
    """Files that also hold the memory methods' runs give the claims exactly the rows they give without them."""
    from metacl_lite.findings import claims as C, evidence as E
    from tests.test_l2 import files_with_and_without

    paper, extended = files_with_and_without(vocab.MEMORY_METHODS)
    for claim in C.CLAIMS[:5]:  # 1, 2a, 2b, 3, 4: the claims about results files (5-7 read other files)
        a = claim.evaluate(E.Evidence((20, 50), paper))
        b = claim.evaluate(E.Evidence((20, 50), extended))
        assert json.dumps(a, default=str, sort_keys=True) == json.dumps(b, default=str, sort_keys=True), claim


def test_a_file_of_another_memory_policy_is_refused_never_resumed(hparams_before_memory_tuning, tmp_path):
    """A memory file records the policy of its memory (`memory.POLICY`); one without it (the end-of-task memory's,
    before the policy was recorded) or with another is refused by `run`, and nothing is trained or written."""
    out = tmp_path / "m.json"
    G.run_experiment("pmnist", seeds=[0], methods=["agem"], out=out, **SMALL)
    doc = json.loads(out.read_text())
    assert doc["config"]["memory_policy"] == "balanced"
    for policy in (None, "end-of-task"):
        if policy is None:
            doc["config"].pop("memory_policy")
        else:
            doc["config"]["memory_policy"] = policy
        out.write_text(json.dumps(doc))
        with pytest.raises(ConfigMismatch, match="memory_policy"):
            G.run_experiment("pmnist", seeds=[1], methods=["agem"], out=out, **SMALL)
        assert json.loads(out.read_text()) == doc
    plain = tmp_path / "p.json"
    G.run_experiment("pmnist", seeds=[0], methods=["finetune"], out=plain, **SMALL)
    assert "memory_policy" not in json.loads(plain.read_text())["config"]  # no memory, no policy


def test_adams_state_is_new_for_each_task_unless_kept_over_the_stream(hparams_before_memory_tuning, tmp_path,
                                                                     monkeypatch):
    """`--optimizer-state stream` keeps one Adam (its moments and step count) over the whole stream, as Avalanche
    does; the default makes one per task. It is recorded in config.train and the file's command only where kept,
    so that the files made before it read as they were made."""
    made = []
    real = T.torch.optim.Adam
    monkeypatch.setattr(T.torch.optim, "Adam", lambda *a, **k: made.append(real(*a, **k)) or made[-1])
    bench = permuted_mnist(K=5, n_tasks=3, seed=0, split="val")
    runs = {}
    for state in ("task", "stream"):
        made.clear()
        runs[state] = T.run_stream(bench, "er", T.TrainConfig(epochs=1, optimizer_state=state), 0, False)
        assert len(made) == (3 if state == "task" else 1)
        assert [int(s["step"]) for s in made[-1].state.values()][0] == (1 if state == "task" else 3)  # a step a task
    assert runs["task"]["acc_matrix"][2].tolist() != runs["stream"]["acc_matrix"][2].tolist()
    assert "optimizer_state" not in T.TrainConfig().to_dict()
    with pytest.raises(UsageError, match="optimizer_state='epoch' is not an option"):
        T.TrainConfig(optimizer_state="epoch")
    out = tmp_path / "s.json"
    assert main(["run", "--benchmark", "pmnist", "--methods", "er", "--optimizer-state", "stream", "--out", str(out),
                 *TINY]) == 0
    doc = json.loads(out.read_text())
    assert doc["config"]["train"]["optimizer_state"] == "stream"
    assert " --optimizer-state stream" in doc["provenance"]["command"]
    with pytest.raises(ConfigMismatch, match="train"):  # a file kept one way is not resumed the other
        G.run_experiment("pmnist", seeds=[1], methods=["er"], out=out, **SMALL)
