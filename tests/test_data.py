"""MNIST files, checksums, downloads, the embedded subset, first-K sampling, permutations, the checks run before any
compute (`check_data`), and the benchmark specification driving the Permuted MNIST loader."""
import dataclasses
import gzip
import hashlib
import importlib
import io
import struct
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import serve

from metacl_lite.data import mnist as M
from metacl_lite.data.benchmarks import check_data, make_benchmark
from metacl_lite.data.cifar100 import split_cifar100
from metacl_lite.data.datafiles import ChecksumError, DataError, MissingDataError, file_digest
from metacl_lite.errors import UsageError, UserError
from metacl_lite.data.specs import SPECS, get_spec
from metacl_lite.data.streams import first_k_indices

ROOT = Path(__file__).resolve().parents[1]
TRAIN_LABELS = "train-labels-idx1-ubyte.gz"


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
              TRAIN_LABELS: ytr,
              "t10k-images-idx3-ubyte.gz": rng.integers(0, 256, (50, 28, 28)),
              "t10k-labels-idx1-ubyte.gz": rng.integers(0, 10, 50)}
    md5 = {}
    for name, arr in arrays.items():
        _write_idx(src / name, arr)
        md5[name] = hashlib.md5((src / name).read_bytes()).hexdigest()
    monkeypatch.setattr(M, "MNIST_FILES", md5)
    monkeypatch.setenv("METACL_LITE_DATA", str(tmp_path / "root"))
    return src, arrays


@pytest.fixture
def raw_mnist():
    """The real MNIST files where `mnist_raw_dir()` looks ($METACL_LITE_DATA, else data/mnist/raw). Required: the
    test fails, never skips, without them (`make test` fetches them first)."""
    d = M.mnist_raw_dir()
    if not all((d / f).is_file() for f in M.MNIST_FILES):
        pytest.fail(f"the raw MNIST files are not in {d}: get them (md5-checked) with `make mnist-raw`, i.e. "
                    f"`python data_scripts/fetch.py mnist --from ../shared/data/mnist/raw` (offline) or "
                    f"`python data_scripts/fetch.py mnist` (online)")
    return d


def _script(name):
    """A module of data_scripts/ (imported, so that its main() runs in this process)."""
    sys.path.insert(0, str(ROOT / "data_scripts"))
    return importlib.import_module(name)


def test_data_errors_are_user_errors():
    assert issubclass(DataError, UserError) and issubclass(DataError, RuntimeError)
    assert issubclass(MissingDataError, DataError) and issubclass(MissingDataError, FileNotFoundError)
    assert issubclass(ChecksumError, DataError) and issubclass(ChecksumError, ValueError)


def test_file_tables_are_torchvision_s():
    from torchvision.datasets import MNIST

    assert M.MNIST_FILES == dict(MNIST.resources)


def test_fetch_from_local_dir_and_load(fake_mnist):
    src, arrays = fake_mnist
    dest = M.fetch_mnist(source_dir=src, quiet=True)
    assert dest == M.mnist_raw_dir()
    d = M.load_mnist_raw()
    for key, name in (("x_train", "train-images-idx3-ubyte.gz"), ("y_train", TRAIN_LABELS),
                      ("x_test", "t10k-images-idx3-ubyte.gz"), ("y_test", "t10k-labels-idx1-ubyte.gz")):
        np.testing.assert_array_equal(d[key], arrays[name])


def test_missing_file_names_the_fetch_command(fake_mnist):
    with pytest.raises(MissingDataError, match="data_scripts/fetch.py mnist"):
        M.load_mnist_raw()


def test_corrupted_file_is_refused(fake_mnist):
    src, _ = fake_mnist
    M.fetch_mnist(source_dir=src, quiet=True)
    f = M.mnist_raw_dir() / "t10k-labels-idx1-ubyte.gz"
    f.write_bytes(f.read_bytes()[:-3] + b"xyz")
    with pytest.raises(ChecksumError, match="fetch.py mnist"):
        M.load_mnist_raw()
    # fetching again repairs it
    M.fetch_mnist(source_dir=src, quiet=True)
    assert f.read_bytes() == (src / f.name).read_bytes()


def test_fetch_refuses_a_bad_local_copy(fake_mnist):
    """A bad --from copy is refused with a message about that copy (never "delete it"), and is not copied."""
    src, _ = fake_mnist
    ours = M.mnist_raw_dir() / TRAIN_LABELS
    ours.parent.mkdir(parents=True)
    ours.write_bytes(b"our own corrupted copy")
    (src / TRAIN_LABELS).write_bytes(b"garbage")
    with pytest.raises(ChecksumError) as e:
        M.fetch_mnist(source_dir=src, quiet=True)
    msg = str(e.value)
    assert msg.startswith(f"{src / TRAIN_LABELS} is not the official file (md5 {hashlib.md5(b'garbage').hexdigest()}")
    assert f"The copy in {src} cannot be used" in msg and "delete" not in msg.lower()
    assert "--from" not in msg and "from Python, `fetch_mnist()`" in msg  # a caller of fetch_mnist gave source_dir
    assert ours.read_bytes() == b"our own corrupted copy"


def test_fetch_script_cli_error_exit(fake_mnist, tmp_path, capsys):
    fetch = _script("fetch")
    assert fetch.main(["mnist", "--from", str(tmp_path / "nope"), "--dest", str(tmp_path / "d")]) == 2
    assert capsys.readouterr().err.startswith("error: train-images-idx3-ubyte.gz not found")
    with pytest.raises(SystemExit) as e:  # an option error, from argparse
        fetch.main(["cifar100", "--dest", str(tmp_path / "d")])
    assert e.value.code == 2 and "error: --dest is for mnist" in capsys.readouterr().err


def test_fetch_mnist_downloads_from_the_mirrors(fake_mnist, tmp_path, monkeypatch):
    """The online path (torchvision's mirrors and download_url, md5-checked), against a local server: an unreachable
    mirror is skipped; a mirror serving a wrong file is refused and nothing is written."""
    from torchvision.datasets import MNIST

    src, _ = fake_mnist
    bad = tmp_path / "bad"
    bad.mkdir()
    for name in M.MNIST_FILES:
        (bad / name).write_bytes(b"not mnist")
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    with serve(tmp_path) as url:
        monkeypatch.setattr(MNIST, "mirrors", [url + "missing/", url + "src/"])
        dest = M.fetch_mnist(quiet=True)
        for name in M.MNIST_FILES:
            assert (dest / name).read_bytes() == (src / name).read_bytes()
        (dest / TRAIN_LABELS).unlink()
        monkeypatch.setattr(MNIST, "mirrors", [url + "bad/"])
        with pytest.raises(DataError, match=f"could not download {TRAIN_LABELS} .*--from DIR"):
            M.fetch_mnist(quiet=True)
    assert sorted(p.name for p in dest.iterdir()) == sorted(set(M.MNIST_FILES) - {TRAIN_LABELS})


def test_first_k_order():
    labels = np.array([3, 1, 3, 1, 1, 3, 2, 2, 3])  # class 1: 3 images, class 2: 2, class 3: 4
    np.testing.assert_array_equal(first_k_indices(labels, 2), [0, 1, 2, 3, 6, 7])
    np.testing.assert_array_equal(first_k_indices(labels, 1, offset=1), [2, 3, 7])
    # the largest valid K is the smallest class's count minus the offset, not the count of the first class that fails
    with pytest.raises(UsageError, match=r"K=4 .*class 2 has 2 training images.*choose K <= 2$"):
        first_k_indices(labels, 4)
    with pytest.raises(UsageError, match=r"choose K <= 1$"):
        first_k_indices(labels, 2, offset=1)
    with pytest.raises(UsageError, match="positive"):
        first_k_indices(labels, 0)


def test_true_K_limit_with_the_raw_files(raw_mnist):
    """MNIST's training file has 5421 images of class 5, the fewest of any class (LeCun et al.'s counts)."""
    for K, source in ((6000, "auto"), (5422, "raw")):
        with pytest.raises(UsageError, match=r"K=\d+ is more than the 5421 training images of the smallest .*choose K <= 5421$"):
            check_data("pmnist", K, source=source)
    check_data("pmnist", 5421)


def test_permutations_deterministic_distinct():
    p1, p2 = M.make_permutations(20, 7), M.make_permutations(20, 7)
    np.testing.assert_array_equal(p1, p2)
    np.testing.assert_array_equal(p1[0], np.arange(784))  # task 1 is plain MNIST
    assert len({tuple(p) for p in p1}) == 20
    assert all(sorted(p) == list(range(784)) for p in p1)
    assert not np.array_equal(M.make_permutations(20, 8)[1], p1[1])


def test_embedded_checksum_and_content():
    d = M.load_mnist_embedded()
    assert d["x_train"].shape == (6000, 28, 28) and d["x_train"].dtype == np.uint8
    assert d["x_test"].shape == (10000, 28, 28)
    assert np.bincount(d["y_train"]).tolist() == [600] * 10
    sha = hashlib.sha256(M.EMBEDDED_MNIST.read_bytes()).hexdigest()
    assert file_digest(M.EMBEDDED_MNIST, "sha256") == sha == M.EMBEDDED_MNIST_SHA256_FILE.read_text().split()[0]


def test_corrupted_embedded_is_refused(tmp_path):
    bad = tmp_path / "x.npz"
    bad.write_bytes(M.EMBEDDED_MNIST.read_bytes()[:-10])
    with pytest.raises(ChecksumError, match="build_embedded_mnist.py"):
        M.load_mnist_embedded(bad)


def test_embedded_builder_takes_first_k_and_is_deterministic(fake_mnist, monkeypatch):
    """The builder of the embedded subset on MNIST-format fixtures: the first 5 of each class in file order."""
    src, _ = fake_mnist
    B = _script("build_embedded_mnist")
    monkeypatch.setattr(B, "EMBEDDED_MNIST_PER_CLASS", 5)
    raw = M.load_mnist_raw(src)
    built = B.build_arrays(raw)
    y = raw["y_train"].tolist()
    want = sorted(i for c in range(10) for i in [j for j, v in enumerate(y) if v == c][:5])
    assert built["train_index"].tolist() == want
    np.testing.assert_array_equal(built["x_train"], raw["x_train"][want])
    np.testing.assert_array_equal(built["y_train"], raw["y_train"][want])
    np.testing.assert_array_equal(built["x_test"], raw["x_test"])
    data = B.npz_bytes(built)
    assert B.npz_bytes(B.build_arrays(M.load_mnist_raw(src))) == data
    with np.load(io.BytesIO(data)) as z:
        np.testing.assert_array_equal(z["x_train"], built["x_train"])
    assert B.main(["--check", "--raw", str(src)]) == 1  # differs from the committed subset


def test_embedded_subset_equals_rebuild_from_the_raw_files(raw_mnist):
    """The committed subset is, byte for byte, what the builder makes from the official files."""
    B = _script("build_embedded_mnist")
    assert B.npz_bytes(B.build_arrays(M.load_mnist_raw(raw_mnist))) == M.EMBEDDED_MNIST.read_bytes()


def test_permuted_mnist_stream():
    b = M.permuted_mnist(K=20, n_tasks=4, seed=3)
    assert b.n_tasks == 4 and not b.multi_head and len(b.train_stream[0]) == 200
    assert np.bincount(b.train_stream[2].y.numpy()).tolist() == [20] * 10
    assert len(b.test_stream[1]) == 10000
    x0, x1 = b.test_stream[0].inputs(), b.test_stream[1].inputs()
    perm = M.make_permutations(4, 3)[1]
    assert np.array_equal(x1.numpy(), x0.numpy()[:, perm])
    # the training images are the first K per class of the file, permuted
    emb = M.load_mnist_embedded()
    idx = first_k_indices(emb["y_train"], 20)
    np.testing.assert_allclose(b.train_stream[1].x.numpy(), emb["x_train"][idx].reshape(200, -1)[:, perm] / 255.0)


@pytest.mark.parametrize("K", [1, 5, 10, 20, 50, 200, 500])
def test_validation_split_is_disjoint_from_training(K, tmp_path, monkeypatch):
    """At every K the paper uses, split="val" trains on images 0..K-1 of each class and validates on images 500-599
    of each class (counted by hand in file order, not with first_k_indices): no image in both, none from the test
    set, and all from the embedded subset (no raw files are present here)."""
    monkeypatch.setenv("METACL_LITE_DATA", str(tmp_path))  # no raw MNIST files
    check_data("pmnist", K, split="val")
    b = M.permuted_mnist(K=K, n_tasks=1, split="val")
    assert b.info["source"] == "embedded" and b.info["split"] == "val"
    emb = M.load_mnist_embedded()
    seen = {c: 0 for c in range(10)}
    train, val = [], []
    for i, c in enumerate(emb["y_train"].tolist()):
        if seen[c] < K:
            train.append(i)
        elif 500 <= seen[c] < 600:
            val.append(i)
        seen[c] += 1
    assert len(train) == 10 * K and len(val) == 1000
    assert not set(emb["train_index"][train]) & set(emb["train_index"][val])  # positions in the original file
    flat = emb["x_train"].reshape(len(emb["x_train"]), -1) / 255.0
    np.testing.assert_array_equal(b.train_stream[0].inputs().numpy(), flat[train].astype(np.float32))
    np.testing.assert_array_equal(b.test_stream[0].inputs().numpy(), flat[val].astype(np.float32))
    np.testing.assert_array_equal(b.test_stream[0].y.numpy(), emb["y_train"][val])
    train_images = {r.tobytes() for r in emb["x_train"][train]}
    assert not any(r.tobytes() in train_images for r in emb["x_train"][val])  # not even a duplicate image


def test_validation_beyond_K_500_is_refused(raw_mnist):
    """The validation images start at image 500 of each class: K = 501 would train on one of them."""
    for attempt in (lambda: check_data("pmnist", 501, split="val"),
                    lambda: M.permuted_mnist(K=501, n_tasks=2, split="val"),
                    lambda: make_benchmark("pmnist", 501, split="val")):
        with pytest.raises(UsageError, match=r"^the validation images of Permuted MNIST start at image 500 of each "
                                             r"class; K=501 would overlap them: choose K <= 500$"):
            attempt()
    check_data("pmnist", 501)  # the test split is not limited by the validation images (raw files)


def test_the_specification_drives_the_loader(monkeypatch):
    """Tasks and validation images come from SPECS (changed here), not from numbers repeated in the loaders."""
    monkeypatch.setitem(SPECS, "pmnist", dataclasses.replace(SPECS["pmnist"], n_tasks=3, val_offset=30,
                                                             val_per_class=7))
    b = make_benchmark("pmnist", 4, split="val")
    assert b.n_tasks == 3 and len(b.train_stream) == 3
    emb = M.load_mnist_embedded()
    y = emb["y_train"].tolist()
    want = sorted(i for c in range(10) for i in [j for j, v in enumerate(y) if v == c][30:37])
    np.testing.assert_allclose(b.test_stream[0].x.numpy(), emb["x_train"][want].reshape(70, -1) / 255.0)
    with pytest.raises(UsageError, match="choose K <= 30"):
        make_benchmark("pmnist", 31, split="val")


def test_a_specification_is_handed_down_as_it_is():
    """make_benchmark and check_data take the specification itself (resolved once by a caller); the checks and the
    loader read that specification, not the one SPECS holds under its name."""
    spec = dataclasses.replace(SPECS["pmnist"], n_tasks=2, val_offset=30, val_per_class=7)
    assert get_spec(spec) is spec and get_spec("pmnist") is SPECS["pmnist"]
    check_data(spec, 4, split="val")
    b = make_benchmark(spec, 4, split="val")
    assert b.n_tasks == 2 and len(b.test_stream[0]) == 70
    for attempt in (lambda: check_data(spec, 31, split="val"), lambda: make_benchmark(spec, 31, split="val")):
        with pytest.raises(UsageError, match="choose K <= 30"):
            attempt()


def test_bad_requests_are_usage_errors():
    with pytest.raises(UsageError, match="K=601 needs 601 training images per class but the embedded subset holds "
                                         "600; use the raw files"):
        M.permuted_mnist(K=601, n_tasks=2, source="embedded")
    with pytest.raises(UsageError, match="positive"):
        M.permuted_mnist(K=0, n_tasks=2)
    with pytest.raises(UsageError, match="n_tasks=0"):
        M.permuted_mnist(K=5, n_tasks=0)
    with pytest.raises(UsageError, match="n_tasks=11"):
        split_cifar100(K=5, n_tasks=11)
    with pytest.raises(UsageError, match="unknown benchmark"):
        make_benchmark("svhn", 20)
    with pytest.raises(UsageError, match="split must be"):
        make_benchmark("pmnist", 20, split="train")
    for name in ("pmnist", "cifar100"):
        with pytest.raises(UsageError, match="unknown data source 'disk'"):
            check_data(name, 20, source="disk")
    for name in ("cifar100", "cub"):  # --data picks MNIST files only: not silently ignored elsewhere
        with pytest.raises(UsageError, match=f"--data raw picks the MNIST files; {name} has one source"):
            check_data(name, 5, source="raw")


def test_raw_files_asked_for_but_missing(tmp_path, monkeypatch):
    """--data raw without the raw files: the message says so and that the embedded subset would do; K > 600 without
    them: the message says why the raw files are needed."""
    monkeypatch.setenv("METACL_LITE_DATA", str(tmp_path))
    for attempt in (lambda: check_data("pmnist", 20, source="raw"), lambda: M.permuted_mnist(20, 2, source="raw")):
        with pytest.raises(MissingDataError) as e:
            attempt()
        msg = str(e.value)
        assert msg.startswith("the raw MNIST files were asked for (--data raw) but are missing")
        assert "`--data embedded` or `--data auto`" in msg and "fetch.py mnist" in msg and "more than" not in msg
    with pytest.raises(MissingDataError, match="^K=601 needs 601 training images per class, more than the "
                                                 "embedded subset's 600, so the raw MNIST files are needed"):
        check_data("pmnist", 601)


def test_check_data_agrees_with_the_loader(fake_mnist):
    """check_data raises what building the benchmark raises, without building it."""
    src, arrays = fake_mnist
    M.fetch_mnist(source_dir=src, quiet=True)
    k = int(np.bincount(arrays[TRAIN_LABELS], minlength=10).min())
    check_data("pmnist", k, source="raw")
    with pytest.raises(UsageError) as checked:
        check_data("pmnist", k + 1, source="raw")
    with pytest.raises(UsageError) as built:
        M.permuted_mnist(k + 1, 1, source="raw")
    assert str(checked.value) == str(built.value) and str(checked.value).endswith(f"choose K <= {k}")
    (M.mnist_raw_dir() / TRAIN_LABELS).write_bytes(b"corrupted")
    with pytest.raises(ChecksumError, match="fetch.py mnist"):
        check_data("pmnist", k, source="raw")
