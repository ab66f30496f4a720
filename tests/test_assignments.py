"""Course assignments (otter-grader): every solution passes all its tests, every unmodified student version fails
them (the tests are not vacuous), the book pages are what the sources generate and leak no solution."""
import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest
from conftest import secret_lines

from metacl_lite.course import assignments as A

ROOT = Path(__file__).resolve().parents[1]
NAMES = A.list_assignments()


def test_at_least_four_assignments_each_a_book_page():
    assert len(NAMES) >= 4
    toc = (ROOT / "book/_toc.yml").read_text()
    for name in NAMES:
        assert f"assignments/{name}" in toc and (ROOT / "book/assignments" / f"{name}.ipynb").exists()


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_solution_passes_and_student_version_fails(name, tmp_path):
    out = A.generate(name, tmp_path, run_tests=False)
    assert out["autograder"] is not None and out["autograder"].exists()
    sol = A.grade(out["solution"], dist=tmp_path, generate_missing=False)
    assert sol.possible > 0 and sol.total == sol.possible, sol.summary()
    student = A.grade(out["student"], dist=tmp_path, generate_missing=False)
    scores = A.score_table(student)
    assert scores and all(score == 0 for _, score, _ in scores), scores  # every implementation test fails
    hidden = [tc for tf in student.results.values() for tc in tf.test_cases if tc.hidden]
    assert hidden, "the autograder must hold hidden tests"


@pytest.mark.slow
def test_generate_runs_the_tests_against_the_solution(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    text = (ROOT / "book/assignments/source/a1_dynamic_balance.md").read_text()
    broken = text.replace("return 0.0 if nn2 == 0.0 else -dot / nn2", "return 0.0 if nn2 == 0.0 else dot / nn2")
    assert broken != text
    (src / "a1_dynamic_balance.md").write_text(broken)
    with pytest.raises(A.AssignmentError, match="does not pass its own tests"):
        A.generate("a1_dynamic_balance", tmp_path / "dist", source_dir=src)
    assert not (tmp_path / "dist" / "a1_dynamic_balance").exists()  # nothing half-written


def test_book_pages_are_generated_from_the_sources():
    assert A.update_pages(check=True) == [], "run `python -m metacl_lite assignments generate --pages-only`"


@pytest.mark.parametrize("name", NAMES)
def test_student_pages_hide_solutions_and_hidden_tests(name):
    secrets = secret_lines(name)
    assert len(secrets) >= 5
    nb = nbformat.read(str(ROOT / "book/assignments" / f"{name}.ipynb"), as_version=4)
    text = "\n".join(c.source for c in nb.cells) + json.dumps(nb.metadata)
    leaked = [s for s in secrets if s in text]
    assert not leaked, leaked
    assert "# BEGIN SOLUTION" not in text and "# HIDDEN" not in text
    assert any(c.cell_type == "code" and "grader.check(" in c.source for c in nb.cells)
    assert nb.metadata["otter"]["assignment_name"] == name
    # the notebook opens with its title; otter's init cell comes right after it
    assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# Assignment ")
    assert nb.cells[1].cell_type == "code" and nb.cells[1].source.startswith(A.INIT_MARK)


def test_init_cell_moves_after_the_title():
    new = nbformat.v4
    nb = new.new_notebook(cells=[new.new_code_cell(A.INIT_MARK + "\nimport otter"), new.new_markdown_cell("# T\n\nx"),
                                 new.new_code_cell("y = 1")])
    A.init_after_title(nb)
    assert [c.source.split("\n")[0] for c in nb.cells] == ["# T", A.INIT_MARK, "y = 1"]
    A.init_after_title(nb)  # already in place: unchanged
    assert [c.source.split("\n")[0] for c in nb.cells] == ["# T", A.INIT_MARK, "y = 1"]


@pytest.mark.slow
def test_check_command_passes_the_solution_and_fails_the_student_version(tmp_path):
    out = A.generate("a1_dynamic_balance", tmp_path, run_tests=False)

    def check(nb):
        return subprocess.run([sys.executable, "-m", "metacl_lite", "assignments", "check", str(nb)],
                              capture_output=True, text=True, cwd=tmp_path)

    ok, bad = check(out["solution"]), check(ROOT / "book/assignments/a1_dynamic_balance.ipynb")
    assert ok.returncode == 0 and "total: 9 / 9" in ok.stdout, ok.stdout + ok.stderr  # the solution holds all tests
    # the student's visible tests are worth 1 point of each question's 3: the hidden tests weigh more
    assert bad.returncode == 1 and "total: 0 / 3" in bad.stdout, bad.stdout + bad.stderr
    assert "hidden tests" in ok.stdout.splitlines()[-1] and "worth more" in ok.stdout.splitlines()[-1]
    with zipfile.ZipFile(tmp_path / "export.zip", "w") as z:  # an otter export, as `grade` takes it (misuse round 7)
        z.write(out["solution"], "a1_dynamic_balance.ipynb")
        z.writestr("a1_dynamic_balance.pdf", b"%PDF")
    zipped = check(tmp_path / "export.zip")
    assert zipped.returncode == 0 and "total: 9 / 9" in zipped.stdout, zipped.stdout + zipped.stderr


def test_bad_input_gives_clear_errors(tmp_path):
    with pytest.raises(A.AssignmentError, match="unknown assignment 'nope'; choose from: a1_dynamic_balance"):
        A.source_path("nope")
    plain = tmp_path / "plain.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")]), str(plain))
    with pytest.raises(A.AssignmentError, match="not an assignment notebook"):
        A.grade(plain, dist=tmp_path)
    with pytest.raises(A.AssignmentError, match="carries no tests"):
        A.check(plain)
    with pytest.raises(A.AssignmentError, match="does not exist"):
        A.check(tmp_path / "missing.ipynb")
    with pytest.raises(A.AssignmentError, match="assignments generate a1_dynamic_balance"):
        A.autograder_zip("a1_dynamic_balance", tmp_path)
    r = subprocess.run([sys.executable, "-m", "metacl_lite", "assignments", "generate", "nope"], capture_output=True,
                       text=True)
    assert r.returncode == 2 and "unknown assignment" in r.stderr


def _questions(name):
    """(config, prompt and cells up to its END QUESTION) of each question of an assignment's source."""
    import yaml

    text = A.source_path(name).read_text()
    blocks = re.findall(r"```otter\n# BEGIN QUESTION\n(.*?)```(.*?)```otter\n# END QUESTION", text, re.S)
    return [(yaml.safe_load(conf), body) for conf, body in blocks]


@pytest.mark.parametrize("name", NAMES)
def test_each_question_states_its_points_and_hidden_tests_weigh_more(name):
    """The points a prompt states are its configuration's; an autograded question has one visible test, then one
    hidden test worth more; the index's table gives each assignment's autograded + written points."""
    autograded = written = 0.0
    for conf, body in _questions(name):
        n = conf["name"][1:]
        if conf.get("manual"):
            assert f"**Question {n}** (written, {conf['points']:g} points, graded by hand)." in body, conf
            written += conf["points"]
            continue
        visible, hidden = conf["points"]
        assert hidden > visible, conf
        assert len(re.findall(r"^def test_", body, re.M)) == 2 and body.index("# HIDDEN\ndef test_") > body.index(
            "def test_"), f"{name} {conf['name']}: one visible test, then the hidden one"
        assert (f"**Question {n}** ({visible + hidden:g} points: {visible:g} for the visible test, {hidden:g} for the "
                f"hidden one).") in body, conf
        autograded += visible + hidden
    index = (ROOT / "book/assignments/index.md").read_text()
    row = next(line for line in index.splitlines() if f"]({name}.ipynb)" in line)
    assert row.rstrip(" |").endswith(f"| {autograded:g}" + (f" + {written:g} written" if written else "")), row


@pytest.mark.parametrize("name", NAMES)
def test_every_written_question_has_an_answer_cell(name):
    """Every question mark in a prompt belongs to a written question (graded by hand, with an answer cell on the
    student page) or to a 'Try it' marked as not graded."""
    nb = nbformat.read(str(ROOT / "book/assignments" / f"{name}.ipynb"), as_version=4)
    cells = nb.cells
    for i, c in enumerate(cells):
        if c.cell_type != "markdown" or "?" not in re.sub(r"\$.*?\$|`.*?`", "", c.source):
            continue
        if "(written," in c.source:
            assert "otter_answer_cell" in cells[i + 1].metadata.get("tags", []), c.source[:80]
        else:
            assert "not graded" in c.source or c.source.startswith("# "), c.source[:120]


def test_without_the_sources_the_commands_say_where_they_are(tmp_path):
    """An installed package has no book/: `assignments list` and the rest say so instead of printing nothing."""
    with pytest.raises(A.AssignmentError, match="no assignment sources in .*checkout of the metacl-lite repository"):
        A.list_assignments(tmp_path / "none")


def _assignments(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "metacl_lite", "assignments", *args], capture_output=True, text=True,
                          cwd=cwd)


def test_generate_check_only_compares_the_pages(tmp_path):
    """Issue 37: `generate --check` without --pages-only replaced dist/; it now only compares the pages."""
    r = _assignments("generate", "a1_dynamic_balance", "--check", "--dist", str(tmp_path / "dist"))
    assert r.returncode == 0, r.stderr
    assert not (tmp_path / "dist").exists()


def test_generate_dist_that_is_a_file_is_refused_before_the_work(tmp_path):
    (tmp_path / "afile").write_text("x")
    r = _assignments("generate", "a1_dynamic_balance", "--no-run-tests", "--dist", str(tmp_path / "afile"))
    assert r.returncode == 2 and "is a file, not a folder" in r.stderr, r.stderr
    assert (tmp_path / "afile").read_text() == "x"


def test_check_a_folder_says_it_is_a_folder(tmp_path):
    r = _assignments("check", str(tmp_path))
    assert r.returncode == 2 and "is a folder; give the notebook file" in r.stderr, r.stderr


def test_generate_takes_the_short_names_that_grade_takes(capsys):
    """`generate a1` as `grade a1` (issue 37): the short name is the assignment, an unknown one is refused at once."""
    from metacl_lite.cli import main

    assert main(["assignments", "generate", "a1", "--pages-only", "--check"]) == 0
    assert main(["assignments", "generate", "a9", "--pages-only"]) == 2
    assert "unknown assignment 'a9'" in capsys.readouterr().err
