"""Tables and the numbers of the comparison, on synthetic results with known numbers; incomplete rows are marked."""
import json
from pathlib import Path

import numpy as np
import pytest

from metacl_lite.findings.paper import paper_table
from metacl_lite.report.tables import comparison_rows, format_table, incomplete_rows, protocol_differs
from metacl_lite.report.interpret import glue_values, interpretation
from metacl_lite.lab.summary import summarize
from metacl_lite.vocab import PAPER_METHOD_NAMES

ROOT = Path(__file__).resolve().parent.parent


def _fake(offset: float, seeds=(0, 1), missing=()) -> dict:
    """Every method's 2x2 accuracy matrix gives exactly the paper's ACC + offset (reference = diagonal)."""
    paper = paper_table("pmnist", 20)
    runs, refs = {}, {}
    for s in seeds:
        refs[str(s)] = {"acc": [50.0, 50.0]}
        for m in PAPER_METHOD_NAMES:
            if (m, s) in missing:
                continue
            acc = paper[m]["ACC"][0] + offset
            runs[f"{m}/{s}"] = {"acc_matrix": [[50.0, None], [2 * acc - 50.0, 50.0]]}
    res = {"config": {"benchmark": "pmnist", "K": 20, "n_tasks": 2, "seeds": list(seeds),
                      "methods": list(PAPER_METHOD_NAMES)},
           "runs": runs, "references": refs, "oracle": {str(s): {"acc": [paper["joint"]["ACC"][0] + offset - 5, paper["joint"]["ACC"][0] + offset + 5]}
                      for s in seeds},
           "paper_source": "Table 1"}
    res["summary"] = summarize(res)
    return res


def test_rows_and_table():
    res = _fake(1.5)
    rows = {r["method"]: r for r in comparison_rows(res)}
    assert np.isclose(rows["pi"]["ACC diff"], 1.5) and rows["pi"]["ACC paper"] == "50.6 ± 0.9"
    assert rows["joint"]["ACC ours"] == "69.7 ± 0.0" and rows["joint"]["ACC paper"] == "68.2 ± 0.2"
    assert rows["pi"]["Seeds"] == "2" and rows["pi"]["complete"]
    md = format_table(res, "md")
    assert md.startswith("**NOT THE PAPER'S PROTOCOL: 2 tasks (the paper: 20 tasks, 5 epochs per task)")  # 2x2
    assert md.count("\n") == 3 + len(rows) and "| PI-MetaCL-λ | 2 |" in md and "INCOMPLETE" not in md
    assert protocol_differs(res) == {"n_tasks": 2, "epochs": None, "paper_n_tasks": 20, "paper_epochs": 5}
    assert incomplete_rows(res) == []
    res["config"]["n_tasks"] = 20
    assert protocol_differs(res) is None


def test_summary_numbers():
    g = glue_values(interpretation(_fake(-2.0)))
    assert (g["gap_ACC"], g["n_ACC"]) == (2.0, 12) and (g["rho"], g["rank_n"]) == (1.0, 11)
    assert (g["chain_mas_ours"], g["order_mas_ours"]) == ("53.7 → 54.9 → 55.7", "holds")
    assert (g["chain_mas_paper"], g["order_mas_paper"]) == ("55.7 → 56.9 → 57.7", "holds")
    assert g["n_seeds"] == 2


def test_summary_of_a_setting_without_published_numbers():
    res = _fake(0.0)
    res["config"]["K"] = 37
    g = glue_values(interpretation(res))
    assert g["n_ACC"] == 0 and g["gap_ACC"] == "–" and g["rho"] == "–" and g["n_fam_paper"] == 0


def test_readme_blocks_are_regenerated_with_relative_commands(tmp_path, monkeypatch):
    """update_readme fills each block from its file, renders commands relative to the repository, and reports
    (check=True) a README that is out of date without writing it."""
    import json

    from metacl_lite.publish import readme as reports

    res = _fake(1.0)
    res.update(kind="results", schema=2)
    res["provenance"] = {"command": f"python -m metacl_lite run --out {tmp_path}/results/x.json", "invocations": []}
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "x.json").write_text(json.dumps(res))
    readme = tmp_path / "README.md"
    stale = "<!-- BEGIN table results/x.json -->\nold\n<!-- END table -->\n"
    readme.write_text(stale)
    monkeypatch.setattr(reports, "REPO_ROOT", tmp_path)
    monkeypatch.setattr("metacl_lite.report.commands.REPO_ROOT", tmp_path)
    assert reports.update_readme(readme, check=True) and readme.read_text() == stale
    assert reports.update_readme(readme)
    text = readme.read_text()
    assert "| PI-MetaCL-λ | 2 |" in text and "old" not in text
    assert str(tmp_path) not in text
    assert not reports.update_readme(readme, check=True)


def test_a_block_of_a_results_file_not_made_yet_says_how_to_make_it(tmp_path, monkeypatch):
    from metacl_lite.publish import readme as reports
    from metacl_lite.errors import UserError

    readme = tmp_path / "README.md"
    readme.write_text("<!-- BEGIN table results/pmnist-K5.json -->\nold\n<!-- END table -->\n")
    monkeypatch.setattr(reports, "REPO_ROOT", tmp_path)
    assert reports.update_readme(readme)
    assert readme.read_text() == ("<!-- BEGIN table results/pmnist-K5.json -->\n```bash\n"
                                  "python -m metacl_lite tune --benchmark pmnist --K 5\n"
                                  "python -m metacl_lite run --benchmark pmnist --K 5 --seeds 5\n```\n<!-- END table -->\n")
    for name in ("pmnsit-K5.json", "notes.json"):  # a typo is an error, not a file to come
        readme.write_text(f"<!-- BEGIN table results/{name} -->\nold\n<!-- END table -->\n")
        with pytest.raises((UserError, FileNotFoundError)):
            reports.update_readme(readme)


def test_rows_made_from_fewer_seeds_are_marked_in_every_format():
    res = _fake(0.0, seeds=(0, 1, 2), missing={("pi", 2), ("ewc", 1), ("ewc", 2)})
    rows = {r["method"]: r for r in comparison_rows(res)}
    assert (rows["pi"]["n"], rows["pi"]["Seeds"]) == (2, "2 of 3 (incomplete)")
    assert (rows["ewc"]["n"], rows["ewc"]["Seeds"]) == (1, "1 of 3 (incomplete)")
    assert rows["mas"]["Seeds"] == "3" and rows["mas"]["complete"]
    text, md = format_table(res), format_table(res, "md")
    for out in (text, md):
        assert "INCOMPLETE: 2 row(s) are made from fewer than the 3 seeds of the file (PI, EWC)" in out
    assert interpretation(res)["incomplete"] == ["PI", "EWC"]
    assert [r["method"] for r in incomplete_rows(res)] == ["pi", "ewc"]
    assert "| PI | 2 of 3 (incomplete) |" in md
    assert "1 of 3 (incomplete)" in text


def test_a_method_without_any_finished_seed_still_gets_a_row():
    res = _fake(0.0, seeds=(0,), missing={("mas", 0)})
    rows = {r["method"]: r for r in comparison_rows(res)}
    assert rows["mas"]["Seeds"] == "0 of 1 (incomplete)" and rows["mas"]["ACC ours"] == "–"


def test_elapsed_gives_each_runs_start_to_last_unit():
    """`timings.elapsed`: the time a file took, from its provenance (invocations that computed nothing do not
    count), as numbers."""
    from metacl_lite.report import timings as Ti

    inv = {"device": "cpu: X", "git_commit": "0123456789abcdef"}
    doc = {"provenance": {"invocations": [
        {**inv, "started": "2026-01-01T10:00:00+00:00", "finished": "2026-01-01T10:29:30+00:00",
         "units": ["units/a", "units/b", "units/c"], "wall_s": 3000.0},
        {**inv, "started": "2026-01-02T10:00:00+00:00", "units": [], "wall_s": 0.0}]}}
    assert Ti.elapsed(doc, "results/t.json") == {"file": "results/t.json", "units": 3, "span_min": 29.5, "runs": 1,
                                                 "unit_min": 50.0, "device": "cpu: X", "commit": "0123456789",
                                                 "invocations": [{"span_min": 29.5, "unit_min": 50.0, "units": 3,
                                                                  "seeds": 3}]}
    doc["provenance"]["invocations"][1].update(finished="2026-01-02T10:01:00+00:00", wall_s=60.0,
                                               units=["references/3", "oracle/3", "runs/mas/3", "runs/mas/4"])
    e = Ti.elapsed(doc, "results/t.json")
    assert (e["units"], e["span_min"], e["runs"], e["unit_min"]) == (7, 30.5, 2, 51.0)
    # each invocation on its own: the pages set the wall time of each beside the units' summed time
    assert e["invocations"][1] == {"span_min": 1.0, "unit_min": 1.0, "units": 4, "seeds": 2}


def test_the_committed_k20_file_took_what_the_running_page_says():
    """The three CPU timings of Permuted MNIST K = 20 ("Running this book"): the committed file's two invocations,
    each of five seeds, read from its provenance."""
    import json

    from metacl_lite.paths import REPO_ROOT
    from metacl_lite.report import timings as Ti

    doc = json.loads((REPO_ROOT / "results" / "pmnist-K20.json").read_text())
    e = Ti.elapsed(doc, "results/pmnist-K20.json")
    invs = doc["provenance"]["invocations"]
    assert [i["seeds"] for i in e["invocations"]] == [5, 5] and e["runs"] == len(invs) == 2
    assert e["unit_min"] * 60 == pytest.approx(doc["provenance"]["wall_s_total"])  # the 98 min the page showed
    assert e["span_min"] == pytest.approx(sum(i["span_min"] for i in e["invocations"]))
    assert e["span_min"] < e["unit_min"] / 1.5  # units ran side by side: the wall time is the smaller figure


def test_a_negative_number_gets_the_minus_sign_and_a_name_keeps_its_hyphens():
    from metacl_lite.report.tables import minus, signed

    assert minus("MAS-MetaCL-β (-5.9); MAS (-5.7)") == "MAS-MetaCL-β (−5.9); MAS (−5.7)"
    assert minus("-0.40 [-1.03, +0.23], x -.5") == "−0.40 [−1.03, +0.23], x −.5"
    kept = "images 400-499, ξ = 1e-3, `run --seeds 5 -p K 50`, |:--|--:|, K=1-5"
    assert minus(kept) == kept
    assert minus(-1.5) == -1.5 and minus(None) is None  # numbers and None are left to their format
    assert (signed(-1.25), signed(3.04), signed(-0.004), signed(-2, "+.0f")) == ("−1.2", "+3.0", "−0.0", "−2")






def test_the_commit_that_ran_is_a_provenance_field():
    """A file records the commit whose code ran as data (timings.RAN_COMMIT_FIELD): read as it is, the whole note
    kept as what the note says beyond it, and the field wins over a sentence in the note."""
    from metacl_lite.report.timings import RAN_COMMIT_FIELD, ran_commit

    prov = {"git_commit": "0078ca70e6ff", "git_dirty": True, "note": "Timed under NVIDIA MPS.",
            RAN_COMMIT_FIELD: {"commit": "977ad48", "why": "a device copy of the working tree"}}
    assert ran_commit(prov) == {"commit": "977ad48", "why": "a device copy of the working tree",
                                "recorded": "0078ca70e6", "from_note": True, "dirty": True,
                                "note_beyond_commit": "Timed under NVIDIA MPS."}
    prov["note"] = "The code that ran is commit 1234567 (old words)."
    assert ran_commit(prov)["commit"] == "977ad48"


def test_the_committed_gpu_files_name_the_commit_that_ran():
    """The four committed files made before the field, migrated (`tools migrate`): the commit each names, nothing
    beyond it."""
    import json

    from metacl_lite.paths import REPO_ROOT
    from metacl_lite.report.timings import ran_commit

    want = {"bench-cifar100-cuda": "0aac935", "bench-cub-cuda": "977ad48", "bench-pmnist-cuda": "0aac935",
            "gpu-check": "0aac935"}
    for name, commit in want.items():
        r = ran_commit(json.loads((REPO_ROOT / "results" / f"{name}.json").read_text())["provenance"])
        assert (r["commit"], r["from_note"], r["note_beyond_commit"], r["recorded"]) == (commit, True, "",
                                                                                          "0078ca70e6"), name


def _gpu_doc(suite="cub", K=10, grid_s=2500.0, measured=1):
    return {"kind": "bench", "suite": suite, "device": "cuda: GPU X (CUDA 13.0)", "K": K, "seeds": 5,
            "measured_seeds": measured, "wall_s_measured": grid_s * measured / 5, "grid_s": grid_s,
            "units": [{"unit": "runs/ewc/0", "wall_s": 130.0}, {"unit": "runs/finetune/0", "wall_s": 120.0},
                      {"unit": "references/0", "wall_s": 100.0}, {"unit": "oracle/0", "wall_s": 90.0}]}


def test_the_runs_of_make_reproduce_follow_the_makefile_and_the_protocol():
    """`make reproduce-cifar100`: the open choices at K = 20 (four variants of the nine methods and PI's ξ for its
    three, 13 β or 14 γ values, 2 seeds) and at K = 200 (base and a candidate, the plain method on five values),
    β/γ tuned at 50 and 200, then 5 seeds of every method with references and oracle, and the three MetaCL-λ
    methods under two γ controls, at every K; CUB tunes at K = 10 without the open choices."""
    import re

    from metacl_lite.paths import REPO_ROOT
    from metacl_lite.report.timings import reproduce_runs

    cifar = [(st["step"], st["K"], sum(st["runs"].values())) for st in reproduce_runs("cifar100")]
    assert cifar == [("choices", 20, (4 * 3 + 1) * 40 * 2), ("choices", 200, 3 * 2 * 5 * 2),
                     ("tune", 50, 3 * 40 * 2), ("tune", 200, 240),
                     ("run", 20, 13 * 5), ("controls", 20, 3 * 2 * 5), ("run", 50, 65), ("controls", 50, 30),
                     ("run", 200, 65), ("controls", 200, 30), ("run", 500, 65), ("controls", 500, 30)]
    cub = reproduce_runs("cub", seeds=3)
    assert [(st["step"], st["K"], sum(st["runs"].values())) for st in cub] == \
        [("tune", 10, 240), ("run", 10, 13 * 3), ("controls", 10, 3 * 2 * 3)]
    assert cub[2]["runs"] == {"mas-metacl-lambda": 6, "pi-metacl-lambda": 6, "ewc-metacl-lambda": 6}
    make = (REPO_ROOT / "Makefile").read_text()
    for b, runs in (("cifar100", cifar), ("cub", [(st["step"],) for st in cub])):
        recipe = make.split(f"\nreproduce-{b}:")[1].split("\n\n")[0]
        assert ("choices" in {r[0] for r in runs}) == bool(re.search(rf"metacl_lite choices --benchmark {b}", recipe))


def test_the_gpu_estimate_scales_the_timed_grid_by_runs_and_k():
    from metacl_lite.report.timings import reproduce_gpu_estimate

    doc = _gpu_doc()
    e = reproduce_gpu_estimate(doc)
    c = (130 + 120 + 100 + 90) / 500.0  # the units' summed time over the grid's wall time: 0.88 ran at once
    assert e["concurrency"] == pytest.approx(c)
    steps = {st["step"]: st for st in e["steps"]}
    # tuning: EWC's 26 runs at its own time, the 214 runs of methods the file did not time at the mean of those it did
    assert steps["tune"]["s"] == pytest.approx((26 * 130 + 214 * 125) / c)
    assert steps["run"]["s"] == pytest.approx(5 * (130 + 120 + 9 * 125 + 100 + 90) / c)
    assert not any(st["measured"] for st in e["steps"])  # the file timed 2 of the 11 methods: no step was timed
    assert steps["controls"]["s"] == pytest.approx(30 * 125 / c)
    assert e["total_s"] == pytest.approx(sum(st["s"] for st in e["steps"])) and e["n_runs"] == 240 + 65 + 30
    assert (e["scaled"], e["measured_seeds"], e["seeds"], e["grid_s"]) == (True, 1, 5, 2500.0)
    # a file that timed every method: the run at its K with its seeds is its grid, the one step marked measured
    from metacl_lite.vocab import PAPER_METHOD_NAMES

    full = _gpu_doc(grid_s=2000.0)
    full["units"] = ([{"unit": f"runs/{m}/0", "wall_s": 100.0 + i} for i, m in enumerate(PAPER_METHOD_NAMES)]
                     + full["units"][2:])
    f = reproduce_gpu_estimate(full)
    assert [(st["step"], st["s"]) for st in f["steps"] if st["measured"]] == [("run", pytest.approx(2000.0))]
    # a larger K: each step's time grows as K / K0
    big = reproduce_gpu_estimate(_gpu_doc(suite="cifar100", K=20))
    by = {(st["step"], st["K"]): st["s"] for st in big["steps"]}
    assert by[("run", 500)] == pytest.approx(25 * by[("run", 20)])
    assert by[("tune", 200)] == pytest.approx(4 * by[("tune", 50)])


@pytest.mark.parametrize("prov", [{"command": "x", "wall_s_total": 5.0, "device": "cpu"},  # schema 1: no invocations
                                  {"invocations": [{"units": [], "started": "2026-01-01T10:00:00+00:00"}]}])
def test_elapsed_of_a_file_without_a_timed_run_is_a_clear_error(prov):
    from metacl_lite.errors import FileFormatError
    from metacl_lite.report import timings as Ti

    with pytest.raises(FileFormatError, match="results/t.json: its provenance records no run"):
        Ti.elapsed({"provenance": prov}, "results/t.json")

