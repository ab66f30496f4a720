"""Set-up files stay in step: environment.yml lists exactly pyproject's dependencies; .ci/run calls the README's
test command; the README's tables are generated from the results files."""
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def test_environment_yml_matches_pyproject():
    proj = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    want = set(proj["dependencies"])
    for extra in proj["optional-dependencies"].values():
        want |= set(extra)
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    assert set(pip) - {"-e ."} == want
    assert "-e ." in pip
    py = [d for d in env["dependencies"] if isinstance(d, str) and d.startswith("python")]
    assert py, "environment.yml must pin python"


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    assert "make test" in readme and "make book" in readme
    ci = [ln for ln in (ROOT / ".ci/run").read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    assert ci[-1].strip() == "make test"


def test_readme_tables_are_generated_from_results():
    r = subprocess.run([sys.executable, "-m", "metacl_lite.tools", "readme", "--check"], cwd=ROOT, capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr
    blocks = re.findall(r"<!-- BEGIN (?:table|summary) (\S+) -->\n(.*?)<!-- END", (ROOT / "README.md").read_text(), re.S)
    assert blocks and all(body.strip() for _, body in blocks)


def test_results_files_carry_provenance():
    import json
    files = sorted((ROOT / "results").glob("*.json"))
    assert files
    for f in files:
        doc = json.loads(f.read_text())
        prov = doc["provenance"]
        # results/book-timings.json, gpu-check.json and grading-times.json are written by data scripts, the rest by
        # the package's command line
        prefix = {"book-timings": "python data_scripts/book_timings.py",
                  "gpu-check": "python data_scripts/gpu_check.py",
                  "grading-times": "python data_scripts/grading_times.py"}.get(doc.get("kind"), "python -m metacl_lite")
        assert prov["command"].startswith(prefix), f
        assert prov["git_commit"] and prov["packages"]["torch"] and prov["device"], f
        if doc.get("kind") == "gpu-check":  # a check, not a timed run: the tests it ran, each with its time
            assert doc["tests"] and all(t["time_s"] >= 0 for t in doc["tests"]), f
        else:
            assert prov["wall_s_total"] > 0, f
