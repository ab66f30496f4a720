"""The measures of a compact package (issue 29), read from the source with `ast`: a README of one screen and a bit,
no module over 500 lines, the regularisers named once, and words in the book rather than in the package (at most
five functions of the package write prose, and which ones is known)."""
from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Optional

import pytest

from metacl_lite import vocab

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "metacl_lite"

#: The package's functions that may write Markdown or prose: the results tables (the `table` command and the
#: reproduction pages) and the README's generated blocks.
PROSE_WRITERS = {"report.tables.format_table", "report.tables.metric_table_markdown", "publish.readme.update_readme",
                 "publish.readme.markdown_table", "course.sheet.written_answers"}
#: Calls whose string arguments are messages to a user or a developer, not prose about results: errors, warnings,
#: logs, prints, and argparse's help texts.
MESSAGE_CALLS = ("Error", "Exception", "Mismatch", "Failed", "warn", "print", "echo", "log", "info", "debug",
                 "Exit", "exit", "Locked", "Corrupt", "skip", "fail", "label", "title", "legend", "text", "annotate",
                 "__init__")
#: A command line is data, not prose.
COMMANDS = ("python ", "make ", "bash ", "pip ", "git ", "jupyter", "papermill ")
MESSAGE_KEYWORDS = {"help", "description", "epilog", "msg", "desc", "usage", "hint", "fix", "why", "xlabel", "ylabel",
                    "title"}
#: Names a function gives the message it is building (an error's reason, a hint).
MESSAGE_NAMES = {"msg", "message", "hint", "why", "problem", "reason", "aside"}
#: Functions whose strings are messages or record fields, not prose about results, and what they are. Each is checked
#: to still build strings (`test_the_message_functions_are_still_messages`), so the list cannot outlive its reasons.
MESSAGES = {
    "data.datafiles.fetch_hint": "the how-to-fetch hint of the missing-data errors",
    "data.imagecache._valid": "why an image cache is rebuilt (a validator's reason)",
    "lab.store._acc_matrix": "why a results unit is corrupt (a validator's reason, raised as CorruptUnit)",
    "lab.store._accuracies": "why a unit's accuracies are corrupt (a validator's reason, raised as CorruptUnit)",
    "lab.store._tuning_unit": "why a tuning unit is corrupt (a validator's reason, raised as CorruptUnit)",
    "lab.files.outdated_tuning": "what a tuning file lacks of today's format (in the refusal naming the migration)",
    "lab.bench.time_pmnist": "the `data` field of a GPU bench record (what the timed grid trained on)",
    "lab.bench.time_synthetic": "the `data` field of a GPU bench record (what the timed grid trained on)",
    "lab.dynamics.load_dynamics": "the file kind named in read_json's errors",
    "data.mnist.fetch_hint_mnist": "the how-to-fetch hint of MNIST's missing-data errors (a checkout or an installed "
                                   "copy)",
    "lab.atomic._restore": "how to restore a file that cannot be read (the fix of read_json's errors)",
    "lab.atomic.holder": "who holds a lock, in the message of a process that waits for it",
    "course.submissions._refusal": "why a handed-in file is not graded (a symbolic link, a FIFO, outside the class "
                                   "folder)",
    "course.sheet.needs_regrading": "why a sheet row is graded again (an error, a shorter time limit, another "
                                    "autograder)",
    "course.sheet._run_lines": "a feedback's lines on how the run ended (timeout, crash, error) and the time-limit hint",
    "course.grading.grade_one": "a submission's status when the grader's worker ended without a result",
    "course.jail.init": "the jail's error line when it cannot start the submission's process",
    "course.cgroup.where": "why the machine gives the grader no control group (the grading's one-line note)",
    "course.grading_refs._stub": "the source of a withheld reference's stand-in, whose error names the refusal",
    "course.grading_worker.grade": "a submission's status when its process ended early (the sheet's status column)",
    "course.jail_runner.one_line": "the error a student's cell raised, as its feedback line",
}


def _words(text: str) -> int:
    if text.strip().strip("`").startswith(COMMANDS):
        return 0
    return sum(1 for w in text.split() if sum(c.isalpha() for c in w) >= 2 and not w.startswith("-"))


def _strings(node: ast.AST) -> list[str]:
    """The literal text of `node`'s strings (an f-string's literal parts joined)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        return [" ".join(v.value for v in node.values if isinstance(v, ast.Constant))]
    return []


def _call_name(call: ast.Call) -> str:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def prose_strings(fn: ast.FunctionDef) -> list[str]:
    """The strings of five words or more that `fn` builds, leaving out its docstring, nested functions' own
    docstrings, and messages: raised errors, asserts, warnings, prints, logs and help texts."""
    skip: set[int] = set()
    for node in ast.walk(fn):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body and \
                isinstance(node.body[0], ast.Expr) and _strings(node.body[0].value):
            skip.add(id(node.body[0].value))
        if isinstance(node, (ast.Raise, ast.Assert)):
            skip |= {id(n) for n in ast.walk(node)}
        if isinstance(node, ast.Call):
            if any(k in _call_name(node) for k in MESSAGE_CALLS):
                skip |= {id(n) for n in ast.walk(node)}
            for kw in node.keywords:
                if kw.arg in MESSAGE_KEYWORDS:
                    skip |= {id(n) for n in ast.walk(kw.value)}
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id in MESSAGE_NAMES
                                                 for t in node.targets):
            skip |= {id(n) for n in ast.walk(node.value)}
        if isinstance(node, ast.arguments):  # a label's default value (`ylabel: str = "..."`)
            args = node.posonlyargs + node.args
            named = list(zip(args[len(args) - len(node.defaults):], node.defaults)) + \
                [(a, d) for a, d in zip(node.kwonlyargs, node.kw_defaults) if d is not None]
            skip |= {id(n) for a, d in named if a.arg in MESSAGE_KEYWORDS for n in ast.walk(d)}
    out = []
    for node in ast.walk(fn):
        if id(node) in skip:
            continue
        if isinstance(node, ast.JoinedStr):
            skip |= {id(v) for v in node.values}
        out += [s for s in _strings(node) if _words(s) >= 5]
    return out


def prose_writers(package: Path = PACKAGE) -> dict[str, list[str]]:
    """Every function of the package (module-level or a method) that builds prose, with its strings."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        mod = ".".join(path.relative_to(package).with_suffix("").parts)
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                strings = prose_strings(node)
                if strings:
                    found[f"{mod}.{node.name}"] = strings
    return found


def test_the_readme_is_one_screen_and_a_bit():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 250


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_is_over_500_lines(path):
    assert len(path.read_text().splitlines()) <= 500


def _element_name(e: ast.AST) -> str:
    """The name an element of a collection literal spells: a string, or the first argument of a call such as
    `Regulariser("mas", ...)`; "" otherwise."""
    if isinstance(e, ast.Call) and e.args and isinstance(e.func, ast.Name) and e.func.id[:1].isupper():
        e = e.args[0]
    return e.value if isinstance(e, ast.Constant) and isinstance(e.value, str) else ""


def _names_in(tree: ast.AST, keys: bool = True) -> list[set]:
    """The names each tuple, list or set literal (its elements) or, with `keys`, dict literal (its keys) spells."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            out.append({_element_name(e) for e in node.elts} - {""})
        elif isinstance(node, ast.Dict) and keys:
            out.append({_element_name(k) for k in node.keys if k is not None} - {""})
    return out


def _code_cells(page: Path) -> str:
    """A MyST notebook's code cells, joined (the lines between "```{code-cell}" and "```")."""
    out, inside = [], False
    for line in page.read_text().splitlines():
        if line.startswith("```{code-cell}"):
            inside = True
        elif inside and line.startswith("```"):
            inside = False
        elif inside and not line.startswith("%"):
            out.append(line)
    return "\n".join(out)


def _sources(package: Path = PACKAGE) -> dict[str, str]:
    """The package's modules, the tests and chapter 2's code cells, by path; the Makefile is checked as text."""
    root = package.parent
    out = {str(p.relative_to(root)): p.read_text() for p in sorted(package.rglob("*.py"))}
    out.update({str(p.relative_to(root)): p.read_text() for p in sorted((root / "tests").glob("*.py"))})
    page = root / "book" / "chapters" / "02_forgetting.md"
    if page.exists():
        out[str(page.relative_to(root))] = _code_cells(page)
    return out


def _literal_places(words, package: Path = PACKAGE, at_least: Optional[int] = 3) -> list[str]:
    """The files holding a collection literal that names at least `at_least` of `words` (a list of regularisers
    in any order; in the package and the book also a dict keyed by them), or exactly `words` when at_least is None
    (two-word sets such as the variants), and the Makefile when it lists `at_least` of them comma-separated (bare
    or as method names). A test's dict keyed by regularisers is a fixture's data (options, values), not a list."""
    words = set(words)
    places = []
    for name, text in _sources(package).items():
        for spelt in _names_in(ast.parse(text), keys=not name.startswith("tests/")):
            if (spelt == words) if at_least is None else len(spelt & words) >= at_least:
                places.append(name)
                break
    make = package.parent / "Makefile"
    if make.exists() and at_least is not None:
        names = "|".join(sorted(words))
        item = rf"\b({names})(-metacl-\w+)?"
        if re.search(",".join([item] * at_least) + r"\b", make.read_text()):
            places.append("Makefile")
    return places


#: The vocabulary's lists, from vocab.py itself: a regulariser added there is checked too.
VOCABULARY = {"regularisers": (vocab.REGULARISERS, len(vocab.PAPER_REGULARISERS)),
              "omega-options": (vocab.OMEGA_OPTIONS, len(vocab.OMEGA_OPTIONS)),
              "variants": (tuple(vocab.VARIANTS), None), "omega-accumulate": (vocab.OMEGA_ACCUMULATE, None),
              "omega-normalise": (vocab.OMEGA_NORMALISE, None)}


@pytest.mark.parametrize("name", VOCABULARY)
def test_the_vocabulary_is_named_once(name):
    """Only vocab.py lists the regularisers, the variants and the open choices about Omega and their values; the
    package, the tests, chapter 2's code and the Makefile import or print them (python -m metacl_lite.vocab)."""
    words, at_least = VOCABULARY[name]
    assert _literal_places(words, at_least=at_least) == ["metacl_lite/vocab.py"]


def test_the_vocabulary_check_finds_a_second_list(tmp_path):
    pkg = tmp_path / "metacl_lite"
    (tmp_path / "tests").mkdir(parents=True)
    pkg.mkdir()
    (pkg / "vocab.py").write_text('T = (R("mas", "MAS"), R("pi", "PI"), R("ewc", "EWC"))\n'
                                  'V = {"beta": 1, "lambda": 2}\n')
    (pkg / "other.py").write_text('for r in ["pi", "ewc", "mas"]:\n    pass\nX = {"ewc": 1, "pi": 2}\n'
                                  'B = {"none", "beta", "lambda"}\n')
    (tmp_path / "tests" / "test_x.py").write_text('V = ("lambda", "beta")\nHP = {"ewc": {}, "pi": {}, "mas": {}}\n')
    (tmp_path / "Makefile").write_text("LAMBDAS := mas-metacl-lambda,pi-metacl-lambda,ewc-metacl-lambda\n")
    regs = vocab.PAPER_REGULARISERS
    assert _literal_places(regs, pkg) == ["metacl_lite/other.py", "metacl_lite/vocab.py", "Makefile"]
    assert _literal_places(regs, pkg, at_least=2) == ["metacl_lite/other.py", "metacl_lite/vocab.py", "Makefile"]
    assert _literal_places(tuple(vocab.VARIANTS), pkg, at_least=None) == ["metacl_lite/vocab.py", "tests/test_x.py"]
    (tmp_path / "book" / "chapters").mkdir(parents=True)
    (tmp_path / "book" / "chapters" / "02_forgetting.md").write_text(
        "# 2\n\n```{code-cell} ipython3\nBETAS = {\"ewc\": 1.0, \"pi\": 2.0, \"mas\": 3.0}\n```\n")
    assert "book/chapters/02_forgetting.md" in _literal_places(regs, pkg)


def test_at_most_five_functions_write_prose():
    writers = {k: v for k, v in prose_writers().items() if k not in MESSAGES}
    assert set(writers) <= PROSE_WRITERS, {k: v[:2] for k, v in writers.items() if k not in PROSE_WRITERS}
    assert len(PROSE_WRITERS) <= 5


def test_the_message_functions_are_still_messages():
    """Every function let off as a message still builds strings of five words or more: a function whose messages
    went away leaves the list, so that prose added to it later is caught."""
    writers = prose_writers()
    assert sorted(set(MESSAGES) - set(writers)) == []


def test_the_prose_check_finds_a_function_that_writes_sentences(tmp_path):
    pkg = tmp_path / "metacl_lite"
    pkg.mkdir()
    (pkg / "m.py").write_text(
        'def words(x):\n    """A docstring of many words is not prose of the package."""\n'
        '    if x < 0:\n        raise ValueError(f"x={x} must not be negative, give another one")\n'
        '    return f"The method gains {x:.1f} points over its plain regulariser."\n'
        'def numbers(x):\n    return {"gain": x, "unit": "points"}\n')
    assert set(prose_writers(pkg)) == {"m.words"}
