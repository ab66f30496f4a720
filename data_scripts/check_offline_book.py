#!/usr/bin/env python
"""Check that the built book renders with no network.

1. Static: no page of book/_build/html loads a script, stylesheet, image or font from another host, and no page
   includes a script or stylesheet twice.
2. Browser (with --browser): every page in headless Chromium with the network off (data_scripts/check_book_browser.py:
   no console error, math typeset and not overflowing, widgets rendered once, no external request). Optionally saves
   screenshots of three pages.

    make book && python data_scripts/check_offline_book.py --browser [--screenshots DIR]
"""
import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
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


TAG = re.compile(r"<(script|link)\b[^>]*>", re.I)


def duplicate_assets(html_dir: Path) -> list[str]:
    """Scripts and stylesheets that a page includes more than once (the same path, whatever its ?v= query). Theme
    templates under _static are not pages."""
    bad = []
    for page in sorted(p for p in html_dir.rglob("*.html") if "_static" not in p.relative_to(html_dir).parts):
        urls = []
        for m in TAG.finditer(page.read_text(errors="replace")):
            tag = m.group(0)
            if m.group(1).lower() == "link" and not re.search(r"rel=[\"']stylesheet", tag, re.I):
                continue
            url = re.search(r"\b(?:src|href)=[\"']([^\"']+)", tag, re.I)
            if url:
                urls.append(url.group(1).split("?")[0])
        bad += [f"{page.relative_to(html_dir)}: {u} included {n} times" for u, n in Counter(urls).items() if n > 1]
    return bad


CHROME_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--host-resolver-rules=MAP * ~NOTFOUND", "--virtual-time-budget=20000",
                "--allow-file-access-from-files"]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--html", type=Path, default=ROOT / "book" / "_build" / "html")
    p.add_argument("--browser", action="store_true", help="also render every page in headless Chromium")
    p.add_argument("--chrome", default=shutil.which("chromium") or shutil.which("chromium-browser")
                   or shutil.which("google-chrome") or "chromium")
    p.add_argument("--screenshots", type=Path, default=None)
    a = p.parse_args(argv)
    if not (a.html / "index.html").exists():
        print(f"no built book in {a.html}; run `make book` first", file=sys.stderr)
        return 2
    bad = static_check(a.html)
    twice = duplicate_assets(a.html)
    for b in bad:
        print("external resource:", b)
    for b in twice:
        print("included twice:", b)
    print(f"static check: {len(list(a.html.rglob('*.html')))} pages, {len(bad)} external resources, "
          f"{len(twice)} repeated scripts or stylesheets")
    ok = not bad and not twice
    if a.browser:
        import check_book_browser

        ok &= check_book_browser.main(["--html", str(a.html), "--chrome", a.chrome]) == 0
    if a.screenshots:
        a.screenshots.mkdir(parents=True, exist_ok=True)
        for rel in ("chapters/03_dynamic_balance.html", "chapters/04_adaptation.html", "reproduce/benchmark.html"):
            with tempfile.TemporaryDirectory() as prof:
                subprocess.run([a.chrome, *CHROME_FLAGS, f"--user-data-dir={prof}", "--window-size=1280,2400",
                                f"--screenshot={a.screenshots / (rel.replace('/', '_') + '.png')}",
                                (a.html / rel).as_uri()], capture_output=True, timeout=180)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
