"""Run the GPU tests (tests/test_gpu.py, marker `gpu`) on this machine's GPU and write what they found, with
provenance, to a check file (default results/gpu-check.json): each test's outcome and time, the GPU, torch, CUDA and
cuDNN versions and the determinism settings. Exit status: pytest's (0 when every GPU test passed).

    python -m metacl_lite.tools gpu-check [--out results/gpu-check.json]   (or: python data_scripts/gpu_check.py)
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", type=Path, default=ROOT / "results" / "gpu-check.json")
    a = p.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("error: no CUDA GPU is usable here; the GPU check runs on a machine with one", file=sys.stderr)
        return 2
    from metacl_lite.accel.device import describe, determinism_settings, deterministic
    from metacl_lite.lab.atomic import write_json
    from metacl_lite.lab.provenance import invocation

    with tempfile.TemporaryDirectory() as d:
        xml = Path(d) / "junit.xml"
        rc = subprocess.call([sys.executable, "-m", "pytest", "-q", "-m", "gpu", "-p", "no:cacheprovider",
                              f"--junitxml={xml}", str(ROOT / "tests" / "test_gpu.py")], cwd=ROOT)
        tests = []
        for case in ET.parse(xml).getroot().iter("testcase"):
            bad = [c.tag for c in case if c.tag in ("failure", "error", "skipped")]
            tests.append({"test": case.get("name"), "outcome": bad[0] if bad else "passed",
                          "time_s": float(case.get("time", 0)),
                          **({"message": (case[0].get("message") or "")[:500]} if bad else {})})
    deterministic("cuda")
    doc = {"kind": "gpu-check", "device": describe("cuda"), "passed": sum(t["outcome"] == "passed" for t in tests),
           "failed": sum(t["outcome"] != "passed" for t in tests), "tests": tests,
           "determinism": determinism_settings(),
           "provenance": {"command": "python data_scripts/gpu_check.py", **invocation("cuda")}}
    write_json(a.out, doc)
    print(f"{doc['passed']} passed, {doc['failed']} failed on {doc['device']}; wrote {a.out}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
