#!/usr/bin/python3
"""The PyTorch peer of einstage_bench_heisenberg --eval: the same algorithm as examples/heisenberg/ (docs/ipeps.md)
written with torch: one energy + gradient evaluation of the C4v iPEPS for the Heisenberg antiferromagnet.

    heisenberg_peer.py THETA.npy CHI THREADS                       ->  one JSON object on stdout
    heisenberg_peer.py --optimize THETA.npy CHI THREADS MAX_ITER     ->  one JSON object on stdout

The second form is a full optimisation from THETA (einstage_bench_heisenberg --optimize): torch.optim.LBFGS with the
same memory (30 pairs) and a strong-Wolfe line search, run one iteration per step() so that the stopping rule is
einstage's (|g| <= 1e-7 / |theta_0| at an accepted point, or MAX_ITER iterations; torch's own tests are switched off), each
evaluation starting CTMRG from the previous one's environment and restarting from the boundary when that does not
converge within a tenth of the step cap or to an element-wise fixed point (as IpepsEnergy::converge); a trial point
whose CTMRG fails is rejected with energy 1 and a zero gradient (as einstage's optimize). The closure caches its last
point, so the evaluation torch's step() repeats at its start costs nothing and is not counted.

The state A = c4v_symmetrize(theta); C4v CTMRG from the same boundary start (the double layer closed by vec(identity)),
the enlarged corner's eigh, the chi eigenvalues of largest modulus kept in ascending order (a multiplet cut by the
truncation dropped whole, eigenvalues below 1e-8 of the largest dropped), column signs by a fixed generic vector,
C and T symmetrised and normalised; iterated until the normalised corner spectrum changes by at most 1e-10, then on
with each output brought back to its input's sign gauge until no element changes by more than 1e-11, for at most
200 steps of that phase (as Ctmrg::converge). The energy per site from the two-site reduced density matrix (its contraction order from
numpy.einsum_path, greedy, run pairwise by torch.einsum); dE/dA by torch.autograd through the energy plus the
fixed-point adjoint: (I - df/dx)^T w = dE/dx solved by restarted GMRES (hand-written here in numpy: Debian's python3
has no scipy installed on this machine; the same tolerance 1e-10 relative, restart 30) with VJPs of one step by
torch.autograd.grad on the step's retained graph. Times the first evaluation after a warm-up evaluation, best of 2.
"""
import json
import sys
import time

import numpy as np
import torch

torch.set_default_dtype(torch.float64)
PERMS = [(0, 1, 2, 3, 4), (0, 2, 3, 4, 1), (0, 3, 4, 1, 2), (0, 4, 1, 2, 3),
         (0, 1, 4, 3, 2), (0, 2, 1, 4, 3), (0, 3, 2, 1, 4), (0, 4, 3, 2, 1)]
GAP, CUTOFF, TOL, FP_TOL, MAX_STEPS, FP_MAX_STEPS = 1e-6, 1e-8, 1e-10, 1e-11, 2000, 200


def c4v(a):
    return sum(a.permute(p) for p in PERMS) / 8


def double_layer(a):
    d = a.shape[1]
    return torch.einsum("sabcd,sefgh->aebfcgdh", a, a).reshape(d * d, d * d, d * d, d * d)


_paths = {}


def contract(subs, *ops):
    key = (subs, tuple(tuple(o.shape) for o in ops))
    if key not in _paths:
        _paths[key] = np.einsum_path(subs, *[np.empty(o.shape) for o in ops], optimize=("greedy", 1e15))[0][1:]
    inputs, out = subs.split("->")
    terms, ops = inputs.split(","), list(ops)
    for step in _paths[key]:
        picked = [(terms.pop(i), ops.pop(i)) for i in sorted(step, reverse=True)]
        rest = "".join(terms) + out
        res = "".join(dict.fromkeys(c for ti, _ in picked for c in ti if c in rest))
        terms.append(res)
        ops.append(torch.einsum(",".join(ti for ti, _ in picked) + "->" + res, *[o for _, o in picked]))
    return torch.einsum(f"{terms[0]}->{out}", ops[0])


def hamiltonian():
    h = torch.zeros(2, 2, 2, 2)
    h[0, 0, 0, 0] = h[1, 1, 1, 1] = -0.25
    h[1, 0, 1, 0] = h[0, 1, 0, 1] = 0.25
    h[0, 0, 1, 1] = h[1, 1, 0, 0] = -0.5
    return h


def initial_environment(a, chi):
    d2 = a.shape[1] ** 2
    dl = double_layer(a)
    b = torch.eye(a.shape[1]).reshape(d2)
    c0 = torch.einsum("u,l,uldr->dr", b, b, dl)
    t0 = torch.einsum("l,uldr->urd", b, dl)
    c = torch.zeros(chi, chi)
    t = torch.zeros(chi, d2, chi)
    c[:d2, :d2] = c0 / c0.norm()
    t[:d2, :, :d2] = t0 / t0.norm()
    return c, t


class Step:
    def __init__(self, chi, d2):
        g = torch.Generator().manual_seed(1)
        self.probe = 1 + torch.rand(chi * d2, generator=g)
        self.t_probe = 1 + torch.rand(chi, d2, chi, generator=g)
        self.chi = chi

    def __call__(self, c, t, dl, gauge):
        chi = self.chi
        m = contract("xy,xlp,yuq,uldr->pdqr", c, t, t, dl)
        k = m.shape[0] * m.shape[1]
        m = m.reshape(k, k)
        m = (m + m.T) / 2
        w, v = torch.linalg.eigh(m)
        aw = w.detach().abs()
        order = torch.argsort(-aw, stable=True)
        keep = torch.zeros(k, dtype=torch.bool)
        keep[order[:chi]] = True
        if chi < k:
            keep &= aw > aw[order[chi]] * (1 + GAP)
        keep &= aw > aw.max() * CUTOFF
        idx = torch.nonzero(keep).flatten()  # ascending eigenvalue order (eigh's)
        u = torch.zeros(k, chi)
        u = torch.cat([v[:, idx], torch.zeros(k, chi - len(idx))], 1)
        signs = torch.sign(self.probe @ u.detach())
        signs[signs == 0] = 1
        p = u * (signs * gauge)
        c_new = p.T @ m @ p
        c_new = (c_new + c_new.T) / 2
        c_new = c_new / c_new.norm()
        p3 = p.reshape(chi, -1, chi)
        t_new = contract("xui,xly,uldr,ydj->irj", p3, t, dl, p3)
        t_new = (t_new + t_new.permute(2, 1, 0)) / 2
        t_new = t_new / t_new.norm()
        t_new = t_new * torch.sign((self.t_probe * t_new).sum()).detach()
        spectrum = torch.cat([w[idx], torch.zeros(chi - len(idx))])
        return c_new, t_new, spectrum / spectrum.norm()


def converge(step, c, t, dl, chi, max_steps=MAX_STEPS):
    ones = torch.ones(chi)
    spectrum, steps = None, 0
    with torch.no_grad():
        while True:
            steps += 1
            c, t, s = step(c, t, dl, ones)
            if not (torch.isfinite(c).all() and torch.isfinite(t).all()):
                raise RuntimeError("CTMRG produced NaN")
            change = 1.0 if spectrum is None else (s - spectrum).abs().max().item()
            spectrum = s
            if change <= TOL:
                break
            if steps >= max_steps:
                raise RuntimeError("CTMRG did not converge")
        for phase_steps in range(FP_MAX_STEPS + 1):
            c1, t1, _ = step(c, t, dl, ones)
            j0 = int(torch.argmax((t ** 2).sum((0, 1))))
            g = torch.where((t[:, :, j0] * t1[:, :, j0]).sum(1) < 0, -1.0, 1.0)
            gg = g[:, None] * g[None, :]
            c1 = c1 * gg
            t1 = t1 * gg[:, None, :]
            if (step.t_probe * t1).sum() < 0:
                t1 = -t1
            change = max((c1 - c).abs().max().item(), (t1 - t).abs().max().item())
            if change <= FP_TOL or steps >= max_steps or phase_steps == FP_MAX_STEPS:
                return c, t, g, steps, change
            c, t, steps = c1, t1, steps + 1


def energy_of(c, t, a):
    x, d = c.shape[0], a.shape[1]
    t4 = t.reshape(x, d, d, x)
    rho = contract("ab,bkKc,clLd,de,amMf,skmnp,SKMNP,tlpoq,TLPOQ,eqQg,fh,hnNi,ioOj,jg->stST",
                   c, t4, t4, c, t4, a, a, a, a, t4, c, t4, t4, c)
    e = torch.einsum("stST,STst->", rho, hamiltonian())
    return 2 * e / torch.einsum("stst->", rho)


def gmres(apply, b, tol=1e-10, restart=30, max_iter=200):
    x = b.copy()
    bn = np.linalg.norm(b)
    its = 0
    while its < max_iter:
        r = b - apply(x)
        beta = np.linalg.norm(r)
        if beta <= tol * bn:
            break
        q = [r / beta]
        h = np.zeros((restart + 1, restart))
        for j in range(restart):
            wv = apply(q[j])
            its += 1
            for i in range(j + 1):
                h[i, j] = wv @ q[i]
                wv = wv - h[i, j] * q[i]
            h[j + 1, j] = np.linalg.norm(wv)
            e1 = np.zeros(j + 2)
            e1[0] = beta
            y = np.linalg.lstsq(h[:j + 2, :j + 1], e1, rcond=None)[0]
            res = np.linalg.norm(h[:j + 2, :j + 1] @ y - e1)
            if res <= tol * bn or h[j + 1, j] == 0 or its >= max_iter:
                break
            q.append(wv / h[j + 1, j])
        x = x + np.stack(q[:len(y)], 1) @ y
    return x, its


def gradient_at(step, theta, a, c, t, gauge):
    """The energy and dE/dtheta at a converged environment (c, t) with its gauge: autograd for the energy, the
    fixed-point adjoint through one step. Returns (energy, gradient, seconds of the energy grad, GMRES iterations)."""
    t1 = time.perf_counter()
    cx, tx = c.clone().requires_grad_(True), t.clone().requires_grad_(True)
    e = energy_of(cx, tx, a)
    ga_direct, gc, gt = torch.autograd.grad(e, (theta, cx, tx))
    t2 = time.perf_counter()
    ad = a.detach().clone().requires_grad_(True)
    cs, ts = c.clone().requires_grad_(True), t.clone().requires_grad_(True)
    c1, t1_, _ = step(cs, ts, double_layer(ad), gauge)
    nc = c.numel()

    def transposed(w):
        wc = torch.from_numpy(w[:nc].reshape(c.shape))
        wt = torch.from_numpy(w[nc:].reshape(t.shape))
        gcs, gts = torch.autograd.grad((c1, t1_), (cs, ts), (wc, wt), retain_graph=True)
        return np.concatenate([gcs.numpy().ravel(), gts.numpy().ravel()])

    b = np.concatenate([gc.numpy().ravel(), gt.numpy().ravel()])
    w, its = gmres(lambda v: v - transposed(v), b)
    wc, wt = torch.from_numpy(w[:nc].reshape(c.shape)), torch.from_numpy(w[nc:].reshape(t.shape))
    (ga,) = torch.autograd.grad((c1, t1_), ad, (wc, wt))
    grad = ga_direct + torch.autograd.grad(c4v(theta), theta, ga)[0]
    return e.item(), grad, t2 - t1, its


def evaluate(theta, chi):
    t0, cpu0 = time.perf_counter(), time.process_time()
    theta = theta.clone().requires_grad_(True)
    a = c4v(theta)
    dl = double_layer(a.detach())
    step = Step(chi, dl.shape[0])
    c, t = initial_environment(a.detach(), chi)
    c, t, gauge, steps, _ = converge(step, c, t, dl, chi)
    t1 = time.perf_counter()
    e, grad, t_energy, its = gradient_at(step, theta, a, c, t, gauge)
    t3 = time.perf_counter()
    return dict(energy=e, grad_norm=grad.norm().item(), seconds=t3 - t0, cpu_seconds=time.process_time() - cpu0,
                ctmrg_seconds=t1 - t0,
                ctmrg_steps=steps, energy_grad_seconds=t_energy, adjoint_seconds=t3 - t1 - t_energy,
                gmres_iterations=its)


def optimize(theta0, chi, max_iter, gradient_tolerance=1e-7, memory=30):
    """A full optimisation as einstage's heisenberg::optimize (see the top of the file)."""
    t0, cpu0 = time.perf_counter(), time.process_time()
    d2 = theta0.shape[1] ** 2
    step = Step(chi, d2)
    last = {"env": None, "x": None, "out": None}
    counts = {"evaluations": 0, "rejected": 0, "fresh": 0}

    def converged_env(a):
        dl = double_layer(a.detach())
        if last["env"] is not None:
            try:
                c, t, g, steps, change = converge(step, *last["env"], dl, chi, max(1, MAX_STEPS // 10))
                if change <= 1e-8:
                    return c, t, g, steps
            except RuntimeError:
                pass
            counts["fresh"] += 1
        c, t, g, steps, change = converge(step, *initial_environment(a.detach(), chi), dl, chi)
        if not change <= 1e-6:  # einstage's fixed-point adjoint refuses it (and runs its unrolled one)
            raise RuntimeError(f"no element-wise fixed point (last change {change:.3g})")
        return c, t, g, steps

    theta = theta0.clone().requires_grad_(True)
    opt = torch.optim.LBFGS([theta], lr=1, max_iter=1, tolerance_grad=0, tolerance_change=0, history_size=memory,
                            line_search_fn="strong_wolfe")

    def closure():
        x = theta.detach()
        if last["x"] is not None and torch.equal(x, last["x"]):
            e, g = last["out"]
        else:
            counts["evaluations"] += 1
            leaf = x.clone().requires_grad_(True)
            a = c4v(leaf)
            try:
                c, t, gauge, _ = converged_env(a)
                e, g, _, _ = gradient_at(step, leaf, a, c, t, gauge)
                if not (np.isfinite(e) and torch.isfinite(g).all()):
                    raise RuntimeError("not finite")
                last["env"] = (c, t)
            except (RuntimeError, ValueError, SystemError, np.linalg.LinAlgError):
                if counts["evaluations"] == 1:
                    raise
                counts["rejected"] += 1
                e, g = 1.0, torch.zeros_like(x)
            last["x"], last["out"] = x.clone(), (e, g)
        theta.grad = g.contiguous().clone()
        return torch.tensor(e)

    iterations = 0
    stop = ""
    while iterations < max_iter:
        closure()
        e, g = last["out"]
        if g.norm().item() <= gradient_tolerance / theta0.norm().item():  # LBFGSpp's epsilon, as optimize sets it
            break
        before = theta.detach().clone()
        opt.step(closure)
        iterations += 1
        if torch.equal(before, theta.detach()):
            stop = "the line search made no progress"
            break
    closure()
    return dict(energy=last["out"][0], grad_norm=last["out"][1].norm().item(), iterations=iterations,
                evaluations=counts["evaluations"], rejected=counts["rejected"], fresh_starts=counts["fresh"],
                seconds=time.perf_counter() - t0, cpu_seconds=time.process_time() - cpu0, stop=stop)


def main():
    if sys.argv[1] == "--optimize":
        theta = torch.from_numpy(np.load(sys.argv[2]))
        chi, threads, max_iter = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
        torch.set_num_threads(threads)
        r = optimize(theta, chi, max_iter)
        r.update(torch=torch.__version__, threads=threads, chi=chi)
        print(json.dumps(r))
        return
    theta = torch.from_numpy(np.load(sys.argv[1]))
    chi, threads = int(sys.argv[2]), int(sys.argv[3])
    torch.set_num_threads(threads)
    evaluate(theta, chi)  # warm-up
    best = min((evaluate(theta, chi) for _ in range(2)), key=lambda r: r["seconds"])
    best.update(torch=torch.__version__, threads=threads, chi=chi)
    print(json.dumps(best))


if __name__ == "__main__":
    main()
