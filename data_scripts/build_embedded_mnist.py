#!/usr/bin/env python
"""Build the embedded MNIST subset shipped in the package, deterministically, from the raw MNIST files.

Contents: the first 500 training images of each class (original file order, with their positions in the
training file) and the full 10 000-image test set, uint8, in a deflate-compressed .npz whose zip entries carry a
fixed timestamp, so the same inputs give the same bytes. Writes metacl_lite/data/mnist_first500.npz and its
sha256 beside it.

    python data_scripts/fetch.py mnist --from ../shared/data/mnist/raw   # or online without --from
    python data_scripts/build_embedded_mnist.py [--check]

--check rebuilds in memory and fails unless the arrays equal the committed file's arrays.
"""
import argparse
import io
import sys
import zipfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from metacl_lite.data import (EMBEDDED_MNIST, EMBEDDED_MNIST_PER_CLASS, EMBEDDED_MNIST_SHA256_FILE,  # noqa: E402
                              DataError, file_digest, first_k_indices, load_mnist_embedded, load_mnist_raw)


def build_arrays(raw: dict) -> dict:
    idx = first_k_indices(raw["y_train"], EMBEDDED_MNIST_PER_CLASS)
    return {
        "x_train": raw["x_train"][idx], "y_train": raw["y_train"][idx], "train_index": idx.astype(np.int32),
        "x_test": raw["x_test"], "y_test": raw["y_test"],
    }


def write_npz(arrays: dict, path: Path) -> None:
    tmp = path.with_name(path.name + ".part")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        for name, arr in arrays.items():
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.ascontiguousarray(arr), allow_pickle=False)
            info = zipfile.ZipInfo(name + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            z.writestr(info, buf.getvalue(), compresslevel=9)
    tmp.replace(path)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--raw", type=Path, default=None, help="folder of the four raw .gz files")
    p.add_argument("--check", action="store_true", help="compare with the committed file instead of writing")
    a = p.parse_args(argv)
    try:
        arrays = build_arrays(load_mnist_raw(a.raw))
        if a.check:
            have = load_mnist_embedded()
            bad = [k for k in arrays if not np.array_equal(arrays[k], have[k])]
            if bad:
                print(f"embedded subset differs from a rebuild in: {bad}", file=sys.stderr)
                return 1
            print("embedded subset equals a rebuild from the raw files")
            return 0
    except DataError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    write_npz(arrays, EMBEDDED_MNIST)
    digest = file_digest(EMBEDDED_MNIST, "sha256")
    EMBEDDED_MNIST_SHA256_FILE.write_text(f"{digest}  {EMBEDDED_MNIST.name}\n")
    print(f"wrote {EMBEDDED_MNIST} ({EMBEDDED_MNIST.stat().st_size} bytes, sha256 {digest})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
