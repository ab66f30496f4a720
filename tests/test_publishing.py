"""Publishing (issue 42), offline and fast: the two GitHub Actions workflows and Binder's files.

- .github/workflows/book.yml builds the book's PDF (`make pdf`), then the book with the README's `make book` (the
  repository given, its execution cache kept between runs: the folder Jupyter Book uses and the code digest
  book_code_stamp keeps beside it), deploys the folder `make book` writes to GitHub Pages with the actions and
  permissions that takes, and pushes the executed notebooks (the zip the pages offer) to the branch the pages' Colab
  links open;
- .github/workflows/test.yml runs .ci/run, that is the README's `make test`;
- binder/ gives Binder the environment of the pages (pyproject's, jupytext among it) and the setting with which
  JupyterLab opens a MyST page as a notebook, under the name the installed jupytext gives its notebook view.
"""
import fnmatch
import json
import os
import re
import stat
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = ROOT / ".github" / "workflows"
sys.path.insert(0, str(ROOT / "book" / "_ext"))
sys.path.insert(0, str(ROOT / "data_scripts"))
import book_code_stamp  # noqa: E402
import ipynb_download  # noqa: E402

#: The actions each workflow uses, at the major versions named (GitHub's own, so no third party runs with a token).
BOOK_ACTIONS = {"actions/checkout@v4", "actions/setup-python@v5", "actions/cache@v4", "actions/upload-pages-artifact@v3",
                "actions/upload-artifact@v4", "actions/deploy-pages@v4", "actions/download-artifact@v4"}
TEST_ACTIONS = {"actions/checkout@v4", "actions/setup-python@v5"}


def workflow(name: str) -> dict:
    doc = yaml.safe_load((WORKFLOWS / name).read_text())
    doc["on"] = doc.pop(True, doc.get("on"))  # YAML 1.1 reads the key `on` as true
    return doc


def steps(doc: dict, job: str) -> list[dict]:
    return doc["jobs"][job]["steps"]


def uses(doc: dict) -> set[str]:
    return {s["uses"] for job in doc["jobs"] for s in steps(doc, job) if "uses" in s}


def runs(doc: dict, job: str) -> list[str]:
    return [s["run"].strip() for s in steps(doc, job) if "run" in s]


def step(doc: dict, job: str, action: str) -> dict:
    [found] = [s for s in steps(doc, job) if s.get("uses", "").split("@")[0] == action]
    return found


def tracked_files() -> list[str]:
    return subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()


def book_config() -> dict:
    return yaml.safe_load((ROOT / "book" / "_config.yml").read_text())


def test_both_workflows_are_valid_yaml_and_name_their_actions_at_their_versions():
    assert sorted(p.name for p in WORKFLOWS.iterdir()) == ["book.yml", "test.yml"]
    book, test = workflow("book.yml"), workflow("test.yml")
    assert uses(book) == BOOK_ACTIONS and uses(test) == TEST_ACTIONS
    assert all(re.fullmatch(r"actions/[\w-]+@v\d+", u) for u in uses(book) | uses(test))
    assert book["on"]["push"]["branches"] == [book_config()["repository"]["branch"]]  # the branch the links name
    assert set(test["on"]) >= {"push", "pull_request"}
    for doc in (book, test):
        assert doc["permissions"] == {"contents": "read"}  # the default; a job that needs more says so
        assert step(doc, next(iter(doc["jobs"])), "actions/setup-python")["with"]["python-version"] == "3.11"


def test_the_book_workflow_builds_with_make_book_and_deploys_what_it_writes_to_pages():
    doc = workflow("book.yml")
    readme = (ROOT / "README.md").read_text()
    assert "make book" in readme
    # the PDF, then the README's `make book` with the setting (the pages offer the PDF built before them)
    assert runs(doc, "build") == ["make pdf", "make book REPOSITORY=${{ github.repository }}"]
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^book: ", makefile, re.M) and re.search(r"^pdf: ", makefile, re.M) and "REPOSITORY ?=" in makefile
    out = re.search(r'echo "open (\S+)/index.html"', makefile).group(1)  # where `make book` writes the site
    assert out == "book/_build/html"
    assert step(doc, "build", "actions/upload-pages-artifact")["with"]["path"] == out
    assert step(doc, "build", "actions/checkout") and step(doc, "build", "actions/setup-python")

    deploy = doc["jobs"]["deploy"]
    assert deploy["needs"] == "build" and deploy["permissions"] == {"pages": "write", "id-token": "write"}
    assert deploy["environment"]["name"] == "github-pages"
    [only] = deploy["steps"]
    assert only["uses"] == "actions/deploy-pages@v4" and only["id"] == "deployment"
    assert deploy["environment"]["url"] == "${{ steps.deployment.outputs.page_url }}"
    assert doc["concurrency"] == {"group": "pages", "cancel-in-progress": False}


def test_the_execution_cache_is_kept_between_runs():
    """The cached paths are the execution cache Jupyter Book uses for the book's config (execute.cache not set: its
    build folder's .jupyter_cache) and the digest book_code_stamp records beside it (without which it would remove
    the cache); the key's patterns match files of the repository, and an older cache is restored."""
    doc = workflow("book.yml")
    cache = step(doc, "build", "actions/cache")["with"]
    assert not book_config()["execute"].get("cache")
    from jupyter_book.config import get_final_config

    default = get_final_config(user_yaml=book_config(), cli_config={"latex_individualpages": False})[0]
    assert not default.get("nb_execution_cache_path")  # MyST-NB's default: <build>/.jupyter_cache
    build = "book/_build"
    assert cache["path"].split() == [f"{build}/.jupyter_cache", f"{build}/{book_code_stamp.RECORD}"]
    patterns = re.findall(r"'([^']+)'", re.search(r"hashFiles\((.*?)\)", cache["key"]).group(1))
    files = tracked_files()
    assert patterns and all(any(fnmatch.fnmatch(f, p.replace("/**", "/*")) for f in files) for p in patterns), patterns
    assert cache["key"].startswith(cache["restore-keys"])
    names = [s.get("name") or s.get("uses") for s in steps(doc, "build")]
    assert names.index("Restore the execution cache") < names.index("Build the book as one PDF")


def test_the_executed_notebooks_go_to_the_branch_the_colab_links_open():
    doc = workflow("book.yml")
    branch = book_config()["launch_buttons"]["colab_notebooks_branch"]
    assert doc["env"]["NOTEBOOKS_BRANCH"] == branch
    upload = step(doc, "build", "actions/upload-artifact")["with"]
    assert upload["path"] == f"book/_build/html/{ipynb_download.NOTEBOOKS_ZIP}"  # the zip the pages offer
    job = doc["jobs"]["notebooks"]
    assert job["needs"] == "build" and job["permissions"] == {"contents": "write"}
    assert step(doc, "notebooks", "actions/download-artifact")["with"]["name"] == upload["name"]
    [push] = runs(doc, "notebooks")
    assert f"unzip -q {ipynb_download.NOTEBOOKS_ZIP}" in push and f"cd {ipynb_download.FOLDER}" in push
    assert '"HEAD:refs/heads/$NOTEBOOKS_BRANCH"' in push and "--force" in push
    # only this job and deploy may write, each what it needs
    assert [j for j, spec in doc["jobs"].items() if "permissions" in spec] == ["deploy", "notebooks"]


def test_the_test_workflow_runs_ci_run_which_is_make_test():
    doc = workflow("test.yml")
    # the runner is not root: the grading tests take the rootless mode, which Ubuntu 24.04's AppArmor refuses unless
    # told otherwise (metacl_lite.course.userns.remedies names the same sysctl)
    assert runs(doc, "test") == ["sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0", "bash .ci/run"]
    ci = [ln for ln in (ROOT / ".ci" / "run").read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    assert ci[-1].strip() == "make test" and "make test" in (ROOT / "README.md").read_text()
    assert re.search(r"^test: ", (ROOT / "Makefile").read_text(), re.M)
    assert doc["jobs"]["test"]["timeout-minutes"] <= 360  # GitHub's limit for a hosted runner


def test_every_path_the_workflows_name_exists_or_is_what_make_book_writes():
    names = set()
    for name in ("book.yml", "test.yml"):
        text = (WORKFLOWS / name).read_text()
        names |= set(re.findall(r"(?<![\w/.-])((?:\.ci|book|binder|data_scripts|tests|results|metacl_lite)/[\w./-]+)",
                                text))
        names |= {"pyproject.toml"} if "pyproject.toml" in text else set()
    built = "book/_build/"
    missing = [n for n in sorted(names) if not n.startswith(built) and not (ROOT / n.rstrip("/")).exists()]
    assert missing == []
    assert {n for n in names if n.startswith(built)} == {
        "book/_build/.jupyter_cache", f"book/_build/{book_code_stamp.RECORD}", "book/_build/html",
        f"book/_build/html/{ipynb_download.NOTEBOOKS_ZIP}"}
    assert {".ci/run", "pyproject.toml"} <= names


def _requirements(pip: list[str]) -> set[str]:
    return {r for r in pip if not r.startswith("-")}


def test_binder_has_the_pages_environment_with_jupytext():
    proj = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    want = set(proj["dependencies"]) | set(proj["optional-dependencies"]["book"]) | set(
        proj["optional-dependencies"]["assignments"])
    env = yaml.safe_load((ROOT / "binder" / "environment.yml").read_text())
    [pip] = [d["pip"] for d in env["dependencies"] if isinstance(d, dict)]
    assert _requirements(pip) == want and any(r.startswith("jupytext") for r in want)
    root_env = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert [d for d in env["dependencies"] if isinstance(d, str)] == [
        d for d in root_env["dependencies"] if isinstance(d, str)]  # the same Python


def test_binder_opens_a_myst_page_as_a_notebook(tmp_path):
    """postBuild, run with a stand-in `python` that records what it is asked: it installs the package from the
    clone's root without touching the environment's packages, and puts overrides.json where JupyterLab reads it
    (<prefix>/share/jupyter/lab/settings); that file makes Markdown, so the MyST pages, open in the notebook view
    that the installed jupytext's JupyterLab extension names."""
    postbuild = ROOT / "binder" / "postBuild"
    assert postbuild.stat().st_mode & stat.S_IXUSR
    shim, prefix, log = tmp_path / "bin", tmp_path / "prefix", tmp_path / "calls"
    shim.mkdir()
    (shim / "python").write_text(f'#!/bin/sh\necho "$PWD|$*" >> {log}\n'
                                 f'[ "$1" = -c ] && echo {prefix}\nexit 0\n')
    (shim / "python").chmod(0o755)
    r = subprocess.run(["bash", str(postbuild)], cwd=tmp_path, capture_output=True, text=True,
                       env={**os.environ, "PATH": f"{shim}:{os.environ['PATH']}"})
    assert r.returncode == 0, r.stderr
    assert f"{ROOT}|-m pip install --no-deps -e ." in log.read_text().splitlines()
    overrides = json.loads((prefix / "share" / "jupyter" / "lab" / "settings" / "overrides.json").read_text())
    viewers = overrides["@jupyterlab/docmanager-extension:plugin"]["defaultViewers"]
    assert viewers["markdown"] == viewers["myst"] == _jupytext_notebook_factory()


def _jupytext_notebook_factory() -> str:
    """The name of the notebook view jupytext's JupyterLab extension registers (t.FACTORY="..." in its bundle)."""
    ext = Path(sys.prefix) / "share" / "jupyter" / "labextensions" / "jupyterlab-jupytext" / "static"
    names = {m for js in ext.glob("*.js") for m in re.findall(r'\bFACTORY="([^"]+)"', js.read_text(errors="replace"))}
    if len(names) != 1:
        pytest.fail(f"jupytext's JupyterLab extension under {ext} names {names or 'no'} notebook factory")
    return names.pop()
