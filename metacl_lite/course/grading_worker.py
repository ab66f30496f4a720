"""One submission graded by otter-grader, in the process that `grading.grade_one` starts for it (its own folder, its
own copy of the package, a time limit). Writes the results as a JSON record; an error that stopped grading is written
as `{"error": ...}` (a kernel that died as `{"crashed": ...}`).

    python -m metacl_lite.course.grading_worker AUTOGRADER.zip SUBMISSION RESULT.json
"""
from __future__ import annotations

import json
import sys
from pathlib import Path


def one_line(e: BaseException) -> str:
    return f"{type(e).__name__}: " + " ".join(str(e).split())[:160]


def test_names(zip_path: str) -> dict[str, list[str]]:
    """Each question's test functions, in order (`test_q1_branches`, ...), read from the autograder's test files;
    otter's results name them `q1 - 1`, `q1 - 2` (the function is not kept)."""
    import re
    import zipfile

    out = {}
    with zipfile.ZipFile(zip_path) as z:
        for member in z.namelist():
            m = re.fullmatch(r"tests/(\w+)\.py", member)
            if m:
                out[m.group(1)] = re.findall(r"^@test_case\(.*\)\s*\ndef (\w+)", z.read(member).decode(), re.M)
    return out


def record(results, names: dict[str, list[str]]) -> dict:
    """The JSON-able facts of otter's GradingResults: per question its score and possible points, per test case
    whether it passed, hidden or not, and otter's message (first lines)."""
    e = results._catastrophic_error
    if isinstance(e, EOFError):  # otter's results file is empty: the kernel's grading cell never finished
        why = f"the grading cell ended before writing results (sys.exit? {one_line(e)})"
        return {"error": why}
    if e is not None:
        return {"error": one_line(e)}
    questions = {}
    for q, tf in sorted(results.results.items()):
        own = names.get(q, [])
        tests = [{"test": own[i] if len(own) == len(tf.test_case_results) else r.test_case.name,
                  "hidden": bool(r.test_case.hidden), "passed": bool(r.passed),
                  "message": "\n".join((r.message or "").strip().splitlines()[-3:])}
                 for i, r in enumerate(tf.test_case_results)]
        questions[q] = {"score": float(tf.score), "possible": float(tf.possible), "tests": tests}
    return {"questions": questions}


def main(argv=None) -> int:
    zip_path, submission, out = (argv or sys.argv[1:])[:3]
    try:
        from otter.api import grade_submission

        rec = record(grade_submission(str(Path(submission).resolve()), str(zip_path), quiet=True),
                     test_names(zip_path))
    except Exception as e:  # noqa: BLE001 - every failure becomes the submission's status
        dead = type(e).__name__ == "DeadKernelError" or "DeadKernelError" in repr(e) or "died" in str(e)
        rec = {"crashed" if dead else "error": one_line(e)}
    Path(out).write_text(json.dumps(rec))
    return 0


if __name__ == "__main__":
    sys.exit(main())
