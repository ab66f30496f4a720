"""The two kinds of file a grid writes, each on the locked, atomic unit store (`store.UnitFile`) and each holding its
own rules for continuing a file (`compatible`, `merge`, `finalize`):

* `ResultsFile` (`python -m metacl_lite run`): every method x seed ("runs"), each seed's single-task references and
  its joint oracle, under one configuration (`COMPAT_KEYS` must agree; methods and seeds may be added);
* `TuningFile` (`python -m metacl_lite tune`): one protocol's validation units, its grid per method and the values
  chosen from it.

A file written before today's format (`store.SCHEMA`) is not read: it is refused with one line saying what it lacks
and how to bring it to today's format (`store.migrate_advice`).
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Optional

import numpy as np

from . import hparams as H
from ..data.specs import BenchmarkSpec, get_spec
from ..errors import UserError
from ..keys import RunKey, TuningKey, unit_name
from ..paths import REPO_ROOT
from ..training import ALL_METHODS, TrainConfig
from ..memory import policy_record
from ..vocab import BUDGET_OPTIONS, OPTIONS, PAPER_METHOD_NAMES
from .checks import effective_options, recorded_options
from .commands import option_flags, out_flag
from .lattice import choose
from .provenance import relative_to_repo
from .request import RunRequest, TuneRequest
from .store import DIFFERS, UnitFile, load, load_results, migrate_advice
from .summary import summarize

#: Config fields that must agree for a results file to be continued (methods and seeds may be added).
#: "accelerator": the GPU model (None on the CPU). "threads": the intra-op threads of each CPU unit (another count
#: sums the same products in another order: the numbers differ in rounding, so a CPU file refuses units made with
#: another count).
COMPAT_KEYS = ("benchmark", "K", "n_tasks", "train", "data_source", "model", "accelerator", "threads")

#: Methods with a strength to tune: every regularised one (`tune --methods`).
REGULARISED = tuple(m for m in ALL_METHODS if H.strength_key(m) is not None)


def outdated_results(config: dict) -> Optional[str]:
    """What a results file's config lacks of today's format (None when it has it all): the fields of `COMPAT_KEYS`,
    and every field of `TrainConfig` in its training configuration but the budgets (recorded per method)."""
    missing = [k for k in COMPAT_KEYS if k not in config]
    train = config.get("train")
    missing += [f"train.{f}" for f in TrainConfig().to_dict()
                if isinstance(train, dict) and f not in train and f not in BUDGET_OPTIONS]
    return f"its config has no {', '.join(missing)}" if missing else None


def outdated_tuning(doc: dict) -> Optional[str]:
    """What a tuning file lacks of today's format (None when it has it all): units, and a protocol recording its
    options and each method's."""
    if "units" not in doc or not isinstance(doc.get("protocol"), dict):
        return "no units or protocol: schema 1"
    missing = [k for k in ("options", "method_options") if k not in doc["protocol"]]
    return f"its protocol has no {', '.join(missing)}" if missing else None


def load_tuning(path: Path) -> dict:
    """A tuning file (`store.load`), refused (`store.migrate_advice`) when it is of a format before today's."""
    doc = load(Path(path), "tuning")
    old = outdated_tuning(doc)
    if old:
        raise migrate_advice(Path(path), old)
    return doc


# ----------------------------------------------------------------------------------------------------------------
# Results files
# ----------------------------------------------------------------------------------------------------------------
def default_out(benchmark: str, K: int, gamma: Optional[str] = None, budget: str = "") -> Path:
    """results/<benchmark>-K<K><budget>.json (`budget_tag`: a memory run's file of its own, "-memory-M5"), or for a
    gamma control run results/<benchmark>-K<K>-control-gamma-<beta|0>.json."""
    name = f"{benchmark}-K{K}{budget}.json" if gamma is None else control_file(benchmark, K, gamma)
    return REPO_ROOT / "results" / name


def control_file(benchmark: str, K: int, gamma: str) -> str:
    """The file name of a gamma control run (`GAMMA_CONTROLS`)."""
    return f"{benchmark}-K{K}-control-gamma-{gamma}.json"


def run_command(config: dict, out: Path, spec: Optional[BenchmarkSpec] = None) -> str:
    """The `run` command that regenerates a results file with this config (all its methods and seeds); `spec`: the
    benchmark's, when the caller has it resolved (else looked up from the config's name)."""
    b, spec = config["benchmark"], spec or get_spec(config["benchmark"])
    seeds, train = config["seeds"], config["train"]
    cmd = f"python -m metacl_lite run --benchmark {b} --K {config['K']}"
    cmd += f" --seeds {len(seeds)}" if seeds == list(range(len(seeds))) else f" --seed-list {','.join(map(str, seeds))}"
    if list(config["methods"]) != list(PAPER_METHOD_NAMES):  # the default run: the paper's eleven
        cmd += f" --methods {','.join(config['methods'])}"
    if config["n_tasks"] != spec.n_tasks:
        cmd += f" --n-tasks {config['n_tasks']}"
    if train["epochs"] != spec.epochs:
        cmd += f" --epochs {train['epochs']}"
    cmd += option_flags(train) + budget_flags(config)
    if train.get("compile", "off") != "off":  # a file made compiled refuses eager units, and vice versa
        cmd += f" --compile {train['compile']}"
    if train.get("device", "cpu") != spec.device:  # a file made on a GPU refuses CPU units, and vice versa
        cmd += f" --device {train.get('device', 'cpu')}"
    if train.get("precision", "float32") != "float32":  # TF32 on a GPU: other numbers, refused when mixed
        cmd += f" --precision {train['precision']}"
    if "optimizer_state" in train:  # Adam's state kept across tasks
        cmd += f" --optimizer-state {train['optimizer_state']}"
    if config.get("gamma_control") is not None:
        cmd += f" --gamma {config['gamma_control']}"
    if config.get("data_source", "auto") != "auto":
        cmd += f" --data {config['data_source']}"
    if (config.get("model") or {}).get("random_init"):
        cmd += " --random-init"
    return cmd + out_flag(out, default_out(b, config["K"], config.get("gamma_control"), budget_tag(budgets(config))))


def budgets(config: dict) -> dict[str, set]:
    """The values of each budget (`vocab.BUDGET_OPTIONS`: the memory's M) a results file's config records for its
    methods (config.method_options); one per file, or none where no method reads it."""
    per = config.get("method_options", {})
    return {k: {per[m][k] for m in config.get("methods", []) if k in per.get(m, {})} for k in BUDGET_OPTIONS}


def budget_tag(values: dict) -> str:
    """How a file's name says its budgets (`vocab.BUDGET_OPTIONS`), from {name: value} or {name: {values}}: each as
    "-<name>-<label><value>" ("-memory-M1", as results/pmnist-K20-memory-M1.json), "" without one."""
    one = {k: (sorted(v) if isinstance(v, (set, list, tuple)) else [v]) for k, v in values.items()}
    return "".join(f"-{k}-{OPTIONS[k].label}{v}" for k in BUDGET_OPTIONS for v in one.get(k, ()))


def protocol_budgets(protocol: dict) -> dict[str, set]:
    """The values of each budget a tuning protocol records for the methods it trains (protocol.method_options; only
    the methods that read a budget have it), as `budgets` reads a results file's config."""
    per = protocol.get("method_options", {})
    return budgets({"methods": list(per), "method_options": per})


def budget_flags(config: dict) -> str:
    """The flags of a results file's budgets where they differ from the declared default (' --memory 2')."""
    return "".join(f" --{k.replace('_', '-')} {v}" for k, vs in budgets(config).items() for v in sorted(vs)
                   if v != OPTIONS[k].default)


def compat_diff(old_config: dict, config: dict) -> list[str]:
    """The `COMPAT_KEYS` in which a file's config differs from `config`; for the training configuration, each field
    that differs, with the file's value and this run's (e.g. "train.device: cpu in the file, cuda here")."""
    out = []
    for k in COMPAT_KEYS:
        old, new = old_config.get(k), config[k]
        if old == new:
            continue
        if k == "train" and isinstance(old, dict):
            fields = [*new, *(f for f in old if f not in new and hasattr(TrainConfig, f))]  # one recorded where set
            out += [DIFFERS.format(f"train.{f}", old.get(f), new.get(f)) for f in fields if old.get(f) != new.get(f)]
        else:
            out.append(DIFFERS.format(k, old, new) if k in ("accelerator", "K", "n_tasks", "threads") else k)
    return out


def redone_units(path: Path, why: str) -> set[str]:
    """The units of `path` trained since its last discard made for the same reason `why` (the same --redo with the
    same new beta/gamma): by the invocation that discarded and by every later one. A --redo interrupted and run
    again keeps them instead of discarding its own work."""
    if not Path(path).exists():
        return set()
    try:
        prov = load(Path(path), "results", check_units=False).get("provenance", {})
    except UserError:
        return set()
    last = [d for d in prov.get("discarded", []) if d.get("why") == why]
    if not last:
        return set()
    invs = prov.get("invocations", [])
    ids = [i.get("id") for i in invs]
    since = (invs[ids.index(last[-1].get("by")):] if last[-1].get("by") in ids
             else [i for i in invs if str(i.get("started", "")) >= str(last[-1].get("when", ""))])
    return {u for i in since if isinstance(i.get("units"), list) for u in i["units"]}


class ResultsFile(UnitFile):
    """The results file of a `RunRequest` (`req.out`): continued only under the same configuration (`COMPAT_KEYS`,
    the gamma control, each method's beta/gamma and options), methods and seeds merged into its config."""

    SECTIONS = ("runs", "references", "oracle")

    def __init__(self, req: RunRequest):
        super().__init__(req.out, "results", req.config, self.SECTIONS, where=req.where, where_text=req.loc.text,
                         threads=req.plan.threads)
        self.req = req

    def command(self, config: dict) -> str:
        """The command that regenerates the file (the request's `command`, else the CLI's `run`)."""
        req = self.req
        return req.command(config, req.out) if req.command else run_command(config, req.out, req.spec)

    def compatible(self, old: dict) -> list:
        oc, config = old.get("config", {}), self.req.config
        outdated = outdated_results(oc)
        if outdated:
            raise migrate_advice(self.path, outdated)
        diff = compat_diff(oc, config)
        diff += ["gamma_control"] if oc.get("gamma_control") != config.get("gamma_control") else []
        # a memory's runs of another policy (`memory.POLICY`; none recorded: the end-of-task memory before it)
        diff += ["memory_policy"] if oc.get("memory_policy") != policy_record(oc.get("methods", [])).get(
            "memory_policy") else []
        diff += [f"method_hparams[{m}]" for m in config["methods"]
                 if m in oc.get("method_hparams", {}) and oc["method_hparams"][m] != config["method_hparams"][m]]
        diff += [f"method_options[{m}]" for m in config["method_options"]
                 if m in oc.get("methods", []) and effective_options(oc, m) != config["method_options"][m]]
        old_b, new_b = budgets(oc), budgets(config)  # one budget per file: a file mixing them is refused
        diff += [DIFFERS.format(k, sorted(old_b[k]), sorted(new_b[k])) for k in BUDGET_OPTIONS
                 if old_b[k] and new_b[k] and old_b[k] != new_b[k]]
        return diff

    def merge(self, doc: dict) -> None:
        old, config = doc.get("config", {}), self.req.config
        merged = dict(config)
        merged["methods"] = [m for m in ALL_METHODS if m in set(old.get("methods", [])) | set(config["methods"])]
        merged["seeds"] = sorted(set(old.get("seeds", [])) | set(config["seeds"]))
        merged.update(policy_record(merged["methods"]))
        merged["method_hparams"] = {**old.get("method_hparams", {}), **config["method_hparams"]}
        merged["hparams_source"] = {**old.get("hparams_source", {}), **config["hparams_source"]}
        merged["method_options"] = {**{m: effective_options(old, m) for m in old.get("methods", [])
                                       if recorded_options(m)}, **config["method_options"]}
        doc["config"] = merged

    def finalize(self, doc: dict) -> None:
        doc["summary"] = summarize(doc)
        doc.setdefault("provenance", {})["command"] = self.command(doc["config"])

    def redo(self) -> list[str]:
        """Discard the finished runs of the request's `redo` methods (and the oracle with `redo_oracle`), except those
        a first attempt of the same --redo already retrained (`redone_units`). Returns the discarded units."""
        req = self.req
        redo, redone = set(req.redo), list(req.redo) + ["oracle"] * req.redo_oracle
        why = (f"--redo {','.join(redone)}: retrained with " + "; ".join(
            [f"{m} {req.config['method_hparams'][m]}" for m in req.redo]
            + ["the oracle as train_joint trains it"] * req.redo_oracle))
        keep = redone_units(req.out, why)

        def forget(doc: dict) -> None:
            c = doc.get("config", {})
            for key in ("method_hparams", "hparams_source", "method_options"):
                for m in redo:
                    c.get(key, {}).pop(m, None)
            c["methods"] = [m for m in c.get("methods", []) if m not in redo]

        def select(s: str, k: str) -> bool:
            picked = s == "runs" and RunKey.parse(k).method in redo or s == "oracle" and req.redo_oracle
            return picked and unit_name(s, k) not in keep

        gone = self.discard(select, forget, why)
        if gone:
            print(f"discarded {len(gone)} finished runs of {', '.join(redone)} from {req.out}; training them again")
        return gone

    def reuse_shared(self, main: Path) -> list[str]:
        """A gamma control run's references and oracle are those of the main results file `main`: the same benchmark,
        K, stream, data, seeds and fine-tune configuration (`COMPAT_KEYS`) give the same units, so those of the
        control's seeds that `main` has are copied (marked `reused_from`, wall_s 0) instead of trained again, about a
        fifth of a control's time. Nothing is copied when `main` is missing, unreadable or made with another
        configuration. Returns the copied units."""
        if not main.exists() or main.resolve() == self.path.resolve():
            return []
        try:
            src = load_results(main)
        except UserError:
            return []
        if compat_diff(src.get("config", {}), self.req.config):
            return []
        copied = []
        for section in ("references", "oracle"):
            for key in map(str, self.req.config["seeds"]):
                if key in src.get(section, {}) and key not in self.done(section):
                    self.add(section, key, {**src[section][key], "wall_s": 0.0, "reused_from": relative_to_repo(main)},
                             info={"data_info": src["data_info"]} if "data_info" in src else None)
                    copied.append(unit_name(section, key))
        return copied


# ----------------------------------------------------------------------------------------------------------------
# Tuning files
# ----------------------------------------------------------------------------------------------------------------
def searched_grid(protocol: dict, method: str) -> list[float]:
    """The grid a protocol searches for a method: its window (`window_grid`) in a windowed search, else the protocol's
    beta or gamma grid."""
    if "method_grids" in protocol:
        return protocol["method_grids"][method]
    return protocol["gamma_grid"] if H.strength_key(method) == "gamma" else protocol["beta_grid"]


def grid_of(doc: dict) -> dict:
    """Per method of the file: its grid values, the validation ACC per value and seed, the mean, and whether the grid
    is complete."""
    p = doc["protocol"]
    out = {}
    for m in doc["methods"]:
        param = H.strength_key(m)
        base = searched_grid(p, m)
        extra = {u["value"] for u in doc["units"].values() if u["method"] == m}  # values added by extending
        values = sorted(set(base) | extra)
        accs = [[doc["units"].get(str(TuningKey(m, param, v, s)), {}).get("val_acc") for s in p["seeds"]]
                for v in values]
        complete = all(a is not None for row in accs for a in row)
        g = {"param": param, "values": values, "val_acc": accs, "complete": complete,
             "extended": sorted(extra - set(base))}
        if complete:
            g["mean_val_acc"] = [float(np.mean(row)) for row in accs]
        out[m] = g
    return out


class TuningFile(UnitFile):
    """The tuning file of a `TuneRequest` (`req.out`): continued only under the same protocol (every field equal; of
    the per-method fields, `PER_METHOD`, those of the methods both tune: a method may join), its methods merged, its
    grid, chosen values and edges derived from its units. `command(doc, out)` writes the
    command that regenerates it; `text` is the protocol in words (`tuning.PROTOCOL`), recorded as protocol_text."""

    def __init__(self, req: TuneRequest, command: Callable[[dict, Path], str], text: str):
        super().__init__(req.out, "tuning", req.protocol, ("units",), where=req.where, where_text=req.loc.text,
                         threads=req.plan.threads)
        self.req, self.command, self.text = req, command, text

    def compatible(self, old: dict) -> list:
        outdated = outdated_tuning(old)
        if outdated:
            raise migrate_advice(self.path, outdated)
        op, protocol = old["protocol"], self.req.protocol
        diff = sorted(k for k in set(protocol) | set(op) if k not in self.PER_METHOD and op.get(k) != protocol.get(k))
        diff += [f"{k}[{m}]" for k in self.PER_METHOD for m, v in protocol.get(k, {}).items()
                 if m in op.get(k, {}) and op[k][m] != v]
        old_b, new_b = protocol_budgets(op), protocol_budgets(protocol)  # one budget per file, named when they differ
        return diff + [DIFFERS.format(k, sorted(old_b[k]), sorted(new_b[k])) for k in BUDGET_OPTIONS
                       if old_b[k] and new_b[k] and old_b[k] != new_b[k]]

    #: The protocol's fields that hold a value per method tuned.
    PER_METHOD = ("method_options", "method_grids")

    def merge(self, doc: dict) -> None:
        old = doc.get("protocol", {})
        protocol = {**self.req.protocol, **{k: {**old.get(k, {}), **self.req.protocol[k]} for k in self.PER_METHOD
                                            if k in self.req.protocol}}
        doc["protocol"] = protocol
        doc["methods"] = [m for m in REGULARISED if m in set(doc.get("methods", [])) | set(self.req.methods)]
        doc["protocol_text"] = self.text
        for k in ("benchmark", "K", "n_tasks", "seeds", "epochs"):  # at the top too, for readers
            doc[k] = protocol[k]

    def finalize(self, doc: dict) -> None:
        doc["grid"] = grid_of(doc)
        doc["chosen"], doc["at_edge"] = {}, {}
        for m, g in doc["grid"].items():
            if g["complete"] and not (c := choose(g))["tied"]:  # a tie decided nothing: no value to write
                doc["chosen"][m] = {g["param"]: c["value"]}
                doc["at_edge"][m] = c["at_edge"]
        doc.setdefault("provenance", {})["command"] = self.command(doc, self.req.out)

    def reuse(self, method: str, path: Path) -> int:
        """Copy in the units of `method` from the tuning file `path` (marked "reused_from"), which must have been made
        with exactly this protocol's training configuration for it (every protocol field equal, that method's
        options included; UsageError otherwise). Returns how many were copied."""
        from ..errors import UsageError

        src, protocol = load_tuning(Path(path)), self.req.protocol
        sp = src["protocol"]
        diff = sorted(k for k in set(protocol) | set(sp)
                      if k not in ("options", "method_options") and sp.get(k) != protocol.get(k))
        diff += ["method_options"] if sp["method_options"].get(method) != protocol["method_options"][method] else []
        if diff:
            raise UsageError(f"{relative_to_repo(path)} cannot stand in for {method}'s units ({', '.join(diff)} "
                             f"differ)")
        copied = 0
        for key, u in src["units"].items():
            if u["method"] == method and key not in self.done("units"):
                self.add("units", key, {**u, "reused_from": relative_to_repo(path)})
                copied += 1
        return copied
