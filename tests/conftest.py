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
