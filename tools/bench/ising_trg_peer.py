#!/usr/bin/env python3
"""PyTorch peer of the Ising TRG benchmark (tools/bench/ising.cpp): the same algorithm as examples/ising/Trg.h
(Levin-Nave TRG, max|T| normalisation, full SVDs, D' = min(D^2, chi, #(S > 1e-15))), with u and c by
torch.autograd.grad(..., create_graph=True) twice, as in Liao et al.'s code. f64, CPU.

The SVD is a torch.autograd.Function whose backward is the Lorentzian-broadened rule (1/x -> x / (x^2 + 1e-12)), as
in the paper's code and as einstage's linalg AD (docs/ad.md): torch.linalg.svd's own backward divides by the gaps
between singular values, and the rank-deficient TRG steps have many equal (zero) ones, so u and c came out NaN. The
backward is written in differentiable torch ops, so the second grad differentiates it again.

usage: ising_trg_peer.py CHI STEPS BETA MIN_SECONDS THREADS   prints one JSON object:
  {"lnz", "energy", "specific_heat", "seconds"}  (seconds: best wall time of one value+u+c evaluation)
"""
import json
import sys
import time

import torch

EPS = 1e-12


def broadened_inverse(x):
    return x / (x * x + EPS)


class BroadenedSvd(torch.autograd.Function):
    """Full SVD of a square matrix, A = U diag(S) Vh, with the broadened reverse rule."""

    @staticmethod
    def forward(ctx, a):
        u, s, vh = torch.linalg.svd(a)
        ctx.save_for_backward(u, s, vh)
        return u, s, vh

    @staticmethod
    def backward(ctx, gu, gs, gvh):
        u, s, vh = ctx.saved_tensors
        v = vh.T
        f = broadened_inverse(s[None, :] - s[:, None])  # 1/(s_j - s_i), zero on the diagonal
        f = f * (1 - torch.eye(s.shape[0], dtype=s.dtype))
        g = broadened_inverse(s[None, :] + s[:, None])  # 1/(s_j + s_i)
        au = u.T @ gu if gu is not None else torch.zeros_like(f)
        av = v.T @ gvh.T if gvh is not None else torch.zeros_like(f)
        ju, jv = (au - au.T) / 2, (av - av.T) / 2
        inner = (f + g) * ju + (f - g) * jv
        if gs is not None:
            inner = inner + torch.diag(gs)
        return u @ inner @ vh


def lnz_per_site(beta, chi, steps):
    lam = torch.stack([2 * torch.cosh(beta), 2 * torch.sinh(beta)])
    v = torch.sqrt(lam)
    parity = torch.zeros(2, 2, 2, 2, dtype=torch.float64)
    for i in range(2):
        for j in range(2):
            for k in range(2):
                for l in range(2):
                    parity[i, j, k, l] = 0.5 if (i + j + k + l) % 2 == 0 else 0.0
    t = torch.einsum("i,j,k,l->ijkl", v, v, v, v) * parity
    lnz = torch.zeros((), dtype=torch.float64)
    for n in range(steps):
        m = t.abs().max().detach()
        t = t / m
        lnz = lnz + 2.0 ** -n * torch.log(m)
        d = t.shape[0]
        # Column-major merges as einstage's (the result does not depend on the convention).
        ma = t.permute(3, 2, 1, 0).reshape(d * d, d * d).T
        mb = t.permute(1, 2, 0, 3).permute(3, 2, 1, 0).reshape(d * d, d * d).T
        ua, sa, vha = BroadenedSvd.apply(ma)
        ub, sb, vhb = BroadenedSvd.apply(mb)
        dn = min(d * d, chi, int((sa > 1e-15).sum()), int((sb > 1e-15).sum()))
        ra, rb = torch.sqrt(sa[:dn]), torch.sqrt(sb[:dn])

        def split(x):
            return x.T.reshape(dn, d, d).permute(2, 1, 0)

        s1 = split(ua[:, :dn] * ra)
        s3 = split(vha[:dn, :].T * ra)
        s2 = split(ub[:, :dn] * rb)
        s4 = split(vhb[:dn, :].T * rb)
        t = torch.einsum("xwu,yxl,yzd,wzr->uldr", s2, s3, s4, s1)
    return lnz + 2.0 ** -steps * torch.log(torch.einsum("xyxy->", t))


def evaluate(beta_value, chi, steps):
    beta = torch.tensor(beta_value, dtype=torch.float64, requires_grad=True)
    f = lnz_per_site(beta, chi, steps)
    (d1,) = torch.autograd.grad(f, beta, create_graph=True)
    (d2,) = torch.autograd.grad(d1, beta)
    return f.item(), -d1.item(), beta_value ** 2 * d2.item()


def main(argv):
    chi, steps, beta, min_seconds, threads = int(argv[1]), int(argv[2]), float(argv[3]), float(argv[4]), int(argv[5])
    torch.set_num_threads(threads)
    values = evaluate(beta, chi, steps)  # warm-up
    best, spent, runs = float("inf"), 0.0, 0
    while runs < 3 or spent < min_seconds:
        start = time.perf_counter()
        evaluate(beta, chi, steps)
        elapsed = time.perf_counter() - start
        best, spent, runs = min(best, elapsed), spent + elapsed, runs + 1
    print(json.dumps({"lnz": values[0], "energy": values[1], "specific_heat": values[2], "seconds": best,
                      "runs": runs, "torch": torch.__version__}))


if __name__ == "__main__":
    main(sys.argv)
