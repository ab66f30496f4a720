#!/usr/bin/env python
"""Place a dataset where metacl_lite finds it, checking the official checksums.

    python data_scripts/fetch.py mnist                  # online: the four official MNIST files (md5)
    python data_scripts/fetch.py mnist --from DIR       # offline: copy them from a folder (e.g. ../shared/data/mnist/raw)
    python data_scripts/fetch.py cifar100 [--from PATH] # cifar-100-python.tar.gz (md5), or the extracted folder
    python data_scripts/fetch.py cub [--from PATH]      # CUB_200_2011.tgz (md5), or the extracted folder

Target: $METACL_LITE_DATA/<dataset>/ (default: data/<dataset>/ in this checkout); MNIST: --dest overrides.
Nothing already there is replaced before the new copy has passed its checks. Exit status 2 (with `error: ...`)
when the data or an option is wrong.
"""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from metacl_lite.data.cifar100 import fetch_cifar100  # noqa: E402
from metacl_lite.data.cub import fetch_cub  # noqa: E402
from metacl_lite.data.mnist import fetch_mnist  # noqa: E402
from metacl_lite.errors import UserError  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dataset", choices=("mnist", "cifar100", "cub"))
    p.add_argument("--from", dest="source", help="local folder (MNIST) or archive/extracted folder")
    p.add_argument("--dest", default=None, help="MNIST only: target folder")
    a = p.parse_args(argv)
    if a.dest is not None and a.dataset != "mnist":
        p.error("--dest is for mnist; set METACL_LITE_DATA to move the other datasets")  # exits 2
    try:
        for flag, given in (("--from", a.source), ("--dest", a.dest)):
            if given is not None and not given.strip():  # Path("") is the current folder: never meant
                raise UserError(f"{flag} '' names no path; give a folder (or leave {flag} out)")
        a.source, a.dest = (Path(v) if v is not None else None for v in (a.source, a.dest))
        if a.dataset == "mnist":
            fetch_mnist(a.dest, a.source)
        else:
            print({"cifar100": fetch_cifar100, "cub": fetch_cub}[a.dataset](a.source))
    except UserError as e:  # missing or corrupted data: the message says what to do
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # a folder that cannot be written (read-only, a full disk): nothing is replaced until checked
        where = f"{e.filename}: " if e.filename else ""
        print(f"error: {where}{e.strerror or e}; give a folder you can write (--dest for MNIST, or METACL_LITE_DATA)",
              file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
