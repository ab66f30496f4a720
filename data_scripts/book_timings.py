"""How long each page of the book takes to execute, read from the execution cache of a build, written with its
provenance to results/book-timings.json (the "Running this book" page shows it, one row per page of the current table
of contents, and says which runs overlapped: run it after a build that had the machine to itself).

    python data_scripts/book_timings.py                     # after `make book`
    python data_scripts/book_timings.py --check             # list the pages whose current code has no cached run

For every page of book/_toc.yml that has code cells, the current source is matched against the jupyter-cache
records of the build (`book/_build/.jupyter_cache`, as myst-nb keeps them: a record matches when the page's code
cells are unchanged), and that record's `execution_seconds` is taken: the wall time of the page's last full
execution. Pages run with `execution_mode: force` (in their front matter) are not cached; they are listed with the
time of their run in this build's own table (`nb-exec-table`) instead. Pages that have no matching record (never
built since they last changed) are listed as such, never guessed.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def page_timings(book: Path, cache_dir: Path) -> list[dict]:
    """One row per page with code: its cached execution time (s), or why there is none."""
    import fnmatch

    import jupytext
    import yaml
    from jupyter_cache import get_cache

    from metacl_lite.report.timings import page_source, toc_pages

    cache = get_cache(str(cache_dir)) if cache_dir.exists() else None
    excluded = (yaml.safe_load((book / "_config.yml").read_text()).get("execute") or {}).get("exclude_patterns", [])
    rows = []
    for page in toc_pages(book):
        src = page_source(book, page)
        if src is None:
            continue
        nb = jupytext.read(str(src))
        if not any(c.cell_type == "code" for c in nb.cells):
            continue
        mode = (nb.metadata.get("mystnb") or {}).get("execution_mode")
        row = {"page": page, "execution_s": None, "status": None}
        hit = next((pat for pat in excluded if fnmatch.fnmatch(src.relative_to(book).as_posix(), pat)), None)
        if hit:
            row["status"] = f"not executed (execute.exclude_patterns: {hit})"
        elif mode == "force":
            row["status"] = "force (executed on every build; not cached)"
        elif cache is None:
            row["status"] = "no execution cache"
        else:
            record = _match(cache, nb)
            if record is None:
                row["status"] = "no cached run of the current code"
            else:
                row["execution_s"] = record.data.get("execution_seconds")
                row["status"] = "cached"
                row["executed"] = record.created.isoformat(timespec="seconds")
        rows.append(row)
    return rows


def _match(cache, nb):
    """The cache record of this notebook's code, or None (jupyter-cache raises KeyError when there is none)."""
    try:
        return cache.match_cache_notebook(nb)
    except KeyError:
        return None


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--book", type=Path, default=ROOT / "book")
    p.add_argument("--cache", type=Path, default=None, help="default: <book>/_build/.jupyter_cache")
    p.add_argument("--out", type=Path, default=ROOT / "results" / "book-timings.json")
    p.add_argument("--check", action="store_true", help="write nothing; list the pages without a cached run")
    p.add_argument("--note", default=None, help="what else ran on the machine during the build (recorded as given)")
    a = p.parse_args(argv)
    cache = a.cache or a.book / "_build" / ".jupyter_cache"
    start = time.perf_counter()
    rows = page_timings(a.book, cache)
    for r in rows:
        t = f"{r['execution_s']:8.1f} s" if r["execution_s"] is not None else " " * 10
        print(f"{t}  {r['page']}  ({r['status']})")
    from metacl_lite.report.timings import overlapping_runs

    for page, others in overlapping_runs(rows).items():  # two builds at once: the figures include waiting
        print(f"warning: the run of {page} overlapped the runs of {', '.join(others)}; time a build that has the "
              f"machine to itself", file=sys.stderr)
    if a.check:
        return 1 if any(r["status"].startswith(("no ", "no execution")) for r in rows) else 0
    from metacl_lite.lab.atomic import write_json
    from metacl_lite.lab.provenance import invocation, relative_to_repo

    import jupyter_cache
    import myst_nb

    prov = invocation()
    command = "python data_scripts/book_timings.py"
    for flag, value, default in (("--book", a.book, ROOT / "book"), ("--cache", a.cache, None),
                                 ("--out", a.out, ROOT / "results" / "book-timings.json")):
        if value is not None and Path(value).resolve() != (Path(default).resolve() if default else None):
            command += f" {flag} {relative_to_repo(value)}"
    if a.note:
        command += " --note " + repr(a.note)
    prov.update(command=command, cache=relative_to_repo(cache), note=a.note,
                wall_s_total=time.perf_counter() - start,  # this script's own run: reading the cache
                tools={"jupyter-cache": jupyter_cache.__version__, "myst-nb": myst_nb.__version__})
    doc = {"kind": "book-timings", "pages": rows,
           "total_cached_s": sum(r["execution_s"] for r in rows if r["execution_s"] is not None),
           "provenance": prov}
    write_json(a.out, doc)
    print(f"wrote {relative_to_repo(a.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
