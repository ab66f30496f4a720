"""Tables and the numbers of the comparison, on synthetic results with known numbers; incomplete rows are marked."""
import numpy as np
import pytest

from metacl_lite.report.paper import paper_table
from metacl_lite.report.tables import comparison_rows, format_table, incomplete_rows, protocol_differs
from metacl_lite.report.interpret import glue_values, interpretation
from metacl_lite.lab.summary import summarize
from metacl_lite.training import METHODS


def _fake(offset: float, seeds=(0, 1), missing=()) -> dict:
    """Every method's 2x2 accuracy matrix gives exactly the paper's ACC + offset (reference = diagonal)."""
    paper = paper_table("pmnist", 20)
    runs, refs = {}, {}
    for s in seeds:
        refs[str(s)] = {"acc": [50.0, 50.0]}
        for m in METHODS:
            if (m, s) in missing:
                continue
            acc = paper[m]["ACC"][0] + offset
            runs[f"{m}/{s}"] = {"acc_matrix": [[50.0, None], [2 * acc - 50.0, 50.0]]}
    res = {"config": {"benchmark": "pmnist", "K": 20, "n_tasks": 2, "seeds": list(seeds), "methods": list(METHODS)},
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

    from metacl_lite.report import readme as reports

    res = _fake(1.0)
    res["provenance"] = {"command": f"python -m metacl_lite run --out {tmp_path}/results/x.json"}
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
    from metacl_lite.report import readme as reports
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
                                                 "unit_min": 50.0, "device": "cpu: X", "commit": "0123456789"}
    doc["provenance"]["invocations"][1].update(finished="2026-01-02T10:01:00+00:00", units=["units/d"], wall_s=60.0)
    e = Ti.elapsed(doc, "results/t.json")
    assert (e["units"], e["span_min"], e["runs"], e["unit_min"]) == (4, 30.5, 2, 51.0)


@pytest.mark.parametrize("prov", [{"command": "x", "wall_s_total": 5.0, "device": "cpu"},  # schema 1: no invocations
                                  {"invocations": [{"units": [], "started": "2026-01-01T10:00:00+00:00"}]}])
def test_elapsed_of_a_file_without_a_timed_run_is_a_clear_error(prov):
    from metacl_lite.errors import FileFormatError
    from metacl_lite.report import timings as Ti

    with pytest.raises(FileFormatError, match="results/t.json: its provenance records no run"):
        Ti.elapsed({"provenance": prov}, "results/t.json")
