import contextlib
import functools
import http.server
import json
import os
import threading

import pytest

os.environ.setdefault("METACL_LITE_PROGRESS", "0")


@pytest.fixture
def hparams_file(tmp_path, monkeypatch):
    """An isolated hparams.json (the committed one is never touched by tests); returns a writer."""
    from metacl_lite.lab import hparams as H

    path = tmp_path / "hparams.json"
    monkeypatch.setattr(H, "HPARAMS_FILE", path)

    def write(obj):
        path.write_text(obj if isinstance(obj, str) else json.dumps(obj))
        return path

    write(json.loads((H.Path(H.__file__).parent / "hparams.json").read_text()))
    return write


@contextlib.contextmanager
def serve(folder):
    """An HTTP server on 127.0.0.1 serving `folder` (a stand-in for the official download sites); yields its URL."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as httpd:
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        try:
            yield f"http://127.0.0.1:{httpd.server_port}/"
        finally:
            httpd.shutdown()


@pytest.fixture
def fake_units(monkeypatch):
    """Replace the training of a grid's unit by a record of what it would train with (fast, deterministic): each unit
    returns 50% everywhere. Returns the list of (unit, TrainConfig) calls."""
    import numpy as np

    from metacl_lite.lab import grid as G

    calls = []

    def fake(unit, bench, cfg, evaluate_rows="all"):
        calls.append((unit, cfg))
        n = bench.n_tasks
        if unit.kind == "run":
            return {"acc_matrix": [[50.0 if j <= i else np.nan for j in range(n)] for i in range(n)], "wall_s": 1.0}
        return {"acc": [50.0] * n, "wall_s": 1.0}

    monkeypatch.setattr(G, "execute_unit", fake)
    return calls
