#!/usr/bin/env python
"""Keep the book's execution cache in step with the package's code (`make book` calls this before the build).

MyST-NB's cache keys each page on its own code cells, so a page whose cells are unchanged keeps its stored outputs
even after the `metacl_lite` code it calls has changed: chapter 7 would show verdicts computed by the old
`findings/claims.py`. Before a build, this script removes the build folder when the digest of every file of the package
(its Python code and its data files, hparams.json included) differs from the one recorded there, so that every page
is executed again with the code as it is now; then it records the digest of the code the build is about to run. A
build interrupted halfway (Ctrl-C) so keeps the pages it executed for the next one. A build folder with no record
(built before this script existed, or by hand) is treated as stale.

    python data_scripts/book_code_stamp.py [--build book/_build]

The results files are not part of the digest: the pages that read them carry `# shows:` lines that change their code
(`python -m metacl_lite.tools pages`).
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
    """Before a build: remove `build` when it was made with other package code (or records none), then record the
    digest of the code the coming build runs with. Returns why it removed the folder (None: kept, or none yet)."""
    digest = code_digest(package)
    record = build / RECORD
    why = None
    if build.exists() and not record.exists():
        why = f"{build} has no record of the package code it was built with"
    elif build.exists() and record.read_text().strip() != digest:
        why = f"{package.name}'s code has changed since {build} was built"
    if why:
        shutil.rmtree(build)
    build.mkdir(parents=True, exist_ok=True)
    tmp = build / (RECORD + ".tmp")
    tmp.write_text(digest + "\n")
    tmp.replace(record)
    return why


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", type=Path, default=ROOT / "book" / "_build")
    why = check(p.parse_args(argv).build)
    if why:
        print(f"{why}: removed it, so every page is executed again (about a quarter of an hour on a 2-core CPU)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
