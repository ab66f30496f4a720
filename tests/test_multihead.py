"""Split CIFAR-100 and Split CUB-200 on fixtures written in the official on-disk formats, loaded through the same
code paths as a user's real files (torchvision's CIFAR100 with its md5 checks; CUB's own split files)."""
import hashlib
import os
import pickle
import shutil
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest
from conftest import serve
import torch
from PIL import Image
from torchvision.datasets import CIFAR100

from metacl_lite.data import cifar100 as Ci
from metacl_lite.data import cub as Cu
from metacl_lite import models as Mo
from metacl_lite.data import streams as St
from metacl_lite.data.benchmarks import check_data, make_benchmark
from metacl_lite.cli import main
from metacl_lite.data.datafiles import ChecksumError, DataError, MissingDataError
from metacl_lite.errors import UsageError
from metacl_lite.data.specs import SPECS
from metacl_lite.training import METHODS, RegState, TrainConfig, evaluate, get_method, params_vector, train_experience

N_TR, N_TE = 6, 3  # images per class in the CIFAR fixture


def _md5(p):
    return hashlib.md5(p.read_bytes()).hexdigest()


@pytest.fixture
def cifar(tmp_path, monkeypatch):
    """A tiny cifar-100-python/ (train, test, meta pickles with the official keys and layout), and its archive."""
    rng = np.random.default_rng(0)
    src = tmp_path / "src" / "cifar-100-python"
    src.mkdir(parents=True)
    out = {}
    for split, n in (("train", N_TR), ("test", N_TE)):
        labels = np.repeat(np.arange(100), n)
        rng.shuffle(labels)  # file order is not class order, as in the real files
        data = rng.integers(0, 256, (len(labels), 3072), dtype=np.uint8)  # rows: 1024 R, 1024 G, 1024 B
        entry = {"filenames": [f"img_{i}.png" for i in range(len(labels))], "batch_label": f"{split} batch",
                 "fine_labels": labels.tolist(), "coarse_labels": (labels // 5).tolist(), "data": data}
        with open(src / split, "wb") as f:
            pickle.dump(entry, f, protocol=2)
        out[split] = (data, labels)
    with open(src / "meta", "wb") as f:
        pickle.dump({"fine_label_names": [f"class{i:02d}" for i in range(100)],
                     "coarse_label_names": [f"super{i}" for i in range(20)]}, f, protocol=2)
    arc = tmp_path / "cifar-100-python.tar.gz"
    with tarfile.open(arc, "w:gz") as t:
        t.add(src, arcname="cifar-100-python")
    monkeypatch.setattr(CIFAR100, "train_list", [["train", _md5(src / "train")]])
    monkeypatch.setattr(CIFAR100, "test_list", [["test", _md5(src / "test")]])
    monkeypatch.setattr(CIFAR100, "meta", {**CIFAR100.meta, "md5": _md5(src / "meta")})
    monkeypatch.setattr(CIFAR100, "tgz_md5", _md5(arc))
    monkeypatch.setenv("METACL_LITE_DATA", str(tmp_path / "root"))
    return arc, src.parent, out


def _tree(folder):
    """Every file under `folder`, with its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(Path(folder).rglob("*")) if p.is_file()}


def test_cifar_names_are_torchvision_s():
    assert Ci.CIFAR100_FOLDER == CIFAR100.base_folder
    assert sorted(Ci.CIFAR100_FILES) == sorted([f for f, _ in CIFAR100.train_list + CIFAR100.test_list]
                                              + [CIFAR100.meta["filename"]])


def test_cifar_missing_names_the_command(cifar, monkeypatch):
    with pytest.raises(MissingDataError, match="data_scripts/fetch.py cifar100"):
        Ci.split_cifar100(K=2, n_tasks=1)

    def heavy(*a, **k):
        raise AssertionError("the CIFAR-100 files were loaded before the data check")

    monkeypatch.setattr(Ci, "load_cifar100", heavy)
    for attempt in (lambda: check_data("cifar100", 20), lambda: make_benchmark("cifar100", 20)):
        with pytest.raises(MissingDataError, match=r"missing train, test, meta\. .*`python data_scripts/fetch.py "
                                                     r"cifar100`"):
            attempt()


def test_cifar_check_data_K_limit(cifar):
    Ci.fetch_cifar100(cifar[0], quiet=True)
    check_data("cifar100", 500)
    with pytest.raises(UsageError, match="choose K <= 500"):
        check_data("cifar100", 501)


def test_cifar_fetch_from_archive_and_split(cifar):
    arc, _, raw = cifar
    Ci.fetch_cifar100(arc, quiet=True)
    b = Ci.split_cifar100(K=2, n_tasks=3)
    assert b.multi_head and b.n_classes == 10 and len(b.train_stream) == 3
    assert b.info["tasks"][1] == [f"class{i:02d}" for i in range(10, 20)]
    data, labels = raw["train"]
    want = np.sort(np.concatenate([np.flatnonzero(labels == c)[:2] for c in range(10, 20)]))  # first 2, file order
    exp = b.train_stream[1]
    assert exp.task_id == 1 and exp.y.tolist() == [int(labels[i]) - 10 for i in want]
    img = data[want[0]].reshape(3, 32, 32) / 255.0
    ref = (img - np.array(Ci.CIFAR100_MEAN)[:, None, None]) / np.array(Ci.CIFAR100_STD)[:, None, None]
    np.testing.assert_allclose(exp.x[0].numpy(), ref, rtol=1e-5, atol=1e-5)
    te = b.test_stream[2]
    assert len(te) == 10 * N_TE and sorted(set(te.y.tolist())) == list(range(10))


def test_cifar_fetch_from_folder_replaces_a_broken_copy(cifar):
    arc, folder, _ = cifar
    Ci.fetch_cifar100(arc, quiet=True)
    target = Ci.cifar100_root() / Ci.CIFAR100_FOLDER
    (target / "test").unlink()
    (target / "stale").write_text("left over")
    Ci.fetch_cifar100(folder, quiet=True)
    assert _tree(target) == _tree(folder / Ci.CIFAR100_FOLDER)
    assert os.listdir(Ci.cifar100_root()) == [Ci.CIFAR100_FOLDER]  # the old copy and the temporary folder are gone
    assert len(Ci.load_cifar100()["y_test"]) == 100 * N_TE


def test_cifar_corrupted_file_is_refused(cifar):
    arc, _, _ = cifar
    Ci.fetch_cifar100(arc, quiet=True)
    f = Ci.cifar100_root() / "cifar-100-python" / "test"
    f.write_bytes(f.read_bytes()[:-5] + b"12345")
    with pytest.raises(ChecksumError, match="fetch.py cifar100"):
        Ci.load_cifar100()


def test_cifar_download(cifar, tmp_path, monkeypatch):
    """The online path (torchvision's download_url, md5-checked) against a local server; a download with the wrong
    md5 is refused and the data in place is kept."""
    arc, folder, _ = cifar
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / arc.name).write_bytes(arc.read_bytes()[:-20])
    root, target = Ci.cifar100_root(), Ci.cifar100_root() / Ci.CIFAR100_FOLDER
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    with serve(tmp_path) as url:
        monkeypatch.setattr(CIFAR100, "url", url + arc.name)
        Ci.fetch_cifar100(quiet=True)
        assert _tree(target) == _tree(folder / Ci.CIFAR100_FOLDER)
        assert (root / arc.name).read_bytes() == arc.read_bytes()  # kept, so that a retry does not download again
        (root / arc.name).unlink()
        monkeypatch.setattr(CIFAR100, "url", url + "bad/" + arc.name)
        with pytest.raises(DataError, match=f"could not download {url}bad/{arc.name} .*fetch.py cifar100"):
            Ci.fetch_cifar100(quiet=True)
    assert _tree(target) == _tree(folder / Ci.CIFAR100_FOLDER)


FAILURES = ["truncated archive", "another archive", "no such path", "folder without the dataset", "missing file",
            "corrupted file", "error mid-copy", "error mid-extract", "error while swapping"]


def _failing_fetch(kind, tmp_path, monkeypatch, arc, src, folder, target, missing, corrupted):
    """The source of a fetch that must fail as `kind` says (monkeypatching the failure where one is needed): an
    archive or folder in the official layout with one thing wrong. `missing`: a file to leave out; `corrupted`:
    (file, bytes to write into it, the error that gives). Returns (source, expected error)."""
    def copy(rel, new=None):  # the extracted folder with file `rel` removed (new=None) or rewritten
        dst = tmp_path / "copy"
        shutil.copytree(src / folder, dst / folder)
        (dst / folder / rel).unlink() if new is None else (dst / folder / rel).write_bytes(new)
        return dst

    if kind == "truncated archive":
        (tmp_path / "t").mkdir()
        (tmp_path / "t" / arc.name).write_bytes(arc.read_bytes()[:-20])
        return tmp_path / "t" / arc.name, ChecksumError
    if kind == "another archive":  # complete, but not the official one (md5)
        with tarfile.open(tmp_path / "other.tgz", "w:gz") as t:
            t.add(copy(*corrupted[:2]) / folder, arcname=folder)
        return tmp_path / "other.tgz", ChecksumError
    if kind == "no such path":
        return tmp_path / "nope", MissingDataError
    if kind == "folder without the dataset":
        (tmp_path / "empty").mkdir()
        return tmp_path / "empty", MissingDataError
    if kind == "missing file":
        return copy(missing), MissingDataError
    if kind == "corrupted file":
        return copy(*corrupted[:2]), corrupted[2]
    if kind == "error mid-copy":  # the first file is copied, the second meets a full disk
        copied, copyfile = [], shutil.copyfile

        def failing_copyfile(a, b, **kw):
            if copied:
                raise OSError(28, "No space left on device (injected failure)")
            copied.append(a)
            return copyfile(a, b, **kw)

        monkeypatch.setattr(shutil, "copyfile", failing_copyfile)
        return src, OSError
    if kind == "error mid-extract":
        def extractall(self, path, **kw):
            self.extract(self.getmembers()[1], path, filter="data")
            raise OSError(28, "No space left on device (injected failure)")

        monkeypatch.setattr(tarfile.TarFile, "extractall", extractall)
        return arc, OSError
    assert kind == "error while swapping"
    renamed_in, replace = [], os.replace

    def failing_replace(a, b):  # renaming the new copy in fails once
        if Path(b) == target and not renamed_in:
            renamed_in.append(a)
            raise OSError(18, "Invalid cross-device link (injected failure)")
        return replace(a, b)

    monkeypatch.setattr(os, "replace", failing_replace)
    return src, OSError


def _refused_and_kept(fetch, root, folder, source, error):
    """fetch(source) fails with exactly `error` (or the injected OSError) and leaves root/folder as it was, with no
    temporary folder left beside it."""
    before = _tree(root / folder)
    with pytest.raises(error) as e:
        fetch(source, quiet=True)
    assert e.type is error if issubclass(error, DataError) else "injected failure" in str(e.value)
    assert _tree(root / folder) == before
    assert os.listdir(root) == [folder]


@pytest.mark.parametrize("kind", FAILURES)
def test_cifar_failed_fetch_keeps_the_old_data(cifar, tmp_path, monkeypatch, kind):
    arc, src, _ = cifar
    Ci.fetch_cifar100(arc, quiet=True)
    target = Ci.cifar100_root() / Ci.CIFAR100_FOLDER
    source, error = _failing_fetch(kind, tmp_path, monkeypatch, arc, src, Ci.CIFAR100_FOLDER, target, "test",
                                   ("meta", b"changed", ChecksumError))
    _refused_and_kept(Ci.fetch_cifar100, Ci.cifar100_root(), Ci.CIFAR100_FOLDER, source, error)


def test_validation_indices_beyond_k():
    y = np.repeat(np.arange(3), 10)
    idx, from_train = St._eval_indices(y, y, [1, 2], "val", val_offset=5, val_n=2)
    assert from_train and idx.tolist() == [15, 16, 25, 26]
    spec = SPECS["cifar100"]
    with pytest.raises(UsageError, match=f"overlap them: choose K <= {spec.val_offset}"):
        Ci.split_cifar100(K=spec.val_offset + 1, split="val")  # refused before any data is needed


def test_head_routing():
    torch.manual_seed(0)
    net = Mo.cifar_cnn(10, 3).eval()
    x = torch.randn(4, 3, 32, 32)
    out1 = net(x, 1)
    with torch.no_grad():
        net.heads[2].weight.zero_()
        net.heads[2].bias.fill_(7.0)
    torch.testing.assert_close(net(x, 1), out1)  # task 1's head is untouched
    assert torch.all(net(x, 2) == 7.0)
    per_sample = net(x, torch.tensor([1, 2, 1, 2]))
    torch.testing.assert_close(per_sample[0], out1[0])
    assert torch.all(per_sample[1] == 7.0)


@pytest.mark.parametrize("name", list(METHODS))
def test_every_method_runs_on_cifar_fixture(cifar, name):
    Ci.fetch_cifar100(cifar[0], quiet=True)
    b = Ci.split_cifar100(K=3, n_tasks=2)
    model = Mo.build_model("cifar100", 10, 2, seed=0)
    reg, gen = RegState(), torch.Generator().manual_seed(0)
    cfg = TrainConfig(epochs=1, beta=1.0, gamma=0.1)
    for t in range(2):
        head_other = model.heads[1 - t].weight.detach().clone()
        before = params_vector(model)
        train_experience(model, b.train_stream[t], get_method(name), cfg, reg, gen)
        assert float((params_vector(model) - before).abs().max()) > 0
        if t == 0:  # training task 0 never touches task 1's head
            torch.testing.assert_close(model.heads[1].weight, head_other)
        assert 0 <= evaluate(model, b.test_stream[t]) <= 100


# ---------------------------------------------------------------------------------------------------------------- CUB
N_CLS = 40  # two tasks of 20 classes


@pytest.fixture
def cub(tmp_path, monkeypatch):
    """A tiny CUB_200_2011/ tree: images.txt, image_class_labels.txt, train_test_split.txt, classes.txt, JPEGs."""
    rng = np.random.default_rng(1)
    base = tmp_path / "src" / "CUB_200_2011"
    lines = {"images.txt": [], "image_class_labels.txt": [], "train_test_split.txt": [], "classes.txt": []}
    i = 0
    for c in range(1, N_CLS + 1):
        cname = f"{c:03d}.Bird_{c}"
        lines["classes.txt"].append(f"{c} {cname}")
        (base / "images" / cname).mkdir(parents=True)
        for k, is_train in enumerate([1, 0, 1, 1, 0]):  # train/test interleaved, as in the real split
            i += 1
            rel = f"{cname}/Bird_{c}_{k:04d}_{i}.jpg"
            Image.fromarray(rng.integers(0, 256, (30 + c % 7, 40, 3), dtype=np.uint8)).save(base / "images" / rel)
            lines["images.txt"].append(f"{i} {rel}")
            lines["image_class_labels.txt"].append(f"{i} {c}")
            lines["train_test_split.txt"].append(f"{i} {is_train}")
    for name, ls in lines.items():
        (base / name).write_text("\n".join(ls) + "\n")
    arc = tmp_path / "CUB_200_2011.tgz"
    with tarfile.open(arc, "w:gz") as t:
        t.add(base, arcname="CUB_200_2011")
    monkeypatch.setattr(Cu, "CUB_ARCHIVE", ("CUB_200_2011.tgz", _md5(arc)))
    monkeypatch.setenv("METACL_LITE_DATA", str(tmp_path / "root"))
    return arc


def test_cub_split_first_k_and_preprocessing(cub):
    with pytest.raises(MissingDataError, match="fetch.py cub"):
        Cu.split_cub(K=1, n_tasks=1)
    Cu.fetch_cub(cub, quiet=True)
    b = Cu.split_cub(K=2, n_tasks=2)
    assert b.n_classes == 20 and b.input_shape == (3, 224, 224)
    tr, te = b.train_stream[1], b.test_stream[1]
    assert len(tr) == 40 and len(te) == 40  # 20 classes x first 2 training images; all 2 test images per class
    assert tr.x.dtype == torch.uint8 and tr.x.shape[1:] == (3, 224, 224)
    # the first training image of class 21 (30x40): short side resized to 256 (-> 256x341), centre 224x224 crop
    with Image.open(Cu.cub_root() / "CUB_200_2011" / "images" / "021.Bird_21/Bird_21_0000_101.jpg") as im:
        want = np.asarray(im.convert("RGB").resize((341, 256), Image.BILINEAR).crop((58, 16, 282, 240)))
    np.testing.assert_array_equal(tr.x[0].numpy().transpose(1, 2, 0), want)
    imagenet_mean, imagenet_std = np.array([0.485, 0.456, 0.406]), np.array([0.229, 0.224, 0.225])
    np.testing.assert_allclose(tr.inputs().numpy(), (tr.x.numpy() / 255.0 - imagenet_mean[:, None, None])
                               / imagenet_std[:, None, None], rtol=1e-5, atol=1e-5)
    idx = Cu.read_cub_index()
    paths = idx["paths"][idx["is_train"]]
    assert paths[np.flatnonzero(idx["labels"][idx["is_train"]] == 20)[:2]].tolist() == \
        ["021.Bird_21/Bird_21_0000_101.jpg", "021.Bird_21/Bird_21_0002_103.jpg"]
    assert tr.y[:2].tolist() == [0, 0]
    assert isinstance(tr, Cu.NormalisedExperience) and isinstance(te, Cu.NormalisedExperience)
    missing = Cu.cub_root() / "CUB_200_2011" / "images" / paths[0]
    missing.unlink()  # an image the split files list but the folder lacks
    with pytest.raises(MissingDataError, match=r"Bird_1_0000_1\.jpg not found \(1 missing\).*fetch.py cub"):
        Cu.split_cub(K=2, n_tasks=1)


def test_cub_images_are_decoded_once_into_the_cache(cub, monkeypatch):
    """Issue 19 item 4: the first split decodes every image of images.txt once; later splits (other K, other tasks,
    the validation split) read the cache, with the same pixels as decoding each image anew."""
    from metacl_lite.data import imagecache as IC
    monkeypatch.setattr(IC, "_VERIFIED", set())
    Cu.fetch_cub(cub, quiet=True)
    calls = []
    decode = Cu.cub_preprocess
    monkeypatch.setattr(Cu, "cub_preprocess", lambda p: calls.append(p) or decode(p))
    a = Cu.split_cub(K=2, n_tasks=2)
    assert len(calls) == N_CLS * 5  # every image once
    import dataclasses
    b = Cu.split_cub(K=1, n_tasks=1, split="val", spec=dataclasses.replace(Cu.SPECS["cub"], val_offset=1,
                                                                          val_per_class=1))
    c = Cu.split_cub(K=3, n_tasks=2)
    assert len(calls) == N_CLS * 5
    base = Cu.cub_root() / Cu.CUB_FOLDER / "images"
    idx = Cu.read_cub_index()
    test_paths = idx["paths"][~idx["is_train"]]
    first_test = test_paths[np.flatnonzero(idx["labels"][~idx["is_train"]] == 20)[0]]
    np.testing.assert_array_equal(a.test_stream[1].x[0].numpy(), decode(base / first_test).numpy())
    torch.testing.assert_close(c.test_stream[1].x, a.test_stream[1].x, rtol=0, atol=0)
    assert len(b.test_stream[0]) == 20 and len(list(IC.cache_folder("cub").glob("*.npy"))) == 1


def test_cub_check_data_K_limit(cub):
    Cu.fetch_cub(cub, quiet=True)
    check_data("cub", 3)  # every fixture class has 3 training images
    with pytest.raises(UsageError, match=r"class 0 has 3 training images.*choose K <= 3$"):
        check_data("cub", 4)


def test_cub_fetch_replaces_a_broken_copy(cub):
    Cu.fetch_cub(cub, quiet=True)
    target = Cu.cub_root() / Cu.CUB_FOLDER
    (target / "images.txt").unlink()
    (target / "stale").write_text("left over")
    Cu.fetch_cub(cub.parent / "src", quiet=True)
    assert _tree(target) == _tree(cub.parent / "src" / Cu.CUB_FOLDER)
    assert os.listdir(Cu.cub_root()) == [Cu.CUB_FOLDER]


@pytest.mark.parametrize("kind", FAILURES)
def test_cub_failed_fetch_keeps_the_old_data(cub, tmp_path, monkeypatch, kind):
    Cu.fetch_cub(cub, quiet=True)
    source, error = _failing_fetch(kind, tmp_path, monkeypatch, cub, cub.parent / "src", Cu.CUB_FOLDER,
                                   Cu.cub_root() / Cu.CUB_FOLDER, "images/001.Bird_1/Bird_1_0000_1.jpg",
                                   ("train_test_split.txt", b"1 1\n2\n", DataError))
    _refused_and_kept(Cu.fetch_cub, Cu.cub_root(), Cu.CUB_FOLDER, source, error)


def test_fetch_script_exits_2_on_a_bad_source(cub, tmp_path, capsys):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "data_scripts"))
    import fetch

    (tmp_path / "empty").mkdir()
    assert fetch.main(["cub", "--from", str(tmp_path / "empty")]) == 2
    assert capsys.readouterr().err.startswith(f"error: {tmp_path / 'empty'} holds neither CUB_200_2011/ nor "
                                              f"CUB_200_2011.tgz")


def test_resnet_weights_paths(tmp_path, monkeypatch):
    monkeypatch.setattr(torch.hub, "get_dir", lambda: str(tmp_path / "hub"))
    monkeypatch.delenv("METACL_LITE_RESNET18", raising=False)
    with pytest.raises(Mo.WeightsError, match="--random-init"):
        Mo.find_resnet18_weights()
    from torchvision.models import resnet18
    f = tmp_path / "w.pth"
    torch.manual_seed(3)
    torch.save(resnet18(weights=None).state_dict(), f)
    with pytest.raises(Mo.WeightsError, match="is not torchvision's"):
        Mo.find_resnet18_weights(f)
    digest = hashlib.sha256(f.read_bytes()).hexdigest()
    monkeypatch.setattr(Mo, "RESNET18_SHA256", digest[:8] + "0" * 56)  # the name's prefix alone is not enough
    with pytest.raises(Mo.WeightsError, match="is not torchvision's"):
        Mo.find_resnet18_weights(f)
    monkeypatch.setattr(Mo, "RESNET18_SHA256", digest)
    net = Mo.resnet18_multihead(20, 2, weights=f)
    torch.testing.assert_close(net.body.conv1.weight, torch.load(f)["conv1.weight"])


@pytest.mark.slow
def test_cub_cli_needs_weights_or_explicit_random_init(cub, tmp_path, monkeypatch, capsys):
    Cu.fetch_cub(cub, quiet=True)
    monkeypatch.setattr(torch.hub, "get_dir", lambda: str(tmp_path / "hub"))
    out = tmp_path / "cub.json"
    base = ["run", "--benchmark", "cub", "--K", "1", "--n-tasks", "2", "--epochs", "1", "--seeds", "1",
            "--methods", "finetune", "--out", str(out), "--no-progress"]  # (test_methods_run_on_cub_fixture: the rest)
    assert main(base) == 2
    assert "weights not found" in capsys.readouterr().err and not out.exists()
    assert main(base + ["--random-init"]) == 0
    import json
    res = json.loads(out.read_text())
    assert res["config"]["model"] == {"weights": None, "random_init": True}
    assert set(res["runs"]) == {"finetune/0"} and len(res["references"]["0"]["acc"]) == 2


@pytest.mark.slow
@pytest.mark.parametrize("name", ["finetune", "metacl", "ewc-metacl-lambda", "mas", "pi-metacl-beta"])
def test_methods_run_on_cub_fixture(cub, name):
    Cu.fetch_cub(cub, quiet=True)
    b = Cu.split_cub(K=1, n_tasks=2)
    model = Mo.build_model("cub", 20, 2, seed=0, random_init=True)
    reg, gen = RegState(), torch.Generator().manual_seed(0)
    for t in range(2):
        before = params_vector(model)
        train_experience(model, b.train_stream[t], get_method(name), TrainConfig(epochs=1, beta=1.0), reg, gen)
        assert float((params_vector(model) - before).abs().max()) > 0
    assert 0 <= evaluate(model, b.test_stream[1]) <= 100
