#!/usr/bin/env python
"""Keep the book's execution cache in step with the package's code (`make book` calls this around the build).

MyST-NB's cache keys each page on its own code cells, so a page whose cells are unchanged keeps its stored outputs
even after the `metacl_lite` code it calls has changed: chapter 7 would show verdicts computed by the old
`report/claims.py`. This script records a digest of every file of the package (its Python code and its data files,
hparams.json included) beside the cache after a build (`write`); before the next build (`check`) it removes the
build folder when the digest differs, so that every page is executed again with the code as it is now. A build that
has no record yet (built before this script existed, or by hand) is treated as stale too.

    python data_scripts/book_code_stamp.py check [--build book/_build]
    python data_scripts/book_code_stamp.py write [--build book/_build]

The results files are not part of the digest: the pages that read them carry `# shows:` lines that change their code
(`python -m metacl_lite pages`).
"""
import argparse
import hashlib
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "metacl_lite"
RECORD = ".metacl_lite-code.sha256"


def code_digest(package: Path = PACKAGE) -> str:
    """sha256 over the package's files (relative path and bytes), bytecode caches left out."""
    h = hashlib.sha256()
    for f in sorted(p for p in package.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        h.update(f.relative_to(package).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def check(build: Path, package: Path = PACKAGE) -> str | None:
    """Remove `build` when it was made with other package code; returns why (None: kept, or nothing to remove)."""
    if not build.exists():
        return None
    record = build / RECORD
    if not record.exists():
        why = f"{build} has no record of the package code it was built with"
    elif record.read_text().strip() != code_digest(package):
        why = f"{package.name}'s code has changed since {build} was built"
    else:
        return None
    shutil.rmtree(build)
    return why


def write(build: Path, package: Path = PACKAGE) -> None:
    build.mkdir(parents=True, exist_ok=True)
    tmp = build / (RECORD + ".tmp")
    tmp.write_text(code_digest(package) + "\n")
    tmp.replace(build / RECORD)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("action", choices=("check", "write"))
    p.add_argument("--build", type=Path, default=ROOT / "book" / "_build")
    a = p.parse_args(argv)
    if a.action == "write":
        write(a.build)
        return 0
    why = check(a.build)
    if why:
        print(f"{why}: removed it, so every page is executed again (about a quarter of an hour on a 2-core CPU)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
