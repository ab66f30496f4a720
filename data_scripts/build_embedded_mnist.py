#!/usr/bin/env python
"""Build the embedded MNIST subset shipped in the package, deterministically, from the raw MNIST files.

Contents: the first EMBEDDED_MNIST_PER_CLASS (600) training images of each class (original file order, with their
positions in the training file) -- the paper's largest K, 500, plus the validation images 500-599 of each class --
and the full 10 000-image test set, uint8, in a deflate-compressed .npz whose zip entries carry a fixed timestamp, so
the same inputs give the same bytes. Writes metacl_lite/data/mnist_first600.npz (EMBEDDED_MNIST) and its sha256
beside it (both written atomically).

    python data_scripts/fetch.py mnist --from ../shared/data/mnist/raw   # or online without --from
    python data_scripts/build_embedded_mnist.py [--check]

--check rebuilds in memory and fails (exit 1) unless the bytes equal the committed file's bytes. Exit status 2
(with `error: ...`) when the raw files are missing or corrupted.
"""
import argparse
import hashlib
import io
import sys
import zipfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from metacl_lite.lab.atomic import write_bytes, write_text  # noqa: E402
from metacl_lite.data.mnist import (EMBEDDED_MNIST, EMBEDDED_MNIST_PER_CLASS, EMBEDDED_MNIST_SHA256_FILE,  # noqa: E402
                               load_mnist_raw)
from metacl_lite.data.streams import first_k_indices  # noqa: E402
from metacl_lite.errors import UserError  # noqa: E402


def build_arrays(raw: dict) -> dict:
    idx = first_k_indices(raw["y_train"], EMBEDDED_MNIST_PER_CLASS)
    return {
        "x_train": raw["x_train"][idx], "y_train": raw["y_train"][idx], "train_index": idx.astype(np.int32),
        "x_test": raw["x_test"], "y_test": raw["y_test"],
    }


def npz_bytes(arrays: dict) -> bytes:
    """The arrays as a deflate-compressed .npz whose zip entries carry a fixed timestamp and mode, so the same arrays
    always give the same bytes."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        for name, arr in arrays.items():
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.ascontiguousarray(arr), allow_pickle=False)
            info = zipfile.ZipInfo(name + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            z.writestr(info, buf.getvalue(), compresslevel=9)
    return out.getvalue()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--raw", type=Path, default=None, help="folder of the four raw .gz files")
    p.add_argument("--check", action="store_true", help="compare with the committed file instead of writing")
    a = p.parse_args(argv)
    try:
        data = npz_bytes(build_arrays(load_mnist_raw(a.raw)))
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if a.check:
        if data != EMBEDDED_MNIST.read_bytes():
            print(f"{EMBEDDED_MNIST} differs from a rebuild from the raw files", file=sys.stderr)
            return 1
        print("embedded subset equals (byte for byte) a rebuild from the raw files")
        return 0
    write_bytes(EMBEDDED_MNIST, data)
    digest = hashlib.sha256(data).hexdigest()
    write_text(EMBEDDED_MNIST_SHA256_FILE, f"{digest}  {EMBEDDED_MNIST.name}\n")
    print(f"wrote {EMBEDDED_MNIST} ({len(data)} bytes, sha256 {digest})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
