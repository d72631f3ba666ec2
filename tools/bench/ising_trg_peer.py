#!/usr/bin/env python3
"""PyTorch peer of the Ising TRG benchmark (tools/bench/ising.cpp): the same algorithm as examples/ising/Trg.h
(Levin-Nave TRG, max|T| normalisation, full SVDs, D' = min(D^2, chi, #(S > 1e-15))), with u and c by
torch.autograd.grad(..., create_graph=True) twice, as in Liao et al.'s code. f64, CPU.

usage: ising_trg_peer.py CHI STEPS BETA MIN_SECONDS THREADS   prints one JSON object:
  {"lnz", "energy", "specific_heat", "seconds"}  (seconds: best wall time of one value+u+c evaluation)
"""
import json
import sys
import time

import torch


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
        ua, sa, vha = torch.linalg.svd(ma)
        ub, sb, vhb = torch.linalg.svd(mb)
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
