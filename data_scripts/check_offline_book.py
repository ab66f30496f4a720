#!/usr/bin/env python
"""Check that the built book renders with no network.

1. Static: no page of book/_build/html loads a script, stylesheet, image or font from another host.
2. Browser (with --browser): headless Chromium, every host name unresolvable (--host-resolver-rules), opens the
   chapters from file:// and checks the rendered DOM: MathJax typeset the math (mjx-container elements), widget
   state rendered (jupyter-widgets elements), and figures are inline images. Optionally saves screenshots.

    make book && python data_scripts/check_offline_book.py --browser [--screenshots DIR]
"""
import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXTERNAL = re.compile(r"""<(script|link|img|iframe|source)\b[^>]*\b(src|href)=["'](https?:)?//[^"']+["']""", re.I)
ALLOWED_LINK_RELS = ("canonical",)


def static_check(html_dir: Path) -> list[str]:
    bad = []
    for page in sorted(html_dir.rglob("*.html")):
        for m in EXTERNAL.finditer(page.read_text(errors="replace")):
            tag = m.group(0)
            if m.group(1).lower() == "link" and not re.search(r"rel=[\"'](stylesheet|preload|icon|modulepreload)", tag):
                continue  # plain hyperlinks in <link rel=...> are not loaded
            bad.append(f"{page.relative_to(html_dir)}: {tag[:160]}")
    return bad


CHROME_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--host-resolver-rules=MAP * ~NOTFOUND", "--virtual-time-budget=20000",
                "--allow-file-access-from-files"]


def browser_dom(chrome: str, page: Path) -> str:
    with tempfile.TemporaryDirectory() as prof:
        r = subprocess.run([chrome, *CHROME_FLAGS, f"--user-data-dir={prof}", "--dump-dom", page.as_uri()],
                           capture_output=True, text=True, timeout=180)
    return r.stdout


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--html", type=Path, default=ROOT / "book" / "_build" / "html")
    p.add_argument("--browser", action="store_true", help="also render pages in headless Chromium")
    p.add_argument("--chrome", default=shutil.which("chromium") or shutil.which("chromium-browser")
                   or shutil.which("google-chrome") or "chromium")
    p.add_argument("--screenshots", type=Path, default=None)
    a = p.parse_args(argv)
    if not (a.html / "index.html").exists():
        print(f"no built book in {a.html}; run `make book` first", file=sys.stderr)
        return 2
    bad = static_check(a.html)
    for b in bad:
        print("external resource:", b)
    print(f"static check: {len(list(a.html.rglob('*.html')))} pages, {len(bad)} external resources")
    ok = not bad
    if a.browser:
        checks = {"chapters/03_dynamic_balance.html": ("mjx-container", "widget-slider", "<img"),
                  "chapters/04_adaptation.html": ("mjx-container", "<img"),
                  "reproduce/benchmark.html": ("<img", "<table")}
        for rel, needles in checks.items():
            dom = browser_dom(a.chrome, a.html / rel)
            missing = [n for n in needles if n not in dom]
            print(f"browser {rel}: {'ok' if not missing else 'MISSING ' + ', '.join(missing)} "
                  f"({dom.count('<mjx-container')} typeset formulas, {dom.count('widget-slider')} slider elements)")
            ok &= not missing
            if a.screenshots:
                a.screenshots.mkdir(parents=True, exist_ok=True)
                with tempfile.TemporaryDirectory() as prof:
                    subprocess.run([a.chrome, *CHROME_FLAGS, f"--user-data-dir={prof}", "--window-size=1280,2400",
                                    f"--screenshot={a.screenshots / (rel.replace('/', '_') + '.png')}",
                                    (a.html / rel).as_uri()], capture_output=True, timeout=180)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
