"""Inside the jail (`jail`): run a submitted notebook's code cells, then answer the grader's requests.

    python -m metacl_lite.course.jail_runner NOTEBOOK.json FD_IN FD_OUT

The cells run in an IPython shell of this environment's Python (whatever kernel the notebook names), in order, each
to its end or its error; otter's `grader.check`/`export` lines are left out (the grader runs the tests). Then one
message goes to the grader (`executed`: the code cells that raised, with their error), and requests are answered,
one JSON line each way (`channel`): `kind NAME` (function, value or missing), `get NAME` (the value as plain data)
and `call NAME ARGS KWARGS` (the result as plain data, the networks passed in as they are after the call, or the
error it raised); a path to a file goes as the file. Everything here is the submission's: the grader trusts none of
it beyond its plain data.
"""
from __future__ import annotations

import json
import os
import re
import sys

SKIP = re.compile(r"^\s*grader\.(check|check_all|export)\(.*$", re.M)


def one_line(e: BaseException) -> str:
    if isinstance(e, SystemExit):
        return f"SystemExit: the submission called sys.exit({e.code!r})"
    return f"{type(e).__name__}: " + " ".join(str(e).split())[:300]


def run_cells(cells: list[str]):
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    errors = []
    for i, src in enumerate(cells):
        r = shell.run_cell(SKIP.sub("pass", src), store_history=False)
        e = r.error_before_exec or r.error_in_exec
        if e is not None:
            first = next((s for s in src.strip().splitlines() if s.strip()), "")
            errors.append({"cell": i + 1, "line": first[:120], "error": one_line(e)})
    return shell.user_ns, errors


def everything(path) -> bool:
    """The jail ships every file its code names: it sees only its own and the machine's software."""
    return True


def answer(ns: dict, msg: dict) -> dict:
    from .channel import decode, encode

    op, name = msg.get("op"), msg.get("name")
    if name not in ns:
        return {"kind": "missing"} if op == "kind" else {"raised": f"NameError: {name!r} is not defined"}
    value = ns[name]
    if op == "kind":
        module = sys.modules.get("torch") and isinstance(value, sys.modules["torch"].nn.Module)
        return {"kind": "function" if callable(value) and not isinstance(value, type) and not module else "value"}
    if op == "get":
        return {"value": encode(value, ship=everything)}
    if op == "call":
        from pathlib import Path

        landing = Path.cwd() / ".grader-files"
        landing.mkdir(exist_ok=True)
        args, kwargs = decode(msg["args"], landing=landing), decode(msg["kwargs"], landing=landing)
        result = value(*args, **kwargs)
        import torch

        after = {str(i): encode(a) for i, a in enumerate(args) if isinstance(a, torch.nn.Module)}
        return {"value": encode(result, ship=everything), "modules": after}
    return {"raised": f"unknown request {op!r}"}


def main(argv=None) -> int:
    from .channel import MAX_MESSAGE, dumps, loads

    path, fd_in, fd_out = (argv or sys.argv[1:])[:3]
    chan_in, chan_out = os.fdopen(int(fd_in), "rb"), os.fdopen(int(fd_out), "wb")
    nb = json.loads(open(path, encoding="utf-8").read())
    cells = ["".join(c.get("source", "")) if isinstance(c.get("source"), list) else str(c.get("source", ""))
             for c in nb.get("cells", []) if c.get("cell_type") == "code"]
    ns, errors = run_cells(cells)
    chan_out.write(dumps({"executed": len(cells), "errors": errors}))
    chan_out.flush()
    while True:
        line = chan_in.readline(MAX_MESSAGE)
        if not line:
            return 0
        try:
            reply = answer(ns, loads(line))
        except BaseException as e:  # noqa: BLE001 - the student's error is the answer
            reply = {"raised": one_line(e)}
        try:
            data = dumps(reply)
        except Exception as e:  # noqa: BLE001
            data = dumps({"raised": one_line(e)})
        chan_out.write(data)
        chan_out.flush()


if __name__ == "__main__":
    sys.exit(main())
