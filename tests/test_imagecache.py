"""The decode-once image cache (issue 19, item 4): same pixels as decoding each time, decoded once, checked against
its sha256, rebuilt when corrupt or when the images change, never left half-written."""
import json

import numpy as np
import pytest
import torch
from PIL import Image

from metacl_lite.data import imagecache as IC


def decode(path):
    with Image.open(path) as im:
        return torch.from_numpy(np.asarray(im.convert("RGB").resize((8, 6)), dtype=np.uint8).transpose(2, 0, 1).copy())


@pytest.fixture
def images(tmp_path, monkeypatch):
    monkeypatch.setenv("METACL_LITE_DATA", str(tmp_path / "root"))
    monkeypatch.setattr(IC, "_VERIFIED", set())
    base = tmp_path / "images"
    base.mkdir()
    rng = np.random.default_rng(0)
    paths = []
    for i in range(7):
        p = f"img_{i}.png"
        Image.fromarray(rng.integers(0, 256, (10 + i, 12, 3), dtype=np.uint8)).save(base / p)
        paths.append(p)
    return base, paths


class Counting:
    def __init__(self):
        self.n = 0

    def __call__(self, path):
        self.n += 1
        return decode(path)


def test_the_cache_holds_exactly_the_decoded_images_and_decodes_once(images):
    base, paths = images
    count = Counting()
    arr = IC.cached_images("toy", base, paths, count, "toy-v1", progress=False)
    assert count.n == 7 and arr.shape == (7, 3, 6, 8) and arr.dtype == np.uint8
    for i, p in enumerate(paths):
        np.testing.assert_array_equal(arr[i], decode(base / p).numpy())
    np.testing.assert_array_equal(IC.select(arr, [5, 0, 5]).numpy(), np.stack([arr[5], arr[0], arr[5]]))
    IC._VERIFIED.clear()  # a new process: checks the sha256, decodes nothing
    IC.cached_images("toy", base, paths, count, "toy-v1", progress=False)
    assert count.n == 7
    manifest = json.loads(next(IC.cache_folder("toy").glob("*.json")).read_text())
    assert manifest["n_images"] == 7 and manifest["shape"] == [7, 3, 6, 8] and manifest["preprocess"] == "toy-v1"


def test_a_corrupt_cache_is_rebuilt_and_says_so(images, capsys):
    base, paths = images
    arr = IC.cached_images("toy", base, paths, decode, "toy-v1", progress=False)
    want = np.array(arr)
    del arr
    npy = next(IC.cache_folder("toy").glob("*.npy"))
    raw = bytearray(npy.read_bytes())
    raw[-1] ^= 0xFF
    npy.write_bytes(bytes(raw))
    IC._VERIFIED.clear()
    count = Counting()
    got = IC.cached_images("toy", base, paths, count, "toy-v1", progress=False)
    assert count.n == 7 and "does not match the sha256" in capsys.readouterr().err
    np.testing.assert_array_equal(got, want)


def test_changed_images_or_preprocessing_make_a_new_cache(images):
    base, paths = images
    IC.cached_images("toy", base, paths, decode, "toy-v1", progress=False)
    Image.fromarray(np.zeros((10, 12, 3), dtype=np.uint8)).save(base / paths[0])  # the dataset changes
    count = Counting()
    arr = IC.cached_images("toy", base, paths, count, "toy-v1", progress=False)
    assert count.n == 7 and not arr[0].any()
    IC.cached_images("toy", base, paths, count, "toy-v2", progress=False)
    assert count.n == 14 and len(list(IC.cache_folder("toy").glob("*.npy"))) == 3


def test_an_interrupted_build_leaves_nothing_behind(images):
    base, paths = images

    def failing(path):
        if path.name == paths[4]:
            raise KeyboardInterrupt
        return decode(path)

    with pytest.raises(KeyboardInterrupt):
        IC.cached_images("toy", base, paths, failing, "toy-v1", progress=False)
    assert [p.name for p in IC.cache_folder("toy").iterdir()] == [".lock"]
    count = Counting()
    IC.cached_images("toy", base, paths, count, "toy-v1", progress=False)
    assert count.n == 7


def test_workers_starting_together_decode_the_images_once(images):
    """Two processes asking for the same cache at once: one builds it, the other waits and reads it."""
    import multiprocessing as mp
    base, paths = images
    ctx = mp.get_context("spawn")
    with ctx.Manager() as manager:
        barrier = manager.Barrier(2)
        with ctx.Pool(2) as pool:
            counts = pool.starmap(_build_and_count, [(str(base), paths, barrier)] * 2)
    assert sorted(counts) == [0, 7]


def _build_and_count(base, paths, barrier):
    import time
    from pathlib import Path
    count = Counting()

    def slow(path):
        time.sleep(0.2)
        return count(path)

    barrier.wait()  # both processes are up (torch imported) before either asks for the cache

    IC.cached_images("toy", Path(base), paths, slow, "toy-v1", progress=False)
    return count.n


def test_the_cache_files_get_a_new_files_permissions_not_0600(images):
    """Under umask 022 the array and its manifest are 0644 like any new file (mkstemp's 0600 made a cache that one
    user built unreadable to the others sharing the data folder)."""
    import os

    base, paths = images
    old = os.umask(0o022)
    try:
        IC.cached_images("toy", base, paths, decode, "toy-v1", progress=False)
    finally:
        os.umask(old)
    files = sorted(IC.cache_folder("toy").glob("toy-toy-v1-*"))
    assert [p.suffix for p in files] == [".json", ".npy"]
    assert [oct(p.stat().st_mode & 0o777) for p in files] == ["0o644", "0o644"]


def test_a_manifest_that_is_not_an_object_is_rebuilt(images, capsys):
    base, paths = images
    want = np.array(IC.cached_images("toy", base, paths, decode, "toy-v1", progress=False))
    manifest = next(IC.cache_folder("toy").glob("*.json"))
    manifest.write_text("[1, 2]")
    IC._VERIFIED.clear()
    np.testing.assert_array_equal(IC.cached_images("toy", base, paths, decode, "toy-v1", progress=False), want)
    assert "its manifest is list JSON, not an object; rebuilding it" in capsys.readouterr().err


def test_a_cache_folder_that_cannot_be_written_is_one_clear_error(images, monkeypatch):
    """A read-only folder (simulated: the tests may run as root): a complete cache is read as it is; without one,
    a DataError naming the folder and the fix, and nothing left behind."""
    from metacl_lite.data.datafiles import DataError

    base, paths = images
    want = np.array(IC.cached_images("toy", base, paths, decode, "toy-v1", progress=False))
    real_open = open

    def read_only(file, mode="r", *a, **k):
        if str(file).endswith(".lock"):
            raise PermissionError(13, "Permission denied", str(file))
        return real_open(file, mode, *a, **k)

    monkeypatch.setattr("builtins.open", read_only)
    np.testing.assert_array_equal(IC.cached_images("toy", base, paths, decode, "toy-v1", progress=False), want)
    with pytest.raises(DataError, match=r"cannot write the image cache in .*toy \(Permission denied\); make it "
                                        r"writable, or set METACL_LITE_DATA"):
        IC.cached_images("toy", base, paths[:3], decode, "toy-v1", progress=False)
    monkeypatch.setattr("builtins.open", real_open)

    def full(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(np.lib.format, "open_memmap", full)
    with pytest.raises(DataError, match=r"\(the disk is full\): No space left on device; free some space, or set "
                                        r"METACL_LITE_DATA to a folder on another disk"):
        IC.cached_images("toy", base, paths[:4], decode, "toy-v1", progress=False)
    assert not [p for p in IC.cache_folder("toy").iterdir() if p.name.endswith(".part")]
