"""The narrow channel between the trusted grader and a jailed submission: plain data only.

A value crosses as JSON: numbers, strings, booleans, None, lists, and tagged objects for what JSON lacks (tuples,
dicts with any plain keys, paths, numpy arrays and torch tensors written with `numpy.save` and read back with
`allow_pickle=False`, an `mlp` network as its layer sizes, activation and weights, a pandas DataFrame as columns and
rows). Nothing else crosses: no pickle, no object of the sender. What the grader decodes is always a fresh
built-in, ndarray, tensor, network or frame built by the grader's own code, so a result cannot be an object that
compares equal to anything, and nothing of the grader is reachable from the student's side. A path to a file
crosses as the file (its name and bytes) where the sender lets it go, else as a name; the grader never opens a file by
a name the submission sent (`decode`'s `nowhere`).
"""
from __future__ import annotations

import base64
import io
import json
import sys
from pathlib import Path, PurePath
from typing import Callable, Optional

#: the largest message either side reads (bytes): a line longer than this ends the conversation
MAX_MESSAGE = 128 * 2 ** 20
MAX_DEPTH = 40
#: the most lists, objects and items one message may hold (counted on its bytes before it is parsed: a flood of
#: small lists costs ~100 bytes of memory for each of its 3 bytes)
MAX_ITEMS = 1_000_000
#: the most parameters a network that crosses may have (its sizes are checked before it is built)
MAX_PARAMS = 20_000_000
#: the most bytes of files one submission may land in the grader's private folder, all replies together
MAX_LANDED = 256 * 2 ** 20


class ChannelError(ValueError):
    """A value that cannot cross the channel, or a message that is not plain data."""


def _npy(arr) -> str:
    import numpy as np

    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(arr), allow_pickle=False)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _from_npy(text: str):
    import numpy as np

    if not isinstance(text, str):
        raise ChannelError("an array that is not base64 text")
    arr = np.load(io.BytesIO(base64.b64decode(text.encode("ascii"), validate=True)), allow_pickle=False)
    if arr.dtype.kind not in "biufc":
        raise ChannelError(f"an array of dtype {arr.dtype} (numbers only)")
    return np.array(arr, copy=True)


def _module_spec(m) -> dict:
    """An `mlp` network (metacl_lite.models.MultiHeadNet of Linear layers and one activation) as plain data."""
    from torch import nn

    from ..models import ACTIVATIONS, MultiHeadNet

    if type(m) is not MultiHeadNet:
        raise ChannelError(f"a {type(m).__name__} network cannot cross (only metacl_lite.models.mlp networks)")
    layers = [layer for layer in m.body if isinstance(layer, nn.Linear)]
    acts = {type(layer) for layer in m.body if not isinstance(layer, nn.Linear)}
    names = [k for k, v in ACTIVATIONS.items() if {v} == acts] or ["relu"]
    in_dim = layers[0].in_features if layers else m.heads[0].in_features
    return {"in_dim": in_dim, "hidden": [layer.out_features for layer in layers],
            "n_classes": m.heads[0].out_features, "n_heads": len(m.heads), "activation": names[0],
            "state": {k: _npy(v.detach().cpu().numpy()) for k, v in m.state_dict().items()}}


def module_from_spec(spec: dict):
    import torch

    from ..models import mlp

    if not isinstance(spec, dict) or not isinstance(spec.get("state"), dict):
        raise ChannelError("a network without weights")
    hidden = spec.get("hidden")
    if not (isinstance(hidden, list) and len(hidden) <= 64 and all(type(h) is int and 0 < h <= 65536 for h in hidden)):
        raise ChannelError("a network's hidden sizes must be at most 64 positive integers")
    for k in ("in_dim", "n_classes", "n_heads"):
        if type(spec.get(k)) is not int or not 0 < spec[k] <= 65536:
            raise ChannelError(f"a network's {k} must be a positive integer")
    sizes = [spec["in_dim"], *hidden]
    params = sum((a + 1) * b for a, b in zip(sizes, sizes[1:])) + spec["n_heads"] * (sizes[-1] + 1) * spec["n_classes"]
    if params > MAX_PARAMS:
        raise ChannelError(f"a network of {params} parameters (at most {MAX_PARAMS} cross)")
    if len(spec["state"]) > 2 * (len(hidden) + spec["n_heads"]):
        raise ChannelError("a network with more weights than layers")
    net = mlp(in_dim=spec["in_dim"], hidden=tuple(hidden), n_classes=spec["n_classes"], n_heads=spec["n_heads"],
              activation=str(spec.get("activation")))
    state = {str(k): torch.from_numpy(_from_npy(v)) for k, v in spec["state"].items()}
    if state and next(iter(state.values())).dtype == torch.float64:
        net = net.double()
    net.load_state_dict(state)
    return net


#: the largest file the grader ships to the jail as an argument
MAX_FILE = 64 * 2 ** 20


def encode(v, depth: int = 0, ship: Optional[Callable[[Path], bool]] = None):
    """`v` as JSON-able plain data (tagged where JSON has no type); anything else raises ChannelError. A path to a
    file that `ship` lets go crosses as its name and bytes and arrives as a path to a copy in the receiver's landing
    folder: the jail ships the files it sees (its own), the grader only files it made itself, so neither side ever
    opens a file by the other's word. Any other path crosses as a name only."""
    if ship is not None and isinstance(v, PurePath) and Path(v).is_file() and ship(Path(v)):
        if Path(v).stat().st_size > MAX_FILE:
            raise ChannelError(f"the file {Path(v).name} is over {MAX_FILE // 2 ** 20} MiB")
        return {"file": [Path(v).name, base64.b64encode(Path(v).read_bytes()).decode("ascii")]}
    if depth > MAX_DEPTH:
        raise ChannelError("a value nested too deeply")
    if v is None or isinstance(v, (bool, str)):
        return v if type(v) in (bool, str, type(None)) else (bool(v) if isinstance(v, bool) else str(v))
    if isinstance(v, int):
        return int(v)
    if isinstance(v, float):
        return float(v)
    import numpy as np

    if isinstance(v, np.generic):
        if v.dtype.kind == "b":
            return bool(v)
        if v.dtype.kind in "iu":
            return int(v)
        if v.dtype.kind == "f":
            return float(v)
    if isinstance(v, np.ndarray):
        return {"ndarray": _npy(v)}
    if isinstance(v, PurePath):
        return {"path": str(v)}
    if isinstance(v, tuple):
        return {"tuple": [encode(x, depth + 1, ship) for x in v]}
    if isinstance(v, list):
        return [encode(x, depth + 1, ship) for x in v]
    if isinstance(v, dict):
        return {"dict": [[encode(k, depth + 1, ship), encode(x, depth + 1, ship)] for k, x in v.items()]}
    mod = type(v).__module__.split(".")[0]
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(v, torch.Tensor):  # subclasses too: only the values cross
        t = v.detach().cpu().as_subclass(torch.Tensor)
        if t.dtype in (torch.bfloat16, torch.float16):
            t = t.float()
        return {"tensor": _npy(t.numpy())}
    if torch is not None and isinstance(v, torch.nn.Module):
        return {"mlp": _module_spec(v)}
    if mod == "pandas" and type(v).__name__ == "DataFrame":
        return {"frame": {"columns": [encode(c, depth + 1) for c in v.columns],
                          "rows": [[encode(x, depth + 1) for x in r] for r in v.itertuples(index=False, name=None)]}}
    raise ChannelError(f"a {type(v).__name__} cannot cross to the grader (numbers, strings, lists, tuples, dicts, "
                       "paths, arrays, tensors, mlp networks and DataFrames can)")


def decode(d, depth: int = 0, landing: Optional[Path] = None, nowhere: Optional[Path] = None):
    """The value that `encode` described, built afresh from plain data. Shipped files are written under `landing`
    (refused without one). With `nowhere` (the grader's side), a path that crossed as a name only names a file under
    that empty folder: the grader reads nothing of its own machine by a name the submission chose."""
    if depth > MAX_DEPTH:
        raise ChannelError("a value nested too deeply")
    t = type(d)
    if d is None or t in (bool, int, float, str):
        return d
    if t is list:
        return [decode(x, depth + 1, landing, nowhere) for x in d]
    if t is not dict or len(d) != 1:
        raise ChannelError("a message that is not plain data")
    (tag, body), = d.items()
    if tag == "tuple" and type(body) is list:
        return tuple(decode(x, depth + 1, landing, nowhere) for x in body)
    if tag == "dict" and type(body) is list:
        out = {}
        for pair in body:
            if type(pair) is not list or len(pair) != 2:
                raise ChannelError("a dict entry that is not a pair")
            k = decode(pair[0], depth + 1, landing, nowhere)
            if type(k) not in (bool, int, float, str, type(None), tuple):
                raise ChannelError("a dict key that is not a number, string or tuple")
            out[k] = decode(pair[1], depth + 1, landing, nowhere)
        return out
    if tag == "file" and landing is not None and type(body) is list and len(body) == 2:
        import tempfile

        name = Path(str(body[0])).name[:200] or "file"
        data = base64.b64decode(str(body[1]).encode("ascii"), validate=True)
        landing.mkdir(exist_ok=True)
        if len(data) > MAX_FILE or landed(landing) + len(data) > MAX_LANDED:
            raise ChannelError(f"files over {MAX_LANDED // 2 ** 20} MiB in all, or one over "
                               f"{MAX_FILE // 2 ** 20} MiB, cannot cross")
        where = Path(tempfile.mkdtemp(dir=landing)) / name
        where.write_bytes(data)
        _LANDED[Path(landing).resolve()] = landed(landing) + len(data)
        return where
    if tag == "path" and type(body) is str:
        if nowhere is None:
            return Path(body)
        return nowhere.joinpath(*[p for p in PurePath(body).parts if p not in ("/", "..", ".")])
    if tag == "ndarray":
        return _from_npy(body)
    if tag == "tensor":
        import torch

        return torch.from_numpy(_from_npy(body))
    if tag == "mlp":
        return module_from_spec(body)
    if tag == "frame" and type(body) is dict:
        import pandas as pd

        cols = decode(body.get("columns"), depth + 1)
        rows = decode(body.get("rows"), depth + 1)
        if type(cols) is not list or type(rows) is not list or any(type(r) is not list for r in rows):
            raise ChannelError("a DataFrame that is not columns and rows")
        return pd.DataFrame(rows, columns=cols)
    raise ChannelError(f"an unknown tag {tag!r}")


#: the bytes this process has landed in each landing folder (counted as they land: no walk of the folder per file)
_LANDED: dict[Path, int] = {}


def landed(landing: Path) -> int:
    """The bytes of the files this process has landed in `landing` so far."""
    return _LANDED.get(Path(landing).resolve(), 0)


def dumps(message: dict) -> bytes:
    return json.dumps(message, allow_nan=True).encode() + b"\n"


def loads(line: bytes) -> dict:
    if len(line) >= MAX_MESSAGE:
        raise ChannelError(f"a message over {MAX_MESSAGE} bytes")
    if line.count(b"[") + line.count(b"{") + line.count(b",") > MAX_ITEMS:
        raise ChannelError(f"a message of over {MAX_ITEMS} lists, objects and items")
    try:
        msg = json.loads(line)
    except ValueError as e:
        raise ChannelError(f"a message that is not JSON ({e})") from None
    except RecursionError:
        raise ChannelError("a message nested too deeply") from None
    if type(msg) is not dict:
        raise ChannelError("a message that is not a JSON object")
    return msg
