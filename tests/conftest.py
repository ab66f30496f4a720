import json
import os

import pytest

os.environ.setdefault("METACL_LITE_PROGRESS", "0")


@pytest.fixture
def hparams_file(tmp_path, monkeypatch):
    """An isolated hparams.json (the committed one is never touched by tests); returns a writer."""
    from metacl_lite import hparams as H

    path = tmp_path / "hparams.json"
    monkeypatch.setattr(H, "HPARAMS_FILE", path)

    def write(obj):
        path.write_text(obj if isinstance(obj, str) else json.dumps(obj))
        return path

    write(json.loads((H.Path(H.__file__).parent / "hparams.json").read_text()))
    return write
