"""The book builds with warnings as errors and executed cells (a failing cell fails the build), and every page renders
in a headless browser with the network off: no console error or warning, each script once, math typeset (no raw `$`)
and within the page at 1280 and 390 px, no list markers inside a paragraph, tables within the column, every image
with real alt text in a captioned, numbered figure, chapter 3's widget rendered once, no external request."""
import re
import shutil
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
VENDOR = ROOT / "book" / "_vendor" / "_static"  # served as _static/ (see _config.yml)
sys.path.insert(0, str(ROOT / "data_scripts"))
from check_book_browser import _console_warnings, check_book, find_chrome  # noqa: E402
from check_offline_book import duplicate_assets, static_check  # noqa: E402
import book_code_stamp  # noqa: E402
from conftest import build_book  # noqa: E402


@pytest.mark.slow
def test_book_builds(book_build):
    r, html, _ = book_build
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    page = (html / "reproduce" / "benchmark.html").read_text()
    assert "MAS-MetaCL-λ" in page and "Traceback" not in page
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", page))  # the words a reader reads (glued numbers in spans)
    assert "Trained now, on this machine" in text and "3 tasks of 1 epoch(s)." in text  # the quick live run (conftest)
    assert "No results yet" in (html / "reproduce" / "cub-K10.html").read_text()
    assert (html / "_sources" / "chapters" / "03_dynamic_balance.ipynb").exists()  # .ipynb download
    _assignment_pages_hide_solutions(html)
    assert static_check(html) == []
    assert duplicate_assets(html) == []
    # The vendored MathJax is loaded by Sphinx's mathjax_path only, not also as one script tag per file under it.
    assert (html / "_static" / "vendor" / "mathjax" / "input" / "tex" / "extensions" / "ams.js").exists()
    assert "vendor/mathjax/input" not in (html / "chapters" / "06_metrics.html").read_text()
    _intro_lists_every_page_once_titled(html)
    # Chapter 4's limit of the α² regime is the glued value computed from the plotted errors, not a typed number.
    assert r'\(\alpha\approx\)</span> <span class="pasted-text">' in (html / "chapters" / "04_adaptation.html").read_text()


def _intro_lists_every_page_once_titled(html: Path):
    """The intro's contents (the page body, not the sidebar) links every page of the table of contents, the
    reproduction variants and the assignments included; its <title> does not repeat the book's title."""
    intro = (html / "intro.html").read_text()
    page, book = re.search(r"<title>(.*?)</title>", intro).group(1).split(" &#8212; ")
    assert page != book
    body = intro.split('<article class="bd-article">')[1]
    toc = yaml.safe_load((ROOT / "book" / "_toc.yml").read_text())
    files = [c["file"] for part in toc["parts"] for c in part["chapters"]]
    files += [s["file"] for part in toc["parts"] for c in part["chapters"] for s in c.get("sections", [])]
    from metacl_lite.course.assignments import list_assignments
    from metacl_lite.publish.pages import PAGES

    assert {f"reproduce/{stem}" for stem in PAGES} | {f"assignments/{a}" for a in list_assignments()} <= set(files)
    assert [f for f in files if f'href="{f}.html"' not in body] == []


@pytest.mark.slow
def test_book_renders_in_browser(book_build):
    r, html, _ = book_build
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    reports = check_book(html, find_chrome())
    assert len(reports) >= 20 and "chapters/06_metrics.html" in [p.page for p in reports]
    failing = {p.page: p.console_errors + p.external + p.duplicate_scripts + p.problems for p in reports if not p.ok}
    assert failing == {}
    by_page = {p.page: p for p in reports}
    assert by_page["chapters/03_dynamic_balance.html"].widgets == 1  # the sliders and their figure, once
    assert by_page["chapters/06_metrics.html"].math > 0


def _assignment_pages_hide_solutions(html: Path):
    from html import unescape

    from conftest import secret_lines

    from metacl_lite.course.assignments import list_assignments

    assert "Course assignments" in (html / "assignments" / "index.html").read_text()
    for name in list_assignments():
        page = html / "assignments" / f"{name}.html"
        text = unescape(re.sub(r"<[^>]+>", "", page.read_text()))  # drop the syntax-highlighting spans
        assert 'grader.check("q1")' in text, name
        leaked = [s for s in secret_lines(name) if s in text]
        assert not leaked, (name, leaked)
        assert (html / "_sources" / "assignments" / f"{name}.ipynb").exists(), name  # the download button


def _mini_book(tmp: Path, page_body: str) -> Path:
    """The book's own configuration with a one-page table of contents."""
    book = tmp / "book"
    shutil.copytree(ROOT / "book", book, ignore=shutil.ignore_patterns("_build", "chapters", "reproduce"))
    (book / "_toc.yml").write_text("format: jb-book\nroot: intro\nchapters:\n  - file: page\n")
    (book / "intro.md").write_text("# A mini book\n")  # the real intro links pages this book does not have
    for extra in ("running.md",):  # pages outside chapters/ and reproduce/ that link them
        (book / extra).unlink(missing_ok=True)
    (book / "page.md").write_text((ROOT / "book/chapters/06_metrics.md").read_text().split("# 6.")[0]
                                  + "# A page\n\n" + page_body)
    return book


@pytest.mark.slow
def test_failing_cell_fails_the_build(tmp_path):
    ok = build_book(_mini_book(tmp_path / "a", "```{code-cell} ipython3\nx = 1 + 1\n```\n"), tmp_path / "a" / "out")
    assert ok.returncode == 0, ok.stdout[-2000:] + ok.stderr[-2000:]
    bad = build_book(_mini_book(tmp_path / "b", "```{code-cell} ipython3\nraise RuntimeError('boom')\n```\n"),
                     tmp_path / "b" / "out")
    assert bad.returncode != 0


def test_reproduction_pages_in_the_toc_follow_the_variants():
    """The parts come in the order of the typed chapter numbers (the method 1-6, claims 7, analysis 8, beyond the
    paper 9, then the reproductions); the overview of every setting (chapter 10) is the parent of every reproduction
    page: the live page (benchmark.md) and, after it, every other page in the order of pages.PAGES, so no CIFAR-100
    or CUB page sits under Permuted MNIST's. Its sections are visible, so the intro's contents lists them. The templates the
    pages are made from are not pages: the build excludes them."""
    from metacl_lite.publish.pages import PAGES

    toc = yaml.safe_load((ROOT / "book" / "_toc.yml").read_text())
    assert [p["caption"] for p in toc["parts"]] == ["The method", "Claims", "Analysis", "Beyond the paper",
                                                   "Reproductions", "Course assignments", "Running this book"]
    assert [c["file"] for c in toc["parts"][2]["chapters"]] == ["chapters/08_analysis"]
    assert [c["file"] for c in toc["parts"][3]["chapters"]] == ["chapters/09_memory"]
    part = next(p for p in toc["parts"] if p["caption"] == "Reproductions")
    [overview] = part["chapters"]
    assert overview["file"] == "reproduce/overview" and overview["options"]["hidden"] is False
    assert [s["file"] for s in overview["sections"]] == ["reproduce/benchmark"] + [f"reproduce/{s}" for s in PAGES]
    assert all("sections" not in s for s in overview["sections"])
    heading = (ROOT / "book" / "reproduce" / "overview.md").read_text().split("\n# ", 1)[1]
    assert heading.startswith("10. Reproductions")
    config = yaml.safe_load((ROOT / "book" / "_config.yml").read_text())
    assert "reproduce/templates/*" in config["exclude_patterns"] and "_build" in config["exclude_patterns"]
    assert not any("templates" in s["file"] for s in overview["sections"])


def test_duplicate_assets_names_each_repeated_script_or_stylesheet(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.html").write_text(
        '<script src="_static/x.js?v=1"></script><script src="_static/x.js?v=2"></script>'
        '<link rel="stylesheet" href="s.css"><link rel="stylesheet" type="text/css" href="s.css">'
        '<link rel="prev" href="b.html"><link rel="next" href="b.html"><script src="_static/y.js"></script>')
    (tmp_path / "sub" / "b.html").write_text('<script src="../_static/x.js"></script><script>var a;</script>')
    (tmp_path / "_static").mkdir()
    (tmp_path / "_static" / "macros.html").write_text('<script src="{{ x }}"></script>' * 2)  # a theme template
    assert duplicate_assets(tmp_path) == ["a.html: _static/x.js included 2 times", "a.html: s.css included 2 times"]


MATHJAX = '<script defer src="{up}_static/vendor/mathjax/tex-mml-chtml.js"></script>'
VIEWPORT = '<meta name="viewport" content="width=device-width, initial-scale=1">'  # as in the book's pages


def test_console_warnings_are_reported_but_those_allowed():
    """console.warn and warning-level log entries are reported, errors are not (the error check has them); a warning
    an allow-list entry matches is left out."""
    events = [{"method": "Runtime.consoleAPICalled", "params": {"type": "warning", "args": [{"value": "careful"}]}},
              {"method": "Runtime.consoleAPICalled", "params": {"type": "error", "args": [{"value": "boom"}]}},
              {"method": "Log.entryAdded", "params": {"entry": {"level": "warning", "source": "network",
                                                                "text": "slow", "url": "http://127.0.0.1/a"}}},
              {"method": "Log.entryAdded", "params": {"entry": {"level": "info", "source": "other", "text": "hi"}}}]
    assert _console_warnings(events) == ["console.warn: careful", "log (network): slow http://127.0.0.1/a"]
    assert _console_warnings(events, allowed=[("^log \\(network\\): slow", "a test")]) == ["console.warn: careful"]


def _fixture_site(root: Path) -> None:
    """One small page per failure the browser check must catch, and one clean page."""
    (root / "_static").symlink_to(VENDOR, target_is_directory=True)
    (root / "one.js").write_text("var one = 1;")
    math = '<span class="math notranslate nohighlight">{}</span>'
    wide = r"\[" + "+".join(f"x_{{{i}}}" for i in range(1, 21)) + r"\]"  # about 700 px wide
    widget_view = ('<script type="application/vnd.jupyter.widget-view+json">'
                   '{"model_id": "m", "version_major": 2, "version_minor": 0}</script>')
    (root / "dot.svg").write_text('<svg xmlns="http://www.w3.org/2000/svg" width="40" height="20"></svg>')

    def figure(src, alt="A grey box", caption="A caption", fig_id="fig-a", number="Fig. 1 "):
        cap = f'<figcaption><span class="caption-number">{number}</span>{caption}</figcaption>' if caption else ""
        cap = cap.replace('<span class="caption-number"></span>', "")
        return f'<figure id="{fig_id}"><img src="{src}" alt="{alt}">{cap}</figure>'

    def table(width, head="h"):
        return f'<table style="width:{width}px"><tr><th>{head}</th><td>1</td></tr></table>'

    scroll = '<div style="overflow-x:auto" tabindex="0">{}</div>'  # as the theme wraps each table (keyboard-scrollable)
    article = '<article class="bd-article" style="max-width:688px">{}</article>'  # the book's column at 1280 px
    pages = {
        "clean.html": MATHJAX + "<p>Let " + math.format(r"\(a_{i,j}\)") + " be</p>"
        + '<div class="math notranslate nohighlight">\\[x^2\\]</div><script src="one.js"></script>'
        + article.format(figure("dot.svg") + scroll.format(table(600)) + "<p>A range 3 - 4, $5 or $10 in money; "
                         "a list:</p><ul><li>one - two</li><li>three</li></ul><pre>$g_x$ in code</pre>"
                         '<img src="dot.svg" alt="" role="presentation">'),
        "console.html": '<script>console.error("boom")</script>',
        "exception.html": "<script>null.f()</script>",
        "external.html": figure("http://example.com/a.png"),
        "missing.html": figure("missing.png"),
        "twice.html": '<script src="one.js"></script><script src="one.js"></script>',
        "raw.html": "<p>costs $$x$$ here</p><pre>$$ in code is fine</pre>",
        "untypeset.html": math.format(r"\(x\)"),
        "escape.html": MATHJAX + math.format(r"\(\text{my\_g}\)"),
        "undefined.html": MATHJAX + math.format(r"\(\nosuchmacro x\)"),
        "texerror.html": MATHJAX + math.format(r"\(x^2^3\)"),  # "Double exponent": an error with no backslash
        "wide.html": MATHJAX + f'<div class="math notranslate nohighlight">{wide}</div>',
        "wide_inline.html": MATHJAX + "<p>so " + math.format(wide.replace(r"\[", r"\(").replace(r"\]", r"\)")) + "</p>",
        "widget_missing.html": widget_view,
        "widget_twice.html": widget_view + "<script>for (let i = 0; i < 2; i++) document.body.insertAdjacentHTML("
        "'beforeend', '<div class=\"widget-subarea\"><div class=\"jupyter-widgets\">w</div></div>')</script>",
        "chapters/03_dynamic_balance.html": "<p>no widget</p>",
        "warn.html": '<script>console.warn("careful"); console.warn("strict mode: use allowUnionTypes to allow '
                     'union type keyword at #/properties (strictTypes)")</script>',
        "dollar.html": "<p>the direction $g_x$ here, and $5 or $10 is money</p><p>$$ok$$ is the other check</p>",
        "bullets.html": "<p>Verdicts:\n- claim 1 holds\n- claim 2 fails</p><p>In one line: - claim 3 holds - claim 4 "
        "fails</p><ul><li>a real list - fine</li></ul><p>A range 3 - 4 is fine.</p>",
        "table_wide.html": article.format(scroll.format(table(900, "wide"))),  # scrolls, but too wide at 1280 px
        "table_phone.html": article.format(table(500, "bare") + scroll.format(table(500, "boxed"))),
        "alt.html": article.format(figure("dot.svg", alt="", fig_id="f1")
                                   + figure("dot.svg", alt="dot.svg", fig_id="f2")
                                   + figure("dot.svg", alt="_images/dot.svg", fig_id="f3")
                                   + figure("dot.svg", alt="A grey box, 40 by 20 pixels", fig_id="f4")
                                   + widget_view + '<div class="widget-subarea"><div class="jupyter-widgets">'
                                   '<img src="dot.svg" alt=""></div></div>'),
        # a reader with a screen reader or a phone: a toggle and a slider with no name, pale text; a command that
        # does not wrap
        "axe.html": article.format('<details><summary></summary><p>hidden</p></details>'
                                   '<input type="range" min="0" max="1">'
                                   '<p style="color:#bbb;background:#fff">pale</p>'),
        # a keyboard reader: a link that hides its focus, a box that keeps the focus (Tab does nothing), a link after it
        "keyboard.html": article.format('<p><a href="#a" style="outline:none">no ring</a></p><div tabindex="0" '
                                        'onkeydown="if (event.key === \'Tab\') event.preventDefault()">trap</div>'
                                        '<p><a href="#b">after the trap</a></p>'),
        "page_wide.html": article.format("<p><code style=\"white-space:nowrap\">" + "sysctl_" * 80 + "</code></p>"),
        "caption.html": article.format(figure("dot.svg", caption="") + '<p><img src="dot.svg" alt="A grey box"></p>'
                                       + figure("dot.svg", fig_id="fig-b", number="")
                                       # a widget's drawing: alt text, no caption possible (not flagged)
                                       + widget_view + '<div class="widget-subarea"><div class="jupyter-widgets">'
                                       '<img src="dot.svg" alt="A grey box"></div></div>'),
    }
    for name, body in pages.items():
        (root / name).parent.mkdir(exist_ok=True)
        up = "../" * name.count("/")
        (root / name).write_text(f"<!DOCTYPE html><html lang=\"en\"><head><title>{name}</title>{VIEWPORT}</head>"
                                 f"<body>{body.replace('{up}', up)}</body></html>")
    (root / "index.html").write_text('<!DOCTYPE html><html lang="en"><head><title>index</title></head>'
                                     "<body><p>index</p></body></html>")
    (root / "favicon.ico").write_bytes(b"")  # as the book has one: a browser asks every page's site for it


@pytest.mark.slow
def test_browser_check_catches_each_failure(tmp_path):
    _fixture_site(tmp_path)
    reports = {r.page: r for r in check_book(tmp_path, find_chrome())}
    assert sorted(reports) == sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*.html")
                                     if p.parts[len(tmp_path.parts)] != "_static")
    found = {page: [(k, v) for k, v in (("console", r.console_errors), ("warnings", r.console_warnings),
                                         ("external", r.external), ("twice", r.duplicate_scripts),
                                         ("problems", r.problems)) if v]
             for page, r in reports.items()}
    assert found["clean.html"] == [] and found["index.html"] == [] and reports["clean.html"].math == 2
    assert [e.split("\n")[0] for e in reports["console.html"].console_errors] == ["console.error: boom"]
    assert [e.split("\n")[0] for e in reports["exception.html"].console_errors] == [
        "uncaught: TypeError: Cannot read properties of null (reading 'f')"]
    assert reports["external.html"].external == ["http://example.com/a.png"]
    assert [e for e in reports["external.html"].console_errors if "http://example.com/a.png" not in e] == []
    [missing] = reports["missing.html"].console_errors
    assert missing.startswith("log (network): ") and "404" in missing and missing.endswith("/missing.png")
    assert [u.rsplit("/", 1)[1] for u in reports["twice.html"].duplicate_scripts] == ["one.js"]
    assert reports["raw.html"].problems == ["raw $$ in text: costs $$x$$ here"]
    assert reports["untypeset.html"].problems == [r"math not typeset: \(x\)"]
    assert reports["escape.html"].problems == [r"math error: \text{my\_g}"]
    assert reports["undefined.html"].problems == [r"math error: \nosuchmacro x"]
    assert reports["texerror.html"].problems == ["math error: x^2^3"]
    def page_wider(problems):  # the page itself slides sideways (the math is in no box that scrolls): at 390 and 320
        return sorted({p.split(":")[0] for p in problems if p.startswith("page wider")})

    wide = reports["wide.html"].problems
    assert wide[0].startswith("math overflows at 390 px: ") and "px in " in wide[0] and "x_{1}+x_{2}" in wide[0]
    assert page_wider(wide) == ["page wider than the screen at 320 px", "page wider than the screen at 390 px"]
    assert len([p for p in wide if p.startswith("math")]) == 1
    inline = reports["wide_inline.html"].problems  # inline math does not wrap: past the column at 390 px only
    assert inline[0].startswith("math overflows at 390 px: inline, ends ") and "x_{1}+x_{2}" in inline[0]
    assert page_wider(inline) == page_wider(wide) and len([p for p in inline if p.startswith("math")]) == 1
    assert reports["widget_missing.html"].problems == ["widgets: 1 views, 0 rendered, 0 empty"]
    assert reports["widget_twice.html"].problems == ["widgets: 1 views, 2 rendered, 0 empty"]
    # a page of MENU_PAGES whose menus a reader cannot press: every press of the menu check fails (the fixture has no
    # theme; the real book's menus are pressed by test_the_built_book_passes_the_browser_check)
    assert reports["chapters/03_dynamic_balance.html"].problems == [
        "widgets: 0 views, expected at least 1", "menu at 390 px: no site navigation (☰) button to press",
        "menu at 390 px: no page contents button to press", "menu at 1280 px: no site navigation (☰) button to press"]
    assert reports["warn.html"].console_warnings == ["console.warn: careful"]
    assert reports["dollar.html"].problems == ["raw $$ in text: $$ok$$ is the other check",
                                              "raw $ math in text: $g_x$"]
    assert reports["bullets.html"].problems == [
        "list markers inside a paragraph: Verdicts: - claim 1 holds - claim 2 fails",
        "list markers inside a paragraph: In one line: - claim 3 holds - claim 4 fails"]
    assert reports["table_wide.html"].problems == ["table wider than the column at 1280 px: 900 px in 688 px (wide)"]
    # On a phone a table may scroll inside its own box (boxed), but not make the page slide sideways (bare).
    assert reports["table_phone.html"].problems[0] == (
        "table wider than the column at 390 px and not in a box that scrolls: 500 px in 374 px (bare)")
    assert page_wider(reports["table_phone.html"].problems) == page_wider(wide)  # the bare one; the boxed one scrolls
    # axe-core, WCAG 2.1 A and AA, at every width: a toggle and a slider without a name, pale text
    axe = {p.split(" (")[0] for p in reports["axe.html"].problems}
    assert axe == {f"axe at {w} px: {rule}" for w in (1280, 390, 320)
                   for rule in ("summary-name", "label", "color-contrast")}, reports["axe.html"].problems
    assert [p.split(":")[0] for p in reports["page_wide.html"].problems] == [
        f"page wider than the screen at {w} px" for w in (1280, 390, 320)]
    assert "sysctl_sysctl" in reports["page_wide.html"].problems[1]
    assert reports["keyboard.html"].problems == [
        'keyboard at 1280 px: not reachable with Tab: 1 of 3 controls, e.g. a "after the trap"',
        'keyboard at 1280 px: no focus ring: 1 controls, e.g. a "no ring"']
    assert reports["alt.html"].problems == ['image without real alt text: dot.svg: alt=""',
                                           'image without real alt text: dot.svg: alt="dot.svg"',
                                           'image without real alt text: dot.svg: alt="_images/dot.svg"',
                                           'image without real alt text: dot.svg: alt=""']
    assert reports["caption.html"].problems == ["no caption: image dot.svg outside a figure",
                                               "no caption: figure fig-a without a caption",
                                               "captioned figure without a number: figure fig-b: A caption"]
    for page in ("console.html", "exception.html", "missing.html", "twice.html", "raw.html", "untypeset.html",
                 "escape.html", "undefined.html", "texerror.html", "wide.html", "wide_inline.html",
                 "widget_missing.html",
                 "widget_twice.html", "chapters/03_dynamic_balance.html", "warn.html", "dollar.html", "bullets.html",
                 "table_wide.html", "table_phone.html", "alt.html", "caption.html", "axe.html", "page_wide.html",
                 "keyboard.html"):
        assert len(found[page]) == 1, (page, found[page])  # only the kind of failure the page was made for


def test_a_build_made_with_other_package_code_is_removed_before_the_next(tmp_path):
    """make book: the execution cache keys a page on its own cells, so a change to the package behind an unchanged
    page must clear the build (book_code_stamp check), or the page would keep the old code's outputs; a build
    interrupted halfway with the same code keeps what it executed."""
    pkg, build = tmp_path / "pkg", tmp_path / "_build"
    (pkg / "report").mkdir(parents=True)
    (pkg / "report" / "claims.py").write_text("ALPHA = 0.05\n")
    (pkg / "hparams.json").write_text("{}")
    assert book_code_stamp.check(build, pkg) is None  # nothing built yet: the coming build's code is recorded
    (build / ".jupyter_cache").mkdir()  # the build ran (or was stopped halfway)
    (pkg / "report" / "__pycache__").mkdir()
    (pkg / "report" / "__pycache__" / "claims.cpython-311.pyc").write_bytes(b"\0")  # bytecode does not count
    assert book_code_stamp.check(build, pkg) is None and (build / ".jupyter_cache").exists()
    (build / book_code_stamp.RECORD).unlink()  # built by hand
    assert "no record of the package code" in book_code_stamp.check(build, pkg)
    assert not (build / ".jupyter_cache").exists()
    for change in (lambda: (pkg / "report" / "claims.py").write_text("ALPHA = 0.10\n"),
                   lambda: (pkg / "hparams.json").write_text('{"pmnist": {}}'),  # data files count
                   lambda: (pkg / "report" / "new.py").write_text("")):
        assert book_code_stamp.check(build, pkg) is None
        (build / ".jupyter_cache").mkdir()
        change()
        assert book_code_stamp.check(build, pkg) == f"pkg's code has changed since {build} was built"
        assert not (build / ".jupyter_cache").exists()


def test_make_book_checks_the_code_stamp_right_before_the_build():
    recipe = (ROOT / "Makefile").read_text().split("\nbook: ")[1].split("\n\n")[0].replace("\\\n", " ").splitlines()
    steps = [line.strip() for line in recipe[1:]]  # one step per command, its continued lines joined
    build = next(i for i, line in enumerate(steps) if "jupyter-book build book" in line)
    assert steps[build - 1].endswith("data_scripts/book_code_stamp.py")
    assert not any("book_code_stamp" in line for line in steps[build:])


def test_browser_check_script_refuses_a_bad_browser_count_and_a_missing_book(tmp_path, capsys):
    import check_book_browser

    assert check_book_browser.main(["--browsers", "0", "--html", str(tmp_path)]) == 2
    assert capsys.readouterr().err == "--browsers 0: give 1 or more\n"
    assert check_book_browser.main(["--html", str(tmp_path)]) == 2
    assert "no built book" in capsys.readouterr().err


def test_the_accessibility_extension_names_the_themes_controls_and_lists_the_bibliography():
    """book/_ext/accessibility.py on the theme's markup (as pydata-sphinx-theme and sphinxcontrib-bibtex write it): a
    section toggle gets a name, the search field its own words, the colour-mode icons leave the name to the button,
    MyST-NB's toggle its visible words, and a bibliography entry is a list item."""
    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    import accessibility

    page = ('<summary><span class="toctree-toggle" role="presentation"></span></summary>'
            '<button class="btn search-button-field search-button__button" title="Search" aria-label="Search" x>'
            '<i class="theme-switch fa-solid fa-sun fa-lg" data-mode="light" title="Light"></i>'
            '<summary aria-label="Toggle hidden content"><p>Show code cell source</p></summary>'
            '<div role="list" class="citation-list"><div class="citation" id="id12" role="doc-biblioentry">')
    assert accessibility.accessible(page) == (
        '<summary aria-label="Show or hide the pages of this section"><span class="toctree-toggle" '
        'role="presentation"></span></summary>'
        '<button class="btn search-button-field search-button__button" title="Search" aria-label="Search Ctrl+K" x>'
        '<i aria-hidden="true" class="theme-switch fa-solid fa-sun fa-lg" data-mode="light"></i>'
        '<summary><p>Show code cell source</p></summary>'
        '<div role="list" class="citation-list"><div class="citation" id="id12" role="listitem">')
