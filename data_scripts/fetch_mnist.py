#!/usr/bin/env python
"""Fetch the four original MNIST files, verify their md5, and place them where metacl_lite finds them.

Online:   python data_scripts/fetch_mnist.py
Offline:  python data_scripts/fetch_mnist.py --from ../shared/data/mnist/raw
Target:   $METACL_LITE_DATA/mnist/raw (default: data/mnist/raw in this checkout), or --dest DIR.
"""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from metacl_lite.data import DataError, fetch_mnist, mnist_raw_dir  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--from", dest="source", type=Path, help="local folder holding the four .gz files")
    p.add_argument("--dest", type=Path, default=None, help=f"target folder (default {mnist_raw_dir()})")
    a = p.parse_args(argv)
    try:
        fetch_mnist(a.dest, a.source)
    except DataError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
