"""How long `assignments grade` takes per submission, for each assignment: its solution and its blank student
notebook graded once each, the way a class is graded (the notebook in a jail, the tests in a trusted worker, a time
limit; needs root, as grading does), written with its provenance to results/grading-times.json (the instructors'
page shows it; grading.DEFAULT_TIMEOUT is set from it with room for a loaded machine).

    python data_scripts/grading_times.py            # about 2 minutes on a 2-core laptop
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=ROOT / "results" / "grading-times.json")
    a = p.parse_args(argv)
    from metacl_lite.lab.atomic import check_writable, write_json
    from metacl_lite.lab.provenance import invocation, relative_to_repo
    from metacl_lite.course import assignments as A, grading as G, sheet as S

    check_writable(a.out)
    began = time.perf_counter()
    prov = invocation()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in A.list_assignments():
            out = A.generate(name, Path(tmp), run_tests=False)
            points = G.question_points(out["autograder"])
            for kind in ("solution", "student"):
                start = time.perf_counter()
                rec = G.grade_one(name, out["autograder"], out[kind], timeout=1800)
                seconds = time.perf_counter() - start
                r = S.row(kind, rec, points)
                rows.append({"assignment": name, "submission": kind, "seconds": round(seconds, 1),
                             "total": float(r["total"]), "possible": float(r["possible"]), "status": r["status"]})
                print(f"{name} {kind}: {seconds:.1f} s, {r['total']} / {r['possible']} {r['status']}", flush=True)
    command = "python data_scripts/grading_times.py"
    if a.out.resolve() != (ROOT / "results" / "grading-times.json").resolve():
        command += f" --out {relative_to_repo(a.out)}"
    prov.update(command=command, wall_s_total=round(time.perf_counter() - began, 1))
    write_json(a.out, {"kind": "grading-times", "rows": rows, "provenance": prov})
    print(f"wrote {relative_to_repo(a.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
