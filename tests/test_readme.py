"""The README's generated blocks: Table 1 (`table`), the claims' headline (`claims`, from `claims.headline`'s records),
and `readme --check` finding a stale block; asserted on the cells the records make, not on sentences."""
from __future__ import annotations

import subprocess
import sys

import pytest

from metacl_lite.findings import claims, evidence
from metacl_lite.publish import readme as R
from metacl_lite.paths import REPO_ROOT

#: Hand-made records of the shape `claims.headline` gives (issue 29).
RECORDS = [
    {"claim": "1", "title": "MetaCL w/o reg beats fine-tune", "verdict": "inconclusive", "metric": "ACC", "K": 20,
     "a": "metacl", "b": "finetune", "mean": -0.41, "unit": "points"},
    {"claim": "6", "title": "dynamic balance is more stable", "verdict": "confirmed", "metric": "angle", "K": 50,
     "a": "pi-metacl-beta", "b": "pi-metacl-lambda", "mean": 11.33, "unit": "degrees"},
    {"claim": "7", "title": "the projection's own gain", "verdict": "not run", "metric": "ACC", "K": 50,
     "a": "ewc-metacl-lambda", "b": "ewc-metacl-beta", "mean": None, "unit": "points"},
]


def test_the_claims_cells_give_the_verdict_the_pair_and_the_signed_mean_with_its_unit():
    cells = R.headline_cells(RECORDS)
    assert [(c["claim"], c["verdict"], c["K"], c["mean"]) for c in cells] == [
        ("1", "**inconclusive**", 20, "-0.4 pts"), ("6", "**confirmed**", 50, "+11.3°"), ("7", "**not run**", 50, None)]
    assert cells[0]["difference"] == "MetaCL, w/o reg − Fine tune"  # the methods' labels (training.METHODS)
    table = R.markdown_table(cells, R.HEADLINE_COLUMNS).splitlines()
    assert len(table) == 2 + len(RECORDS) and table[0].count("|") == len(R.HEADLINE_COLUMNS) + 1
    assert table[-1].endswith("| 50 | – |")  # a claim whose test did not run: no number


def test_the_tests_name_gives_the_control_and_the_measure_in_full():
    """A record with its test's name ("a − b, measure"): a control's γ stays beside its method, the measure is said
    in full (a label with a comma in it is not cut), and a test over several K says so."""
    recs = [{**RECORDS[0], "test": "MetaCL, w/o reg − Fine tune, ACC"},
            {**RECORDS[2], "mean": -12.77, "test": "EWC-MetaCL-λ (γ = 0) − EWC-MetaCL-β, ACC"},
            {**RECORDS[0], "K": None, "a": "mas-metacl-lambda", "b": "mas", "mean": 0.96,
             "test": "MAS-MetaCL-λ − MAS, ACC: K 20, 50 minus K 200, 500"}]
    cells = R.headline_cells(recs)
    assert [(c["difference"], c["metric"], c["K"], c["mean"]) for c in cells] == [
        ("MetaCL, w/o reg − Fine tune", "ACC", 20, "-0.4 pts"),
        ("EWC-MetaCL-λ (γ = 0) − EWC-MetaCL-β", "ACC", 50, "-12.8 pts"),
        ("MAS-MetaCL-λ − MAS", "ACC: K 20, 50 minus K 200, 500", "across K", "+1.0 pts")]


def test_a_record_without_a_field_of_the_headline_shape_is_refused():
    with pytest.raises(ValueError, match=r"lacks \['mean'\]"):
        R.headline_cells([{k: v for k, v in RECORDS[0].items() if k != "mean"}])


def test_a_cell_with_a_pipe_does_not_break_the_table():
    assert R.markdown_table([{"a": "x | y", "b": None}], {"a": "A", "b": "B"}).splitlines()[-1] == "| x \\| y | – |"


def _readme(tmp_path, body="old\n"):
    path = tmp_path / "README.md"
    path.write_text(f"intro\n<!-- BEGIN claims pmnist -->\n{body}<!-- END claims -->\nend\n")
    return path


def test_the_claims_block_is_rendered_from_the_headline_and_check_finds_it_stale(tmp_path, monkeypatch):
    seen = []
    monkeypatch.setattr(evidence, "load_evidence", lambda b: seen.append(b) or "EV", raising=True)
    monkeypatch.setattr(claims, "verdict_rows", lambda ev: [ev], raising=True)
    monkeypatch.setattr(claims, "headline", lambda rows: RECORDS if rows == ["EV"] else [], raising=True)
    path = _readme(tmp_path)
    assert R.update_readme(path, check=True) and "old" in path.read_text()  # check: nothing written
    assert R.update_readme(path) and seen == ["pmnist", "pmnist"]
    body = path.read_text().split("<!-- BEGIN claims pmnist -->\n")[1].split("<!-- END claims -->")[0]
    assert body == R.markdown_table(R.headline_cells(RECORDS), R.HEADLINE_COLUMNS) + "\n"
    assert not R.update_readme(path, check=True)  # up to date now


def test_a_stale_table_is_found_and_a_missing_file_gives_the_commands_that_make_it(tmp_path):
    path = tmp_path / "README.md"
    path.write_text("<!-- BEGIN table results/pmnist-K20.json -->\nstale\n<!-- END table -->\n"
                    "<!-- BEGIN table results/pmnist-K7.json -->\n<!-- END table -->\n")
    assert R.update_readme(path, check=True)
    R.update_readme(path)
    text = path.read_text()
    assert "stale" not in text and "| Fine tune | 10 |" in text
    missing = text.split("results/pmnist-K7.json -->\n")[1]
    assert missing.startswith("```bash\n") and "--K 7" in missing
    assert not R.update_readme(path, check=True)


def test_the_tools_readme_check_exits_1_on_a_stale_readme(tmp_path):
    """`python -m metacl_lite.tools readme --check` against a copy of the repository's README with one cell changed."""
    r = subprocess.run([sys.executable, "-m", "metacl_lite.tools", "readme", "--check"], cwd=REPO_ROOT,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    text = (REPO_ROOT / "README.md").read_text()
    assert text.count("<!-- BEGIN table results/pmnist-K20.json -->") == 1 and "<!-- BEGIN claims pmnist -->" in text
    stale = tmp_path / "README.md"
    stale.write_text(text.replace("| Fine tune | 10 | 48.0", "| Fine tune | 10 | 48.1", 1))
    assert R.update_readme(stale, check=True)
