"""MNIST files, checksums, the embedded subset, first-K sampling, permutations."""
import gzip
import hashlib
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from metacl_lite import data as D

ROOT = Path(__file__).resolve().parents[1]


def _write_idx(path, arr):
    arr = np.asarray(arr, dtype=np.uint8)
    head = struct.pack(">I", 0x0800 | arr.ndim) + struct.pack(">" + "I" * arr.ndim, *arr.shape)
    with gzip.GzipFile(path, "wb", mtime=0) as f:
        f.write(head + arr.tobytes())


@pytest.fixture
def fake_mnist(tmp_path, monkeypatch):
    """Tiny MNIST in the official idx/gzip format, with the package's md5 table pointed at it."""
    rng = np.random.default_rng(0)
    src = tmp_path / "src"
    src.mkdir()
    ytr = rng.integers(0, 10, 300)
    arrays = {"train-images-idx3-ubyte.gz": rng.integers(0, 256, (300, 28, 28)),
              "train-labels-idx1-ubyte.gz": ytr,
              "t10k-images-idx3-ubyte.gz": rng.integers(0, 256, (50, 28, 28)),
              "t10k-labels-idx1-ubyte.gz": rng.integers(0, 10, 50)}
    md5 = {}
    for name, arr in arrays.items():
        _write_idx(src / name, arr)
        md5[name] = hashlib.md5((src / name).read_bytes()).hexdigest()
    monkeypatch.setattr(D, "MNIST_FILES", md5)
    monkeypatch.setenv("METACL_LITE_DATA", str(tmp_path / "root"))
    return src, arrays


def test_fetch_from_local_dir_and_load(fake_mnist):
    src, arrays = fake_mnist
    dest = D.fetch_mnist(source_dir=src, quiet=True)
    assert dest == D.mnist_raw_dir()
    d = D.load_mnist_raw()
    np.testing.assert_array_equal(d["y_train"], arrays["train-labels-idx1-ubyte.gz"])
    assert d["x_train"].shape == (300, 28, 28)


def test_missing_file_names_the_fetch_command(fake_mnist):
    with pytest.raises(D.MissingDataError, match="data_scripts/fetch.py mnist"):
        D.load_mnist_raw()


def test_corrupted_file_is_refused(fake_mnist):
    src, _ = fake_mnist
    D.fetch_mnist(source_dir=src, quiet=True)
    f = D.mnist_raw_dir() / "t10k-labels-idx1-ubyte.gz"
    f.write_bytes(f.read_bytes()[:-3] + b"xyz")
    with pytest.raises(D.ChecksumError, match="fetch.py mnist"):
        D.load_mnist_raw()
    # fetching again repairs it
    D.fetch_mnist(source_dir=src, quiet=True)
    D.load_mnist_raw()


def test_fetch_refuses_a_bad_local_copy(fake_mnist, tmp_path):
    src, _ = fake_mnist
    (src / "train-labels-idx1-ubyte.gz").write_bytes(b"garbage")
    with pytest.raises(D.ChecksumError):
        D.fetch_mnist(source_dir=src, quiet=True)


def test_fetch_script_cli_error_exit(fake_mnist, tmp_path):
    r = subprocess.run([sys.executable, str(ROOT / "data_scripts/fetch.py"), "mnist", "--from", str(tmp_path / "nope"),
                        "--dest", str(tmp_path / "d")], capture_output=True, text=True)
    assert r.returncode == 1 and "not found" in r.stderr


def test_first_k_order():
    labels = np.array([3, 1, 3, 1, 1, 3, 2, 2, 3])
    np.testing.assert_array_equal(D.first_k_indices(labels, 2), [0, 1, 2, 3, 6, 7])
    np.testing.assert_array_equal(D.first_k_indices(labels, 1, offset=1), [2, 3, 7])
    with pytest.raises(ValueError, match="K=3"):
        D.first_k_indices(labels, 3)
    with pytest.raises(ValueError):
        D.first_k_indices(labels, 0)


def test_permutations_deterministic_distinct():
    p1, p2 = D.make_permutations(20, 7), D.make_permutations(20, 7)
    np.testing.assert_array_equal(p1, p2)
    np.testing.assert_array_equal(p1[0], np.arange(784))  # task 1 is plain MNIST
    assert len({tuple(p) for p in p1}) == 20
    assert all(sorted(p) == list(range(784)) for p in p1)
    assert not np.array_equal(D.make_permutations(20, 8)[1], p1[1])


def test_embedded_checksum_and_content():
    d = D.load_mnist_embedded()
    assert d["x_train"].shape == (5000, 28, 28) and d["x_train"].dtype == np.uint8
    assert d["x_test"].shape == (10000, 28, 28)
    assert np.bincount(d["y_train"]).tolist() == [500] * 10
    assert np.all(np.diff(d["train_index"]) > 0)  # original file order
    assert D.file_digest(D.EMBEDDED_MNIST, "sha256") == D.EMBEDDED_MNIST_SHA256_FILE.read_text().split()[0]


def test_corrupted_embedded_is_refused(tmp_path):
    bad = tmp_path / "x.npz"
    bad.write_bytes(D.EMBEDDED_MNIST.read_bytes()[:-10])
    with pytest.raises(D.ChecksumError, match="build_embedded_mnist.py"):
        D.load_mnist_embedded(bad)


def test_embedded_builder_takes_first_k_and_is_deterministic(fake_mnist, tmp_path, monkeypatch):
    """The builder of the embedded subset, on MNIST-format fixtures; where the real raw files are present (a data
    checkout, `make data`), also that the committed subset equals a rebuild from them."""
    src, _ = fake_mnist
    sys.path.insert(0, str(ROOT / "data_scripts"))
    import build_embedded_mnist as B

    monkeypatch.setattr(B, "EMBEDDED_MNIST_PER_CLASS", 5)
    raw = D.load_mnist_raw(src)
    built = B.build_arrays(raw)
    idx = built["train_index"]
    assert np.all(np.diff(idx) > 0) and np.bincount(built["y_train"], minlength=10).tolist() == [5] * 10
    for c in range(10):  # the first 5 of each class in file order: no earlier image of that class was skipped
        assert (raw["y_train"][: idx[built["y_train"] == c][-1] + 1] == c).sum() == 5
    np.testing.assert_array_equal(built["x_train"], raw["x_train"][idx])
    np.testing.assert_array_equal(built["x_test"], raw["x_test"])
    B.write_npz(built, tmp_path / "a.npz")
    B.write_npz(built, tmp_path / "b.npz")
    assert (tmp_path / "a.npz").read_bytes() == (tmp_path / "b.npz").read_bytes()
    with np.load(tmp_path / "a.npz") as z:
        np.testing.assert_array_equal(z["x_train"], built["x_train"])
    real = _shared_raw()
    if real is not None:
        monkeypatch.undo()
        rebuilt = B.build_arrays(D.load_mnist_raw(real))
        emb = D.load_mnist_embedded()
        for k in rebuilt:
            np.testing.assert_array_equal(emb[k], rebuilt[k])


def _shared_raw():
    d = ROOT.parent / "shared" / "data" / "mnist" / "raw"
    return d if all((d / f).exists() for f in D.MNIST_FILES) else None


def test_permuted_mnist_stream():
    b = D.permuted_mnist(K=20, n_tasks=4, seed=3)
    assert b.n_tasks == 4 and not b.multi_head and len(b.train_stream[0]) == 200
    assert np.bincount(b.train_stream[2].y.numpy()).tolist() == [20] * 10
    assert len(b.test_stream[1]) == 10000
    x0, x1 = b.test_stream[0].inputs(), b.test_stream[1].inputs()
    perm = D.make_permutations(4, 3)[1]
    assert np.array_equal(x1.numpy(), x0.numpy()[:, perm])
    # the training images are the first K per class of the file, permuted
    emb = D.load_mnist_embedded()
    idx = D.first_k_indices(emb["y_train"], 20)
    np.testing.assert_allclose(b.train_stream[1].x.numpy(), emb["x_train"][idx].reshape(200, -1)[:, perm] / 255.0)


def test_validation_split_is_disjoint_from_training():
    b = D.permuted_mnist(K=20, n_tasks=2, seed=0, split="val")
    assert len(b.test_stream[0]) == 1000
    with pytest.raises(ValueError, match="overlap"):
        D.permuted_mnist(K=450, n_tasks=2, split="val")


def test_k_out_of_range():
    with pytest.raises(ValueError, match="embedded"):
        D.permuted_mnist(K=600, n_tasks=2, source="embedded")
    with pytest.raises(ValueError):
        D.permuted_mnist(K=0, n_tasks=2)
    with pytest.raises(ValueError, match="unknown benchmark"):
        D.make_benchmark("svhn", 20)
