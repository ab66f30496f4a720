"""The episodic memory of the memory family (issue 44, `metacl_lite/memory.py`): what joins it after a task (M
examples per class, drawn from the run's seed), the batches it gives (A-GEM's reference batch of at most 256, ER's as
large as the current one), the gradient it gives (each example through its own task's head), and each memory method's
every outer step checked against a computation from scratch: A-GEM's projection, ER's replayed loss, MetaCL's
Reptile gradient projected, and MetaCL-lambda with both references. The methods without a memory draw nothing more."""
import copy
import math

import pytest
import torch
import torch.nn.functional as F
from torch.nn.utils import parameters_to_vector, vector_to_parameters

from metacl_lite import balance, memory as MEM, vocab
from metacl_lite.data.mnist import permuted_mnist
from metacl_lite.data.streams import Experience
from metacl_lite.models import mlp
from metacl_lite.training import (ALL_METHODS, METHODS, WITH_MEMORY, RegState, TrainConfig, get_method,
                                  metacl_gradient, params_vector, plain_gradient, run_stream, train_experience)

CFG = dict(epochs=1, batch_size=10, bundle_size=5, beta=2.0, gamma=0.5, memory=2)


@pytest.fixture(scope="module")
def bench():
    return permuted_mnist(K=5, n_tasks=3, seed=0, split="val")  # 50 training images per task, 10 classes


@pytest.fixture
def adam(monkeypatch):
    """torch.optim.Adam recording, at every step, the parameters before it and the gradient it applies."""
    real, steps = torch.optim.Adam, []

    class SpyAdam(real):
        def step(self, closure=None):
            ps = self.param_groups[0]["params"]
            steps.append({"theta": parameters_to_vector(ps).detach().clone(),
                          "g": torch.cat([p.grad.reshape(-1) for p in ps]).clone()})
            return super().step(closure)

    monkeypatch.setattr(torch.optim, "Adam", SpyAdam)
    return steps


def tiny_mlp(seed=0, heads=1):
    torch.manual_seed(seed)
    return mlp(784, (8,), 10, heads)


def test_the_memory_family_is_data_and_its_class_is_registered_once():
    """The family, its option and its methods are the vocabulary's (`MEMORY_TABLE`, the option `memory`,
    `MEMORY_METHOD_TABLE`); training builds each memory method from its base method; the class registered itself."""
    assert set(MEM.MEMORY_CLASSES) == set(vocab.MEMORIES) and MEM.MEMORY_CLASSES["episodic"] is MEM.EpisodicMemory
    assert [o.name for o in vocab.options_of("episodic")] == ["memory"] == list(vocab.BUDGET_OPTIONS)
    assert list(WITH_MEMORY) == list(vocab.MEMORY_METHODS) and list(ALL_METHODS) == list(vocab.METHOD_NAMES)
    for name, m in vocab.MEMORY_METHODS.items():
        method, base = WITH_MEMORY[name], METHODS[m.base]
        assert (method.regulariser, method.update, method.balance) == (base.regulariser, base.update, base.balance)
        assert (method.memory, method.use, method.label) == ("episodic", m.use, m.label) and not vocab.in_paper(name)
        assert "memory" in {o.name for o in vocab.options_of(name)}
    assert [m for m in WITH_MEMORY.values() if m.use == "replay"] == [WITH_MEMORY["er"]]
    assert all(get_method(m).memory is None and MEM.new_memory(None, TrainConfig(), 0, 30) is None for m in METHODS)
    with pytest.raises(ValueError, match="'tiny' is not a memory of the vocabulary"):
        MEM.memory_family("tiny")(type("Tiny", (), {}))
    with pytest.raises(ValueError, match=r"@memory_family\('episodic'\) is already EpisodicMemory, not Other"):
        MEM.memory_family("episodic")(type("Other", (), {}))
    with pytest.raises(ValueError, match="inconsistent method"):  # a projection replaces the balance: not beta's
        get_method("agem").__class__("x", "x", "mas", "plain", "beta", "episodic", "project")


def stored_rows(mem, exp):
    """The training image of `exp` that each of the memory's examples of its task is (its row), checked against the
    label: an AssertionError where an example is not one of the task's training images."""
    x, y, task = mem.batch(None)
    rows = [torch.nonzero((exp.inputs() == a).all(1)).flatten().tolist() for a in x[task == exp.task_id]]
    assert all(len(r) == 1 for r in rows), "a memory example is not one of its task's training images"
    assert [int(exp.y[r[0]]) for r in rows] == y[task == exp.task_id].tolist()
    return [r[0] for r in rows]


def test_a_fixed_budget_is_used_from_the_first_task_balanced_over_the_tasks_and_classes_seen(bench):
    """M = 2 of each of 3 tasks x 10 classes: 60 slots. After task 1 its 10 classes hold all their 5 images (50); after
    task 2, 3 each (60); after task 3, 2 each: M per class of each task. The earlier tasks give up slots, keeping the
    images they drew first; the images are uint8 (the stream's own 8-bit pixels, given back exactly), the labels
    and tasks uint8, and which images join comes from the run's seed."""
    mem = MEM.new_memory("episodic", TrainConfig(memory=2), 0, groups=30)
    assert len(mem) == 0 and mem.nbytes == 0 and mem.capacity == 60
    kept = []
    for t, share in enumerate((5, 3, 2)):
        mem.add(bench.train_stream[t])
        x, y, task = mem.batch(None)
        assert len(mem) == 10 * (t + 1) * share and task.tolist() == sum(([s] * 10 * share for s in range(t + 1)), [])
        assert y.tolist() == sum((sorted(list(range(10)) * share) for _ in range(t + 1)), [])
        kept.append({s: stored_rows(mem, bench.train_stream[s]) for s in range(t + 1)})
        first = mem.x.clone() if t == 0 else first
    assert kept[2][0] == [r for i, r in enumerate(kept[1][0]) if i % 3 < 2]  # task 1 kept the first it drew
    assert (mem.x.dtype, mem.y.dtype, mem.task.dtype) == (torch.uint8,) * 3 and mem.nbytes == 60 * (784 + 1 + 1)
    again = MEM.new_memory("episodic", TrainConfig(memory=2), 0, groups=30)
    other = MEM.new_memory("episodic", TrainConfig(memory=2), 1, groups=30)
    for m in (again, other):
        m.add(bench.train_stream[0])
    assert torch.equal(again.x, first) and not torch.equal(other.x, first)


def test_the_memory_takes_its_images_from_the_tasks_training_images_only(bench):
    """Through the training loop: after each task of ER, every example of the memory is one of its own task's
    training images (never a test or validation image, nor another task's)."""
    cfg, method = TrainConfig(**CFG), get_method("er")
    model, reg, gen = tiny_mlp(), RegState(memory=MEM.new_memory("episodic", cfg, 0, groups=30)), torch.Generator()
    for t, share in enumerate((5, 3, 2)):
        train_experience(model, bench.train_stream[t], method, cfg, reg, gen.manual_seed(t), {}, bench.test_stream[t])
        assert [len(stored_rows(reg.memory, bench.train_stream[s])) for s in range(t + 1)] == [10 * share] * (t + 1)


def test_a_reference_batch_is_at_most_256_distinct_examples_or_the_whole_memory():
    gen = torch.Generator().manual_seed(0)
    exp = Experience(0, torch.randn(300, 4, generator=gen), torch.arange(30).repeat(10))
    mem = MEM.EpisodicMemory(270, torch.Generator().manual_seed(1))
    mem.add(exp)
    assert len(mem) == 270 and mem.draw(270) is None and mem.draw(MEM.REFERENCE_BATCH) is not None
    state = mem.gen.get_state()
    rows = mem.draw(MEM.REFERENCE_BATCH)
    assert len(rows) == 256 == len(set(rows.tolist())) and int(rows.max()) < 270
    mem.gen.set_state(state)
    assert torch.equal(mem.draw(MEM.REFERENCE_BATCH), rows)  # the memory's own generator decides


def test_the_memory_gradient_sends_each_example_through_its_own_tasks_head():
    gen = torch.Generator().manual_seed(0)
    model = tiny_mlp(heads=2)
    mem = MEM.EpisodicMemory(60, torch.Generator().manual_seed(2))
    exps = [Experience(t, torch.randn(40, 784, generator=gen), torch.arange(10).repeat(4)) for t in range(2)]
    for e in exps:
        mem.add(e)
    mx, my, mt = mem.batch(None)
    assert len(mem) == 60 and mx.dtype == torch.float32  # 3 of each class and task; not 8-bit images: as they are
    clone = copy.deepcopy(model)
    loss = sum(F.cross_entropy(clone(x[None], int(t)), y[None]) for x, y, t in zip(mx, my, mt))
    (loss / len(mem)).backward()
    want = torch.cat([p.grad.reshape(-1) for p in clone.parameters()])
    torch.testing.assert_close(mem.gradient(model, None), want, rtol=1e-5, atol=1e-7)
    x, y = exps[1].x[:10], exps[1].y[:10]  # ER: the current batch (task 1) and as many memory examples, together
    state = mem.gen.get_state()
    got = mem.replay_gradient(model, x, y, 1)
    mem.gen.set_state(state)
    rows = torch.randperm(len(mem), generator=mem.gen)[:10]
    clone = copy.deepcopy(model)
    xs, ys, ts = torch.cat([x, mx[rows]]), torch.cat([y, my[rows]]), [1] * 10 + mt[rows].tolist()
    (sum(F.cross_entropy(clone(a[None], t), b[None]) for a, b, t in zip(xs, ys, ts)) / 20).backward()
    torch.testing.assert_close(got, torch.cat([p.grad.reshape(-1) for p in clone.parameters()]), rtol=1e-5, atol=1e-7)


def test_a_projection_is_the_balances_own_function():
    """A-GEM's projection is `balance.dynamic_balance` with gamma = 0 and the two references'
    `balance.two_reference_balance`: the same functions, not copies."""
    assert MEM.dynamic_balance is balance.dynamic_balance
    assert MEM.two_reference_balance is balance.two_reference_balance


def test_while_the_memory_is_empty_a_memory_method_trains_as_its_base_bit_for_bit(bench):
    """The stream's first task: the hook changes nothing, the memory draws nothing while it trains, and the task
    joins the memory after it, as it would join a new one."""
    cfg = TrainConfig(**CFG)
    for name in WITH_MEMORY:
        finals, regs = [], []
        for method in (get_method(name), get_method(vocab.MEMORY_METHODS[name].base)):
            model, reg = tiny_mlp(), RegState(memory=MEM.new_memory(method.memory, cfg, 0, 30))
            train_experience(model, bench.train_stream[0], method, cfg, reg, torch.Generator().manual_seed(3))
            finals.append(params_vector(model))
            regs.append(reg)
        assert torch.equal(finals[0], finals[1]) and regs[1].memory is None, name
        fresh = MEM.new_memory("episodic", cfg, 0, 30)
        fresh.add(bench.train_stream[0])
        assert torch.equal(regs[0].memory.x, fresh.x) and torch.equal(regs[0].memory.gen.get_state(),
                                                                      fresh.gen.get_state())


def _by_hand(model, theta, fn):
    """fn(clone) on a copy of the model with parameters theta."""
    clone = copy.deepcopy(model)
    vector_to_parameters(theta.clone(), clone.parameters())
    return fn(clone)


def _batches(exp, cfg, gen_state):
    gen = torch.Generator()
    gen.set_state(gen_state)
    for _ in range(cfg.epochs):
        order = torch.randperm(len(exp.y), generator=gen)
        for s in range(0, len(exp.y), cfg.batch_size):
            yield exp.x[order[s: s + cfg.batch_size]], exp.y[order[s: s + cfg.batch_size]]


@pytest.mark.parametrize("name", list(WITH_MEMORY))
def test_every_step_of_a_memory_method_is_the_update_it_promises(bench, adam, name):
    """Task 2 with task 1 in the memory (and, for MetaCL-lambda with both references, an Omega and anchor): each
    update Adam applies is, from scratch, A-GEM's g1 + max(0, -<g1, gm>) / ||gm||^2 gm (agem: the mini-batch
    gradient; metacl-agem: Eqs. 8-9), ER's gradient of the loss on the mini-batch and as many memory examples, or the
    two-reference step (g = g1 + (lambda_2 + gamma) g2 + lambda_m gm, meeting both constraints up to gamma g2)."""
    cfg, method = TrainConfig(**CFG), get_method(name)
    model, gen = tiny_mlp(), torch.Generator().manual_seed(5)
    mem = MEM.new_memory(method.memory, cfg, 0, 30)
    mem.add(bench.train_stream[0])
    mx, my, _ = mem.batch(None)  # task 1's 50 images (<= 256: the whole memory)
    theta0 = params_vector(model)
    omega, anchor = torch.rand(theta0.shape, generator=gen), theta0 + 0.05 * torch.randn(theta0.shape, generator=gen)
    reg = RegState(omega.clone(), anchor.clone(), mem) if method.regulariser else RegState(memory=mem)
    exp, order, mem_state = bench.train_stream[1], torch.Generator().manual_seed(7), mem.gen.get_state()
    batch_state = order.get_state()
    train_experience(model, exp, method, cfg, reg, order)
    replay = torch.Generator()
    replay.set_state(mem_state)
    steps = adam[-math.ceil(len(exp) / cfg.batch_size):]
    lams = []
    for (x, y), st in zip(_batches(exp, cfg, batch_state), steps):
        theta = st["theta"]
        gm = _by_hand(model, theta, lambda c: plain_gradient(c, mx, my, 0))
        if method.use == "replay":
            rows = torch.randperm(50, generator=replay)[: len(y)]
            want = _by_hand(model, theta, lambda c: plain_gradient(c, torch.cat([x, mx[rows]]),
                                                                  torch.cat([y, my[rows]]), 0))
        else:
            g1 = _by_hand(model, theta, lambda c: plain_gradient(c, x, y, 1) if method.update == "plain" else
                          metacl_gradient(c, x, y, 1, cfg.inner_lr, cfg.bundle_size))
            if method.regulariser is None:
                lam = max(0.0, -float(g1 @ gm)) / float(gm @ gm)
                want = g1 + lam * gm
                assert float(st["g"] @ gm) >= -1e-5 * float(g1.norm() * gm.norm())  # A-GEM's guarantee
            else:
                g2 = 2 * omega * (theta - anchor)
                want, _ = balance.two_reference_balance(g1, g2, gm, cfg.gamma)
                lam = balance.two_reference_lambdas(g1, g2, gm).max()
                g0 = st["g"] - cfg.gamma * g2  # the projection itself, before gamma g2
                tol = 1e-4 * float(g1.norm())
                assert float(g0 @ g2) >= -tol * float(g2.norm()) and float(g0 @ gm) >= -tol * float(gm.norm())
            lams.append(float(lam))
        torch.testing.assert_close(st["g"], want, rtol=1e-4, atol=1e-5 * float(want.abs().max()))
    assert len(steps) == 5 and (method.use == "replay" or max(lams) > 0)  # the projection was met
    assert len(reg.memory) == 60  # task 2 joined after it, task 1 gave up slots


def test_the_memorys_cost_stands_beside_the_regularisers(bench, monkeypatch):
    monkeypatch.setattr("metacl_lite.training.build_model", lambda *a, **k: tiny_mlp(a[3]))
    cfg = TrainConfig(**CFG)
    params = sum(p.numel() for p in tiny_mlp().parameters())
    out = run_stream(bench, "mas-metacl-lambda-mem", cfg, seed=0)
    assert out["state_bytes"] == {"memory": 3 * 10 * 2 * (784 + 1 + 1), "regulariser": 2 * params * 4}
    assert run_stream(bench, "agem", cfg, seed=0)["state_bytes"]["regulariser"] == 0
    assert "state_bytes" not in run_stream(bench, "mas-metacl-lambda", cfg, seed=0)
    a = run_stream(bench, "er", cfg, seed=4)["acc_matrix"]
    torch.testing.assert_close(torch.tensor(a), torch.tensor(run_stream(bench, "er", cfg, seed=4)["acc_matrix"]),
                               rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("name", ["gem", "mas-metacl-lambda-gem"])
def test_a_gem_step_is_g1_projected_onto_every_past_tasks_half_space(bench, adam, name):
    """Task 3 with tasks 1 and 2 in the memory: each update GEM applies is, from scratch, the solution of
    min ||g - g1||^2 s.t. <g, g_k> >= 0 for k = 1, 2 (g_k: the gradient on all of task k's memory examples), as
    SciPy's generic solver finds it, and meets both constraints. MetaCL-λ with GEM's constraints: g1 its Reptile
    gradient, and the regulariser's g2 = 2 Omega (theta - anchor) a third constraint, gamma g2 added after."""
    cfg, method = TrainConfig(**CFG), get_method(name)
    model, mem = tiny_mlp(), MEM.new_memory("episodic", cfg, 0, 30)
    for t in range(2):
        mem.add(bench.train_stream[t])
    x_mem, y_mem, t_mem = mem.batch(None)
    exp, order, gen = bench.train_stream[2], torch.Generator().manual_seed(7), torch.Generator().manual_seed(5)
    theta0 = params_vector(model)
    omega, anchor = torch.rand(theta0.shape, generator=gen), theta0 + 0.05 * torch.randn(theta0.shape, generator=gen)
    reg = RegState(omega.clone(), anchor.clone(), mem) if method.regulariser else RegState(memory=mem)
    state = order.get_state()
    train_experience(model, exp, method, cfg, reg, order)
    steps, active = adam[-math.ceil(len(exp) / cfg.batch_size):], 0
    for (x, y), st in zip(_batches(exp, cfg, state), steps):
        theta = st["theta"]
        refs = torch.stack([_by_hand(model, theta, lambda c: plain_gradient(c, x_mem[t_mem == k], y_mem[t_mem == k], 0))
                            for k in (0, 1)])
        g1 = _by_hand(model, theta, lambda c: plain_gradient(c, x, y, 0) if method.update == "plain" else
                      metacl_gradient(c, x, y, 0, cfg.inner_lr, cfg.bundle_size))
        g2 = 2 * omega * (theta - anchor) if method.regulariser else None
        refs = refs if g2 is None else torch.cat([g2[None], refs])
        s = float(g1.abs().max())
        want = s * balance.balance_qp_numeric((g1 / s).double().numpy(), (refs / refs.norm(dim=1, keepdim=True))
                                              .double().numpy())
        got = st["g"] if g2 is None else st["g"] - cfg.gamma * g2  # the projection itself, before gamma g2
        torch.testing.assert_close(got.double(), torch.from_numpy(want), rtol=1e-4, atol=1e-5 * s)
        assert (refs @ got >= -1e-4 * float(g1.norm()) * refs.norm(dim=1)).all()
        active += int(bool((refs @ g1 < 0).any()))
    assert len(steps) == 5 and active > 0  # a constraint was met
