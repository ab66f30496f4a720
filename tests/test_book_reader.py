"""The book as a reader meets it (issue 31), on the book the test session builds: the downloadable notebooks hold what
the pages show (every glued value and figure pasted into the text, no `{glue:...}` marker left), the reproductions'
time figures say what each measures and come from the results files, and a negative number has the minus sign."""
import html as H
import json
import re
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "book" / "_ext"))
import ipynb_download as D  # noqa: E402

#: Pages that show nothing but glued values (the intro and chapters 7 and 8: no visible output of their own), and
#: two reproduction pages.
GLUED_PAGES = ("intro", "chapters/07_claims", "chapters/08_analysis", "reproduce/overview", "reproduce/pmnist-K1")


def _markdown(nb: dict) -> str:
    return "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")


def _shown_keys(executed: Path, page: str) -> tuple[set, set]:
    """The keys the page pastes as Markdown ({glue:md}) and as figures ({glue:figure}), read from the build's
    executed copy of the page."""
    src = _markdown(json.loads((executed / f"{page}.ipynb").read_text()))
    md = set(re.findall(r"\{glue:md\}`([\w-]+)`", src)) | set(re.findall(r"```\{glue:md\}\s+(\S+)", src))
    return md, set(re.findall(r"```\{glue:figure\}\s+(\S+)", src))


@pytest.mark.slow
def test_the_notebooks_hold_what_the_pages_show(book_build):
    html, executed = book_build.html, book_build.executed
    with zipfile.ZipFile(html / D.NOTEBOOKS_ZIP) as z:
        readme = " ".join(z.read(f"{D.FOLDER}/README.txt").decode().split())
        assert "with the outputs the book shows" in readme and "figure is an image attached to its cell" in readme
        for page in GLUED_PAGES:
            nb = json.loads(z.read(f"{D.FOLDER}/{page}.ipynb"))
            assert nb == json.loads((html / "_sources" / f"{page}.ipynb").read_text()), page  # the page's download
            text = _markdown(nb)
            assert "{glue" not in text and "{table}" not in text, page
            glue = D.glued_values(executed / f"{page}.glue.json")
            md_keys, figures = _shown_keys(executed, page)
            for key in md_keys:  # each glued Markdown value stands in the text (its {doc} links made links)
                parts = D.DOC.sub("\0", glue[key]["text/markdown"]).split("\0")
                assert all(part.strip() in text for part in parts), (page, key)
            attached = {name: data for c in nb["cells"] for name, data in c.get("attachments", {}).items()}
            assert {f"{k}.png" for k in figures} == set(attached), page
            for k in figures:
                assert attached[f"{k}.png"]["image/png"] == glue[k]["image/png"], (page, k)
    assert _shown_keys(executed, "chapters/07_claims")[1] and _shown_keys(executed, "chapters/08_analysis")[1]


def _text(page: Path) -> str:
    """A built page's prose: tags, scripts, code and math left out."""
    t = re.sub(r"<script.*?</script>|<style.*?</style>|<pre.*?</pre>|<code.*?</code>|<span class=\"pre\">.*?</span>"
               r"|<span class=\"math.*?</span>|<div class=\"math.*?</div>", " ", page.read_text(), flags=re.S)
    return re.sub(r"\s+", " ", H.unescape(re.sub(r"<[^>]+>", " ", t)))


#: The pages this check covers, besides the reproduction pages: the intro, every chapter, "Running this book" and the
#: reference page.
MINUS_PAGES = ["intro"] + [f"chapters/0{i}_{n}" for i, n in enumerate(
    ("problem", "forgetting", "dynamic_balance", "adaptation", "algorithms", "metrics", "claims", "analysis"), 1)] + [
    "running", "reference"]


@pytest.mark.slow
def test_no_page_shows_a_raw_myst_role(book_build):
    """A role that reaches a page as text (a glued value pasted inline, where MyST does not parse it) shows its
    markup to the reader, as the intro's "({doc}`reproduce/overview`)" did."""
    pages = [p for p in book_build.html.rglob("*.html") if p.parts[len(book_build.html.parts)] not in ("_static",
                                                                                                    "_sources")]
    role = re.compile(r"\{(?:doc|ref|numref|eq|term|download|cite(?::\w+)?|glue(?::\w+)?|py:\w+|prf:\w+)\}")
    raw = {str(p.relative_to(book_build.html)): role.findall(_text(p)) for p in pages}
    assert {p: r for p, r in raw.items() if r} == {}


@pytest.mark.slow
def test_a_negative_number_has_the_minus_sign(book_build):
    pages = MINUS_PAGES + [f"reproduce/{p.stem}" for p in (book_build.html / "reproduce").glob("*.html")]
    hyphens = {p: re.findall(r"(?<![\w\-/.=:])-\.?\d[\d.]*", _text(book_build.html / f"{p}.html")) for p in pages}
    assert {p: h for p, h in hyphens.items() if h} == {}
    assert "−" in _text(book_build.html / "reproduce" / "pmnist-K50.html")  # BT is negative there
    margins = json.loads((ROOT / "results" / "open-choices-pmnist.json").read_text())["decisions"]
    if any(x < 0 for d in margins.values() for xs in (d.get("per_seed_margin") or {}).values() for x in xs):
        assert "−" in _text(book_build.html / "reference.html")  # a candidate's margin below the base variant's


@pytest.mark.slow
def test_the_time_figures_say_what_they_measure(book_build):
    from metacl_lite.lab.store import load
    from metacl_lite.report.commands import SEEDS
    from metacl_lite.report.timings import elapsed, reproduce_gpu_estimate

    R = ROOT / "results"
    running = _text(book_build.html / "running.html")
    k20 = json.loads((R / "pmnist-K20.json").read_text())
    took = elapsed(k20, "results/pmnist-K20.json")
    assert f"{took['span_min']:.0f} min of wall-clock time in all" in running
    assert f"their own times add up to more: {took['unit_min']:.0f} min" in running
    grid = json.loads((R / "bench-pmnist-K20.json").read_text())["grids"][0]
    assert f"ran {grid['seeds']} seeds with one worker process per core, in {grid['new']['wall_s'] / 60:.1f} min" \
        in running
    assert "one seed, trained at every build, its units one after another" in running
    assert "the stored run that this build reused" not in running  # "cache" does not mean reused on a fresh build
    assert "this build ran it if its code was new, and reused its stored run otherwise" in running

    overview = _text(book_build.html / "reproduce" / "overview.html")
    cub = overview[overview.index("Split CUB-200 (Table 3) #"):]  # the section, not the contents list
    assert f"{SEEDS} seeds at K = 10 with references" in cub and "of every K" not in cub
    for b, table in (("cifar100", "Table 2"), ("cub", "Table 3")):
        e = reproduce_gpu_estimate(load(R / f"bench-{b}-cuda.json", "bench"), SEEDS)
        h = e["total_s"] / 3600
        assert f"All of {table} on one GPU: about {h:.1f} h, an estimate." in overview if h < 10 else \
            f"All of {table} on one GPU: about {h:.0f} h, an estimate." in overview
        assert f"trains about {e['n_runs']} runs" in overview
        assert ("1 seed was timed: " in overview) == e["scaled"]
    assert "the target for one H100" not in overview and "The code that ran is" not in overview
    page = _text(book_build.html / "reproduce" / "benchmark.html")
    assert "Trained now, on this machine, one unit after another in this page’s own process:" in page


@pytest.mark.slow
def test_the_reference_says_what_its_gpu_figures_are(book_build):
    """The reference page's GPU grids say, in words, how long each took or is estimated to take (an estimate says
    so, with its timed seeds and the factor) beside what we aim for on one H100, and show the commit that ran
    without the provenance note's sentence that names it; the GPU tests' last run the same way."""
    from metacl_lite.lab.store import load
    from metacl_lite.report.timings import duration, gpu_check, gpu_grid, gpu_test_ids

    R = ROOT / "results"
    page = (book_build.html / "reference.html").read_text()
    ref = _text(book_build.html / "reference.html")
    gpu = ref[ref.index("On a GPU #"):ref.index("On the CPU #")]
    assert "target on one H100" not in gpu and "✓" not in gpu and "✗" not in gpu and "(scaled from" not in gpu
    assert "The code that ran is" not in ref
    for suite in ("pmnist", "cifar100", "cub"):
        g = gpu_grid(load(R / f"bench-{suite}-cuda.json", "bench"))
        m, n = g["measured_seeds"], g["seeds"]
        if g["scaled"]:
            assert f"about {duration(g['grid_s'])} for {n} seeds" in gpu, suite
            assert (f"an estimate: {m} seed{'s' if m > 1 else ''} timed ({duration(g['wall_s_measured'])}), "
                    f"× {n / m:g}, as every seed is the same work") in gpu, suite
        else:
            assert f"{n} seeds in {duration(g['grid_s'])} , measured" in gpu, suite
        what = "this estimate" if g["scaled"] else "this run"
        assert f"We aim for {duration(g['target_s'])} on one H100; {what} " + (
            "is within it." if g["met"] else f"is {g['grid_s'] / g['target_s']:.1f} times that.") in gpu, suite
        assert f'<span class="pre">{g["commit"]}</span>' in page, suite
    c = gpu_check(json.loads((R / "gpu-check.json").read_text()), gpu_test_ids(ROOT / "tests" / "test_gpu.py"))
    assert f'<span class="pre">{c.attrs["commit"]}</span>' in page
    assert (f"{c.attrs['not_run']} that this check did not run" in ref) == bool(c.attrs["not_run"])
    assert ">nan<" not in page and " nan " not in ref  # a value not measured is "–"
