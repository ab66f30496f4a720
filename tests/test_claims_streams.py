"""One stream per claim across the book, and a summary that keeps every claim's verdict (issue 20).

Claims 5 and 6 read the training logs of results/dynamics-pmnist.json (`lab.dynamics`) through
`evidence.dynamics_logs`, in the claims chapter, in the analysis chapter's Figs. 4 and 5 and in the intro's findings;
the summary table and the findings carry one verdict per claim."""
from __future__ import annotations

import ast
import json
import re

import jupytext
import pytest

from metacl_lite.paths import REPO_ROOT
from metacl_lite.errors import ConfigMismatch, UserError
from metacl_lite.lab import dynamics as D
from metacl_lite.findings import claims as C, evidence as E, stats as S
from metacl_lite.publish.notebooks import declared_parameters
from metacl_lite.publish.pages import files_stamp

CH7, CH8, INTRO = (REPO_ROOT / "book" / "chapters" / "07_claims.md", REPO_ROOT / "book" / "chapters" / "08_analysis.md",
                   REPO_ROOT / "book" / "intro.md")
DYN = REPO_ROOT / "results" / "dynamics-pmnist.json"


# ---------------------------------------------------------------------------------------------------------------
# The summary and the findings keep every claim's verdict
# ---------------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def committed():
    ev = E.load_evidence("pmnist")
    return ev, C.verdict_rows(ev)


def test_headline_has_one_record_and_one_verdict_per_claim(committed):
    ev, rows = committed
    heads = C.headline(rows)
    assert [h["claim"] for h in heads] == [c.id for c in C.CLAIMS]
    for c, h in zip(C.CLAIMS, heads):
        mine = [r for r in rows if r["claim"] == c.id]
        assert h["title"] == c.short and h["verdict"] == C.claim_verdict(mine)
        assert h["mean"] == C.deciding_test(mine)["mean"]
    # every claim has run on the committed files (claims 5 and 6 on the training logs): a verdict and a number
    assert S.NOT_RUN not in {h["verdict"] for h in heads} and None not in {h["mean"] for h in heads}


#: What the committed evidence gives (the start commit's numbers, as the intro and chapter 7 show them):
#: claim -> (Holm verdict, raw verdict, metric, K, a, b, mean rounded to 0.1, Holm p shown, unit); None: not pinned.
KNOWN = {
    "1": ("inconclusive", None, None, None, None, None, -0.4, "0.187", "points"),
    "2a": ("refuted", None, None, None, None, None, -0.8, "0.002", "points"),
    "2b": ("refuted", None, None, None, None, None, -0.5, "< 0.001", "points"),
    "3": ("refuted", "refuted", "ACC", 50, "pi-metacl-lambda", "pi-metacl-beta", 0.4, "< 0.001", "points"),
    "4": ("inconclusive", None, "ACC", None, None, None, 1.0, "0.066", "points"),
    "5": ("confirmed", None, None, 20, None, None, 1.1, "< 0.001", "points"),
    "6": ("confirmed", None, None, 50, "pi-metacl-beta", "pi-metacl-lambda", 11.3, "< 0.001", "degrees"),
    "7": ("refuted", None, "ACC", None, None, None, -12.8, "< 0.001", "points"),
}


def test_headline_on_the_committed_evidence(committed):
    """The records behind the README's and the intro's findings, as the start commit showed them."""
    _, rows = committed
    heads = C.headline(rows)
    for h in heads:
        want = {k: v for k, v in zip(("verdict", "raw", "metric", "K", "a", "b", "mean", "p", "unit"),
                                     KNOWN[h["claim"]]) if v is not None}
        got = {**h, "mean": round(h["mean"], 1), "p": S.format_p(h["p_holm"])}
        assert {k: got[k] for k in want} == want, h["claim"]
    assert (heads[3]["threshold"], heads[0]["threshold"]) == (8.0, 0.0)
    assert heads[4]["claim"] == "4" and heads[4]["K"] is None  # across K: no one K


def test_summary_is_narrow():
    """Readable at 390 px: the short titles are a few words, one per claim."""
    assert all(len(c.short) <= 48 for c in C.CLAIMS) and len({c.short for c in C.CLAIMS}) == len(C.CLAIMS)


def test_number_behind_a_threshold_claim_carries_the_threshold():
    from test_claims import _acc, _res

    rows = C.CLAIMS[3].evaluate({50: _res(50, {"pi-metacl-beta": _acc([50, 50, 50]),
                                               "pi-metacl-lambda": _acc([51, 51.5, 52])})})
    assert C.claim_verdict(rows) == S.REFUTED  # +1.5 points, far below the paper's 8
    [h] = C.headline(rows, [C.CLAIMS[3]])
    assert (h["mean"], h["threshold"], h["unit"]) == (1.5, 8.0, "points")


@pytest.mark.parametrize("n", [5, 10])
def test_seed_power_for_5_and_10_seeds(n):
    """The seeds' numbers take n from the files; with 5 they compare with 10, with 10 they speak of 10 alone."""
    rows = [{"claim": "1", "counted": True, "live": False, "n": n, "sd": 1.0, "unit": "points"}] * 3
    pw = C.seed_power(rows)
    assert pw["n"] == n and pw["ns"] == sorted({n, 10}) and pw["m"] == 3
    assert pw[10]["sign_p"] < 0.05 and (n != 5 or pw[5]["sign_p"] >= 0.05)


# ---------------------------------------------------------------------------------------------------------------
# One stream per claim: both chapters (and the intro) read the same runs
# ---------------------------------------------------------------------------------------------------------------
def _calls(path, name):
    """The calls of E.<name>(...) in the code cells of a page: [(positional args, {keyword: source})]."""
    out = []
    for cell in jupytext.read(str(path)).cells:
        if cell.cell_type != "code":
            continue
        for node in ast.walk(ast.parse(cell.source)):
            if isinstance(node, ast.Call) and ast.unparse(node.func) == f"E.{name}":
                out.append(([ast.unparse(a) for a in node.args],
                            {k.arg: ast.unparse(k.value) for k in node.keywords}))
    return out


def test_both_chapters_read_one_stream_per_claim():
    """Chapter 7 (claims 5 and 6) and chapter 9 (Figs. 4 and 5) declare the same stream parameters, all defaulting to
    the committed file, and pass them all, unchanged, to the one function that gives the logs; neither trains runs
    of its own."""
    names = ("live",) + E.STREAM_PARAMETERS
    p7, p8 = declared_parameters(CH7), declared_parameters(CH8)
    assert {k: p7.get(k, "absent") for k in names} == {k: p8.get(k, "absent") for k in names} == \
        {"live": False, **dict.fromkeys(E.STREAM_PARAMETERS)}
    want = (["live"], {k: k for k in E.STREAM_PARAMETERS})
    assert _calls(CH7, "dynamics_logs") == _calls(CH8, "dynamics_logs") == [want]
    for page in (CH7, CH8):
        code = "\n".join(c.source for c in jupytext.read(str(page)).cells if c.cell_type == "code")
        assert not re.search(r"\b(run_stream|run_logs|live_logs|measure)\(", code), page


def test_pages_that_read_the_dynamics_file_carry_its_current_stamp():
    """A page that reads results/dynamics-pmnist.json carries the file's digest in its code, so that the book's
    cache executes it again when the file changes."""
    from metacl_lite.publish.pages import stamped_pages
    pages = stamped_pages()
    for page in (CH7, CH8, INTRO):
        assert "dynamics-pmnist.json" in pages[page], page
        assert files_stamp(pages[page]) in page.read_text().splitlines(), page
    assert files_stamp(["dynamics-pmnist.json"]).split("# shows: ")[1] in files_stamp(pages[CH7])


def test_the_committed_file_is_the_default_stream():
    """The committed file holds the module's streams and seeds, complete, made by the command it records, and the
    claims read every one of its seeds."""
    doc = D.load_dynamics(DYN)
    streams = doc["config"]["streams"]
    assert {k: (s["K"], s["n_tasks"], s["methods"]) for k, s in streams.items()} == \
        {k: (s["K"], s["n_tasks"], s["methods"]) for k, s in D.STREAMS.items()}
    seeds = doc["config"]["seeds"]
    assert seeds == list(range(len(seeds))) and len(seeds) >= 5
    assert doc["provenance"]["command"] == D.command(seeds, streams, DYN) == \
        "python -m metacl_lite dynamics" + ("" if len(seeds) == D.DEFAULT_SEEDS else f" --seeds {len(seeds)}")
    assert {k: sorted(v) for k, v in doc["runs"].items()} == {
        k: sorted(f"{m}/{s}" for m in streams[k]["methods"] for s in seeds) for k in streams}
    logs = E.dynamics_logs()
    assert logs["speed"]["seeds"] == logs["angles"]["seeds"] == seeds
    rows = C.verdict_rows(E.load_evidence("pmnist"), [C.CLAIMS[5], C.CLAIMS[6]])
    assert {r["n"] for r in rows} == {len(seeds)}
    assert {m for pair in E.SPEED_PAIRS for m in pair} <= set(streams["speed"]["methods"])
    assert set(E.ANGLE_PAIR) == set(streams["angles"]["methods"])


@pytest.mark.slow
def test_executed_chapters_show_the_same_runs(book_build):
    """Executed with their defaults (by the session's book build), the claims chapter and the analysis chapter glue
    the same fingerprint of the runs behind claims 5 and 6: the committed file's."""
    want = E.stream_fingerprint(E.dynamics_logs())
    for page in (CH7, CH8):
        assert book_build.glue(f"chapters/{page.stem}")["stream_id"] == want, page


# ---------------------------------------------------------------------------------------------------------------
# The dynamics file: one unit per run, resumable, refused when made otherwise
# ---------------------------------------------------------------------------------------------------------------
@pytest.fixture
def fake_training(monkeypatch):
    """Units without training: a log that says which run it is."""
    trained = []

    def unit(benchmark, kind, stream, method, seed, bench=None):
        trained.append(f"{kind}/{method}/{seed}")
        key = D.RECORDS[kind][1]
        log = [[0, float(seed)]] if kind == "speed" else [[0, 1.0, None, 0.0]]
        return {key: log, "final_acc": 50.0 + seed, "wall_s": 1.0}

    monkeypatch.setattr(D, "train_unit", unit)
    monkeypatch.setattr("metacl_lite.data.benchmarks.make_benchmark", lambda *a, **k: None)
    return trained


def test_dynamics_file_is_written_per_unit_and_resumes(tmp_path, fake_training):
    out = tmp_path / "dyn.json"
    D.measure([0], out=out)
    n = sum(len(s["methods"]) for s in D.STREAMS.values())
    assert len(fake_training) == n
    doc = D.load_dynamics(out)
    assert doc["provenance"]["command"] == "python -m metacl_lite dynamics --seeds 1 --out " + str(out)
    D.measure([0, 1], out=out)  # seed 0 is kept, seed 1 trained
    assert len(fake_training) == 2 * n and all(u.endswith("/1") for u in fake_training[n:])
    doc = D.load_dynamics(out)
    assert doc["config"]["seeds"] == [0, 1] and len(doc["provenance"]["invocations"]) == 2
    assert D.as_logs(doc, "speed")["runs"]["metacl/1"]["epoch_acc"] == [[0, 1.0]]
    del doc["runs"]["angles"]["pi-metacl-lambda/1"]  # an interrupted seed is not read
    assert D.as_logs(doc, "angles")["seeds"] == [0] and D.as_logs(doc, "speed")["seeds"] == [0, 1]
    with pytest.raises(ConfigMismatch, match="speed n_tasks 10 vs 3"):
        D.measure([0], {**D.STREAMS, "speed": {**D.STREAMS["speed"], "n_tasks": 3}}, out=out)
    assert json.loads(out.read_text())["config"]["seeds"] == [0, 1]  # refused: nothing changed


def test_a_dynamics_request_is_checked_once_before_any_unit(tmp_path, fake_training):
    """`measure` is `measure_request(dynamics_request(...))`: the seeds, the threads and the file are checked where
    the request is built, before any unit trains; the request is frozen and carries the streams' configurations."""
    from dataclasses import FrozenInstanceError

    for bad in ({"seeds": [-1]}, {"seeds": [0], "threads": 0}, {"seeds": [0], "out": tmp_path}):
        with pytest.raises(UserError):
            D.measure(**bad)
    assert fake_training == []
    req = D.dynamics_request([1, 0], out=tmp_path / "d.json", threads=1)
    assert (req.seeds, set(req.streams), req.threads) == ((1, 0), set(D.STREAMS), 1)
    assert req.streams["angles"]["train"]["pi-metacl-lambda"]["record_angles"] is True
    with pytest.raises(FrozenInstanceError):
        req.force = True
    D.measure_request(req)
    assert sorted(D.load_dynamics(tmp_path / "d.json")["config"]["seeds"]) == [0, 1]


def test_live_logs_change_only_what_is_given(tmp_path, fake_training):
    """A page's live run trains the committed file's streams (or the module's defaults) with the settings given."""
    logs = E.dynamics_logs(speed_tasks=2, speed_seeds=2, angle_K=20, path=tmp_path / "absent.json")
    assert (logs["speed"]["K"], logs["speed"]["n_tasks"], logs["speed"]["seeds"]) == (20, 2, [0, 1])
    assert (logs["angles"]["K"], logs["angles"]["n_tasks"], len(logs["angles"]["seeds"])) == \
        (20, D.STREAMS["angles"]["n_tasks"], D.DEFAULT_SEEDS)
    assert logs["source"]["kind"] == "live" and not (tmp_path / "absent.json").exists()
    none = E.dynamics_logs(path=tmp_path / "absent.json")
    assert set(none) == {"source"} and none["source"] == {"kind": "missing", "path": str(tmp_path / "absent.json"),
                                                          "command": "python -m metacl_lite dynamics"}


def test_dynamics_command_line_and_the_command_it_records(tmp_path, fake_training, capsys):
    """`python -m metacl_lite dynamics` writes the file; the command it records parses back to the same settings."""
    import shlex

    from metacl_lite import cli

    with pytest.raises(SystemExit) as e:
        cli.main(["dynamics", "--speed", "20:1"])
    assert e.value.code == 2 and "at least 2 tasks" in capsys.readouterr().err
    out = tmp_path / "d.json"
    assert cli.main(["dynamics", "--seeds", "2", "--angles", "20:3", "--out", str(out)]) == 0
    doc = D.load_dynamics(out)
    recorded = doc["provenance"]["command"]
    assert recorded == f"python -m metacl_lite dynamics --seeds 2 --angles 20:3 --out {out}"
    a = cli.build_parser().parse_args(shlex.split(recorded)[3:])
    assert (list(range(a.seeds)), a.angles["K"], a.angles["n_tasks"], a.speed, a.out) == \
        (doc["config"]["seeds"], 20, 3, D.STREAMS["speed"], out)
    assert doc["provenance"]["git_commit"] and doc["provenance"]["packages"]["torch"]
