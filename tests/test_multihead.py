"""Split CIFAR-100 and Split CUB-200 on fixtures written in the official on-disk formats, loaded through the same
code paths as a user's real files (torchvision's CIFAR100 with its md5 checks; CUB's own split files)."""
import hashlib
import pickle
import tarfile

import numpy as np
import pytest
import torch
from PIL import Image
from torchvision.datasets import CIFAR100

from metacl_lite import data as D
from metacl_lite import models as Mo
from metacl_lite.cli import main
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
    monkeypatch.setattr(D, "CIFAR100_ARCHIVE", ("cifar-100-python.tar.gz", _md5(arc)))
    monkeypatch.setenv("METACL_LITE_DATA", str(tmp_path / "root"))
    return arc, src.parent, out


def test_cifar_missing_names_the_command(cifar):
    with pytest.raises(D.MissingDataError, match="data_scripts/fetch.py cifar100"):
        D.split_cifar100(K=2, n_tasks=1)


def test_cifar_fetch_from_archive_and_split(cifar):
    arc, _, raw = cifar
    D.fetch_cifar100(arc, quiet=True)
    b = D.split_cifar100(K=2, n_tasks=3)
    assert b.multi_head and b.n_classes == 10 and len(b.train_stream) == 3
    assert b.info["tasks"][1] == [f"class{i:02d}" for i in range(10, 20)]
    data, labels = raw["train"]
    want = np.sort(np.concatenate([np.flatnonzero(labels == c)[:2] for c in range(10, 20)]))  # first 2, file order
    exp = b.train_stream[1]
    assert exp.task_id == 1 and exp.y.tolist() == [int(labels[i]) - 10 for i in want]
    img = data[want[0]].reshape(3, 32, 32) / 255.0
    ref = (img - np.array(D.CIFAR100_MEAN)[:, None, None]) / np.array(D.CIFAR100_STD)[:, None, None]
    np.testing.assert_allclose(exp.x[0].numpy(), ref, rtol=1e-5, atol=1e-5)
    te = b.test_stream[2]
    assert len(te) == 10 * N_TE and sorted(set(te.y.tolist())) == list(range(10))


def test_cifar_fetch_from_folder_and_bad_archive(cifar, tmp_path):
    arc, folder, _ = cifar
    D.fetch_cifar100(folder, quiet=True)
    assert len(D.load_cifar100()["y_test"]) == 100 * N_TE
    bad = tmp_path / "bad.tar.gz"
    bad.write_bytes(arc.read_bytes()[:-20])
    with pytest.raises(D.ChecksumError):
        D.fetch_cifar100(bad, quiet=True)


def test_cifar_corrupted_file_is_refused(cifar):
    arc, _, _ = cifar
    D.fetch_cifar100(arc, quiet=True)
    f = D.cifar100_root() / "cifar-100-python" / "test"
    f.write_bytes(f.read_bytes()[:-5] + b"12345")
    with pytest.raises(D.ChecksumError, match="fetch.py cifar100"):
        D.load_cifar100()


def test_validation_indices_beyond_k():
    y = np.repeat(np.arange(3), 10)
    idx, from_train = D._eval_indices(y, y, [1, 2], K=3, split="val", val_offset=5, val_n=2)
    assert from_train and idx.tolist() == [15, 16, 25, 26]
    with pytest.raises(ValueError, match="overlap"):
        D._eval_indices(y, y, [1], K=6, split="val", val_offset=5, val_n=2)


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
    D.fetch_cifar100(cifar[0], quiet=True)
    b = D.split_cifar100(K=3, n_tasks=2)
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
    monkeypatch.setattr(D, "CUB_ARCHIVE", ("CUB_200_2011.tgz", _md5(arc)))
    monkeypatch.setenv("METACL_LITE_DATA", str(tmp_path / "root"))
    return arc


def test_cub_split_first_k_and_preprocessing(cub):
    with pytest.raises(D.MissingDataError, match="fetch.py cub"):
        D.split_cub(K=1, n_tasks=1)
    D.fetch_cub(cub, quiet=True)
    b = D.split_cub(K=2, n_tasks=2)
    assert b.n_classes == 20 and b.input_shape == (3, 224, 224)
    tr, te = b.train_stream[1], b.test_stream[1]
    assert len(tr) == 40 and len(te) == 40  # 20 classes x first 2 training images; all 2 test images per class
    assert tr.x.dtype == torch.uint8 and tr.x.shape[1:] == (3, 224, 224)
    assert tr.inputs().dtype == torch.float32 and abs(float(tr.inputs().mean())) < 3
    idx = D.read_cub_index()
    paths = idx["paths"][idx["is_train"]]
    assert paths[np.flatnonzero(idx["labels"][idx["is_train"]] == 20)[:2]].tolist() == \
        ["021.Bird_21/Bird_21_0000_101.jpg", "021.Bird_21/Bird_21_0002_103.jpg"]
    assert tr.y[:2].tolist() == [0, 0]
    assert isinstance(tr, D.NormalisedExperience) and isinstance(te, D.NormalisedExperience)
    missing = D.cub_root() / "CUB_200_2011" / "images" / paths[0]
    missing.unlink()  # an image the split files list but the folder lacks
    with pytest.raises(D.MissingDataError, match=r"Bird_1_0000_1\.jpg not found \(1 missing\).*fetch.py cub"):
        D.split_cub(K=2, n_tasks=1)


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
    monkeypatch.setattr(Mo, "RESNET18_SHA256_PREFIX", hashlib.sha256(f.read_bytes()).hexdigest()[:8])
    net = Mo.resnet18_multihead(20, 2, weights=f)
    torch.testing.assert_close(net.body.conv1.weight, torch.load(f)["conv1.weight"])


def test_cub_cli_needs_weights_or_explicit_random_init(cub, tmp_path, monkeypatch, capsys):
    D.fetch_cub(cub, quiet=True)
    monkeypatch.setattr(torch.hub, "get_dir", lambda: str(tmp_path / "hub"))
    out = tmp_path / "cub.json"
    base = ["run", "--benchmark", "cub", "--K", "1", "--n-tasks", "2", "--epochs", "1", "--seeds", "1",
            "--methods", "finetune,metacl", "--out", str(out), "--no-progress"]
    assert main(base) == 2
    assert "weights not found" in capsys.readouterr().err and not out.exists()
    assert main(base + ["--random-init"]) == 0
    import json
    res = json.loads(out.read_text())
    assert res["config"]["model"] == {"weights": None, "random_init": True}
    assert set(res["runs"]) == {"finetune/0", "metacl/0"} and len(res["references"]["0"]["acc"]) == 2


@pytest.mark.parametrize("name", ["finetune", "metacl", "ewc-metacl-lambda", "mas", "pi-metacl-beta"])
def test_methods_run_on_cub_fixture(cub, name):
    D.fetch_cub(cub, quiet=True)
    b = D.split_cub(K=1, n_tasks=2)
    model = Mo.build_model("cub", 20, 2, seed=0, random_init=True)
    reg, gen = RegState(), torch.Generator().manual_seed(0)
    for t in range(2):
        before = params_vector(model)
        train_experience(model, b.train_stream[t], get_method(name), TrainConfig(epochs=1, beta=1.0), reg, gen)
        assert float((params_vector(model) - before).abs().max()) > 0
    assert 0 <= evaluate(model, b.test_stream[1]) <= 100
