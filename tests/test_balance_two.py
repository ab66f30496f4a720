"""Eq. 3 with two references (issue 44), min 1/2 ||g - g1||^2 s.t. <g, g2> >= 0 and <g, gm> >= 0, solved through its
two-variable dual by active sets (`balance.two_reference_lambdas`): hand-solved cases with no constraint active, one,
both; parallel, antiparallel and zero references; 100 random instances, degenerate ones among them, against a generic
QP solver (SciPy's SLSQP, and OSQP, which know nothing of the closed form) and by their KKT residuals."""
import numpy as np
import pytest
import torch

from metacl_lite.balance import (balance_qp_numeric, dynamic_lambda, gram_nnls, kkt_residuals, many_reference_lambdas,
                                 two_reference_balance, two_reference_lambdas)


def _t(*xs):
    return [torch.tensor(x, dtype=torch.float64) for x in xs]


#: (name, g1, g2, gm, the multipliers (lambda_2, lambda_m), the solution g), each solved by hand (comments).
HAND = [
    # g1 already satisfies both: nothing active
    ("none", (1.0, 1.0), (1.0, 0.0), (0.0, 1.0), (0.0, 0.0), (1.0, 1.0)),
    # <g1, g2> = -1: g2's alone, lambda_2 = 1, g = (0, 1), and <g, gm> = 1 >= 0
    ("g2 alone", (-1.0, 1.0), (1.0, 0.0), (0.0, 1.0), (1.0, 0.0), (0.0, 1.0)),
    # <g1, gm> = -1: gm's alone
    ("gm alone", (1.0, -1.0), (1.0, 0.0), (0.0, 1.0), (0.0, 1.0), (1.0, 0.0)),
    # g1 violates both, but projecting onto gm's half-space alone satisfies g2's: lambda_m = 3/2, g = (1/2, -1/2)
    ("both violated, one active", (-1.0, -2.0), (1.0, 0.0), (1.0, 1.0), (0.0, 1.5), (0.5, -0.5)),
    # references at 135 degrees: G = [[1, -1], [-1, 2]], c = (0, -1), lambda = -G^-1 c = (1, 1), g = (0, 0, 2)
    ("both", (0.0, -1.0, 2.0), (1.0, 0.0, 0.0), (-1.0, 1.0, 0.0), (1.0, 1.0), (0.0, 0.0, 2.0)),
    # parallel references (gm = 2 g2): one half-space; both single candidates give g = (0, 1), the first is taken
    ("parallel", (-1.0, 1.0), (1.0, 0.0), (2.0, 0.0), (1.0, 0.0), (0.0, 1.0)),
    # antiparallel references: the hyperplane g_x = 0; from either side the one violated reference is active
    ("antiparallel, g2 violated", (-1.0, 1.0), (1.0, 0.0), (-2.0, 0.0), (1.0, 0.0), (0.0, 1.0)),
    ("antiparallel, gm violated", (1.0, 1.0), (1.0, 0.0), (-2.0, 0.0), (0.0, 0.5), (0.0, 1.0)),
    # a zero reference constrains nothing: Eq. 5 with the other one (A-GEM's projection for g2 = 0)
    ("gm zero", (-1.0, 1.0), (1.0, 0.0), (0.0, 0.0), (1.0, 0.0), (0.0, 1.0)),
    ("g2 zero", (1.0, -1.0), (0.0, 0.0), (0.0, 1.0), (0.0, 1.0), (1.0, 0.0)),
    ("both zero", (1.0, -1.0), (0.0, 0.0), (0.0, 0.0), (0.0, 0.0), (1.0, -1.0)),
]


@pytest.mark.parametrize("name,g1,g2,gm,lams,g", HAND, ids=[h[0] for h in HAND])
def test_hand_solved_cases(name, g1, g2, gm, lams, g):
    g1, g2, gm = _t(g1, g2, gm)
    lam = two_reference_lambdas(g1, g2, gm)
    assert lam.dtype == torch.float64 and lam.shape == (2,)
    assert lam.tolist() == pytest.approx(list(lams), abs=1e-12)
    got, lam2 = two_reference_balance(g1, g2, gm)
    assert got.tolist() == pytest.approx(list(g), abs=1e-12) and float(lam2) == float(lam[0])
    assert max(kkt_residuals(g1, torch.stack([g2, gm]), got, lam).values()) <= 1e-12


def test_gamma_is_added_to_the_regularisers_multiplier_as_alg_2_adds_it():
    """g = (the solution) + gamma g2, and the returned lambda is the regulariser's multiplier without gamma."""
    g1, g2, gm = _t((0.0, -1.0, 2.0), (1.0, 0.0, 0.0), (-1.0, 1.0, 0.0))
    g, lam = two_reference_balance(g1, g2, gm, gamma=0.25)
    assert g.tolist() == pytest.approx([0.25, 0.0, 2.0]) and float(lam) == 1.0


def test_with_a_zero_memory_gradient_it_is_eq_5():
    """gm = 0 leaves Eq. 3 with one reference: lambda_2 is Eq. 5's lambda (`dynamic_lambda`), lambda_m = 0."""
    rng = np.random.default_rng(3)
    for _ in range(20):
        g1, g2 = _t(rng.normal(size=7), rng.normal(size=7))
        lam = two_reference_lambdas(g1, g2, torch.zeros(7, dtype=torch.float64))
        assert float(lam[0]) == pytest.approx(float(dynamic_lambda(g1, g2)), rel=1e-12, abs=1e-15)
        assert float(lam[1]) == 0.0


def _instances(n=100, seed=0):
    """n random (g1, g2, gm, kind), every sixth of a kind: generic; gm parallel to g2; antiparallel; g2 = 0; gm = 0;
    both zero. Scales from 1e-2 to 1e2, dimensions 2 to 40; a generic instance's g1 is turned against a reference
    with probability 1/2 each, so that every active set is met."""
    rng = np.random.default_rng(seed)
    kinds = ("generic", "parallel", "antiparallel", "g2 zero", "gm zero", "both zero")
    for i in range(n):
        p, kind = int(rng.integers(2, 40)), kinds[i % len(kinds)]
        g1, g2, gm = (rng.normal(size=p) * 10 ** rng.uniform(-2, 2) for _ in range(3))
        if kind in ("parallel", "antiparallel"):
            gm = (1 if kind == "parallel" else -1) * rng.uniform(0.1, 10) * g2
        for ref in (g2, gm):
            if rng.random() < 0.5 and g1 @ ref > 0:
                g1 = g1 - 2 * (g1 @ ref) / (ref @ ref) * ref  # reflected: now against ref
        g2 = np.zeros(p) if kind in ("g2 zero", "both zero") else g2
        gm = np.zeros(p) if kind in ("gm zero", "both zero") else gm
        yield g1, g2, gm, kind


def _generic(g1: np.ndarray, refs: np.ndarray, method: str = "slsqp") -> np.ndarray:
    """The QP solved by `balance_qp_numeric` on its scale-free form: g1 / |g1|_max and each reference divided by its
    norm (the constraints are the same), the solution scaled back (SLSQP's tolerances are absolute)."""
    s = np.abs(g1).max()
    norms = np.linalg.norm(refs, axis=1, keepdims=True)
    return s * balance_qp_numeric(g1 / s, refs / np.where(norms > 0, norms, 1.0), method)


def test_100_random_instances_meet_the_kkt_conditions_and_the_generic_solver():
    """On 100 instances (degenerate ones included) the closed form's KKT residuals (stationarity, primal, dual,
    complementarity; relative to the instance's scale) are <= 1e-8, and g is SLSQP's solution of the QP with both
    constraints; every active set is met."""
    active = set()
    for g1, g2, gm, kind in _instances():
        scale = 1 + np.abs(g1).max()
        G1, G2, GM = _t(g1, g2, gm)
        g, _ = two_reference_balance(G1, G2, GM)
        lam = two_reference_lambdas(G1, G2, GM)
        res = kkt_residuals(G1, torch.stack([G2, GM]), g, lam)
        norms = max(1.0, np.linalg.norm(g2), np.linalg.norm(gm))
        assert res["stationarity"] <= 1e-8 * scale and res["dual"] == 0.0, (kind, res)
        assert res["primal"] <= 1e-8 * scale * norms and res["complementarity"] <= 1e-8 * scale * norms, (kind, res)
        ref = _generic(g1, np.stack([g2, gm]))
        np.testing.assert_allclose(g.numpy(), ref, atol=1e-7 * scale, err_msg=kind)
        active.add((kind, tuple(bool(x > 0) for x in lam.tolist())))
    generic = {a for k, a in active if k == "generic"}
    assert generic == {(False, False), (True, False), (False, True), (True, True)}
    assert {a for k, a in active if k == "both zero"} == {(False, False)}


def test_the_generic_solver_takes_several_constraints_and_osqp_agrees():
    """`balance_qp_numeric` with three constraints (one per row) meets them, and SLSQP and OSQP find the same g as
    the closed form on two."""
    pytest.importorskip("osqp")
    rng = np.random.default_rng(5)
    for _ in range(5):
        g1, *refs = rng.normal(size=(4, 12))
        g = balance_qp_numeric(g1, np.stack(refs))
        assert (np.stack(refs) @ g >= -1e-8).all() and np.linalg.norm(g - g1) <= np.linalg.norm(g1) + 1e-8
        closed, _ = two_reference_balance(*_t(g1, refs[0], refs[1]))
        for method in ("slsqp", "osqp"):
            np.testing.assert_allclose(balance_qp_numeric(g1, np.stack(refs[:2]), method), closed.numpy(), atol=1e-6)


def test_float32_gradients_keep_the_guarantees_within_their_rounding():
    """The training loop's gradients are float32: the dot products are taken in float64, so parallel and
    antiparallel float32 references are still seen as such and the two constraints hold within float32 rounding."""
    gen = torch.Generator().manual_seed(0)
    g1, a = torch.randn(5000, generator=gen), torch.randn(5000, generator=gen)
    g1 = g1 - 2 * torch.clamp(g1 @ a, min=0) / (a @ a) * a  # against a
    for b in (3 * a, -a, torch.zeros(5000), torch.randn(5000, generator=gen)):
        g, _ = two_reference_balance(g1, a, b)
        assert g.dtype == torch.float32 and torch.isfinite(g).all()
        scale = float(g1.norm()) * max(float(a.norm()), float(b.norm()))
        assert float(g @ a) >= -1e-5 * scale and float(g @ b) >= -1e-5 * scale
        assert float((g - g1).norm()) <= float(g1.norm()) * 1.0001  # a projection moves g1 no further than to 0


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_nearly_parallel_references_are_seen_as_parallel(dtype):
    """References parallel or antiparallel up to a perturbation of 1e-8 to 1e-12 (or rounding alone): G is singular
    up to rounding and is taken as such (`two_reference_lambdas`' 1e-10 test), so no huge pair of multipliers
    cancels in g: g moves no further than to 0 (a feasible point, so the projection is at most |g1| away) and both
    constraints hold to within 1e-6 of |g1| |ref|."""
    gen = torch.Generator().manual_seed(1)
    for eps in (0.0, 1e-8, 1e-10, 1e-12):
        for sign in (1.0, -1.0):
            for _ in range(20):
                a = torch.randn(2000, generator=gen, dtype=torch.float64)
                b = sign * 3 * a + eps * torch.randn(2000, generator=gen, dtype=torch.float64)
                g1 = torch.randn(2000, generator=gen, dtype=torch.float64)
                g1 = g1 - 2 * torch.clamp(g1 @ a, min=0) / (a @ a) * a  # against a
                a, b, g1 = a.to(dtype), b.to(dtype), g1.to(dtype)
                g, _ = two_reference_balance(g1, a, b)
                n1 = float(g1.norm())
                assert float((g - g1).norm()) <= n1 * (1 + 1e-6), (eps, sign)
                assert min(float(g @ a) / float(a.norm()), float(g @ b) / float(b.norm())) >= -1e-6 * n1, (eps, sign)


def test_many_references_give_the_two_reference_closed_form_on_two():
    """GEM's path (`many_reference_lambdas`: the dual as non-negative least squares) on the 300 two-reference
    instances, degenerate ones included (parallel, antiparallel, zero references): the same g as the closed form."""
    for g1, g2, gm, kind in _instances(300, seed=4):
        G1, refs = torch.from_numpy(g1), torch.from_numpy(np.stack([g2, gm]))
        closed, _ = two_reference_balance(G1, refs[0], refs[1])
        got = G1 + many_reference_lambdas(G1, refs) @ refs
        np.testing.assert_allclose(got.numpy(), closed.numpy(), rtol=0, atol=1e-12 * (1 + np.abs(g1).max()),
                                   err_msg=kind)


@pytest.mark.parametrize("n", [3, 5, 19])
def test_many_references_meet_the_kkt_conditions_and_the_generic_solver(n):
    """n references (GEM at task n + 1), some repeated, antiparallel or zero: the multipliers meet the KKT conditions
    within 1e-9 of the instance's scale, and g is SLSQP's on the instances without a degenerate pair."""
    rng = np.random.default_rng(n)
    for i in range(30):
        p = int(rng.integers(n + 1, 60))
        g1, refs = rng.normal(size=p) * 10 ** rng.uniform(-2, 2), rng.normal(size=(n, p))
        for r in refs:
            if rng.random() < 0.5 and g1 @ r > 0:
                g1 = g1 - 2 * (g1 @ r) / (r @ r) * r  # reflected: now against r
        kind = ("generic", "repeated", "antiparallel", "zero")[i % 4]
        refs[1] = {"generic": refs[1], "repeated": 3 * refs[0], "antiparallel": -0.5 * refs[0],
                   "zero": np.zeros(p)}[kind]
        G1, R = torch.from_numpy(g1), torch.from_numpy(refs)
        lam = many_reference_lambdas(G1, R)
        g = G1 + lam @ R
        scale = (1 + np.abs(g1).max()) * max(1.0, np.linalg.norm(refs, axis=1).max())
        res = kkt_residuals(G1, R, g, lam)
        assert res["stationarity"] <= 1e-9 * scale and res["dual"] == 0.0, (kind, res)
        assert res["primal"] <= 1e-9 * scale and res["complementarity"] <= 1e-9 * scale, (kind, res)
        if kind == "generic":
            np.testing.assert_allclose(g.numpy(), _generic(g1, refs), atol=1e-7 * (1 + np.abs(g1).max()))


#: The dual of GEM's step met at K = 200 (PI's GEM form, gamma = 0, tuning seed 100, task 9, epoch 5), exactly
#: (float.hex): G is near singular (eigenvalues 2e-11 to 1e-2; references all but parallel). Before the blocking
#: reference always left the set, one multiplier stayed at 5e-324 while its step underflowed to 0, and the tuning
#: unit looped for ever.
STUCK_G = """
0x1.9c8fda2fb7468p-13 -0x1.fea69963c1244p-33 0x1.8d489809e2338p-20 0x1.7fd281e8abcc8p-22 0x1.816f3c2979c87p-22
0x1.83929ef8229a0p-15 -0x1.021130c5c974cp-17 -0x1.a0236048489b8p-21 -0x1.7f7158b74eb3ap-17
-0x1.fea69963c1244p-33 0x1.fa43a447cbe03p-36 0x1.0b29ffe480d3ep-27 0x1.db51529795eaap-27 0x1.7cf385398d247p-28
0x1.3bb7778b85aaap-23 0x1.7f7d698322608p-25 0x1.07635c871663fp-25 0x1.b64905dc77367p-25 0x1.8d489809e2338p-20
0x1.0b29ffe480d3ep-27 0x1.78e0649971907p-17 0x1.639ec416f1f97p-17 0x1.bf56de38bf354p-19 0x1.5bada2dcb29cap-14
0x1.46869a032a2d3p-15 0x1.0f171598b5e91p-15 0x1.8cb4f829ddb08p-15 0x1.7fd281e8abcc8p-22 0x1.db51529795eaap-27
0x1.639ec416f1f97p-17 0x1.a978c0bbc273fp-14 0x1.df7a1c22ee9d1p-18 0x1.977df7d3e48e1p-13 0x1.9a0d3242b2250p-14
0x1.1a46e6b622dc1p-14 0x1.259b71bfd4f1ep-14 0x1.816f3c2979c87p-22 0x1.7cf385398d247p-28 0x1.bf56de38bf354p-19
0x1.df7a1c22ee9d1p-18 0x1.860f79d3a2788p-18 0x1.b725cec8e30fcp-15 0x1.e14af4fcaabb8p-16 0x1.235e4e5188ee3p-16
0x1.d1286bcf5ea4fp-16 0x1.83929ef8229a0p-15 0x1.3bb7778b85aaap-23 0x1.5bada2dcb29cap-14 0x1.977df7d3e48e1p-13
0x1.b725cec8e30fcp-15 0x1.0e676d594e483p-7 0x1.deeb6a250e73bp-11 0x1.0c8be5089fecep-11 0x1.a7d65515d2743p-12
-0x1.021130c5c974cp-17 0x1.7f7d698322608p-25 0x1.46869a032a2d3p-15 0x1.9a0d3242b2250p-14 0x1.e14af4fcaabb8p-16
0x1.deeb6a250e73bp-11 0x1.501b3da003feap-9 0x1.7f7fb486090fep-12 0x1.3faae2ccff576p-11 -0x1.a0236048489b8p-21
0x1.07635c871663fp-25 0x1.0f171598b5e91p-15 0x1.1a46e6b622dc1p-14 0x1.235e4e5188ee3p-16 0x1.0c8be5089fecep-11
0x1.7f7fb486090fep-12 0x1.e36913c3bd22ep-10 0x1.738b212081a25p-11 -0x1.7f7158b74eb3ap-17 0x1.b64905dc77367p-25
0x1.8cb4f829ddb08p-15 0x1.259b71bfd4f1ep-14 0x1.d1286bcf5ea4fp-16 0x1.a7d65515d2743p-12 0x1.3faae2ccff576p-11
0x1.738b212081a25p-11 0x1.4e1c4bab109e3p-7
"""
STUCK_C = """
-0x1.5f3b9b168adebp-10 -0x1.89f06fc0b9c12p-21 -0x1.7d9256be62fa0p-12 -0x1.556ca4bc1555ap-12
-0x1.9d99f21a628e3p-13 -0x1.d5348daca3ff0p-7 -0x1.fe52a8de7090ep-9 -0x1.4c266a357bd7ep-9 -0x1.5fb03c34b34ccp-8
"""
STUCK_TOL = float.fromhex("0x1.6449a5bcd4fc0p-44")


def test_a_multiplier_left_at_the_smallest_float_leaves_the_active_set():
    """`gram_nnls` on the instance that looped for ever: it returns (in a thread, within 60 s) multipliers that meet
    the KKT conditions of the dual to 1e-9 of its scale, and scipy's NNLS on a factor of G finds the same."""
    import threading

    from scipy.optimize import nnls

    G = np.array([float.fromhex(x) for x in STUCK_G.split()]).reshape(9, 9)
    c = np.array([float.fromhex(x) for x in STUCK_C.split()])
    got = []
    t = threading.Thread(target=lambda: got.append(gram_nnls(G, c, STUCK_TOL)), daemon=True)
    t.start()
    t.join(60)
    assert got, "gram_nnls did not return within 60 s"
    lam, w = got[0], -(G @ got[0] + c)
    scale = np.abs(G).max() * np.abs(lam).max() + np.abs(c).max()
    assert (lam >= 0).all() and w.max() <= 1e-9 * scale and np.abs(lam * w).max() <= 1e-9 * scale * np.abs(lam).max()
    L = np.linalg.cholesky(G + 0.0)  # G = L L^T: the dual is min ||L^T lambda + L^-1 c||^2 over lambda >= 0
    ref = nnls(L.T, -np.linalg.solve(L, c), maxiter=1000)[0]
    np.testing.assert_allclose(L.T @ lam, L.T @ ref, rtol=0, atol=1e-6 * np.abs(L.T @ ref).max())
