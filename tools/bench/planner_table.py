#!/usr/bin/env python3
"""Markdown tables for docs/planning.md from einstage_bench_planner --json files.

    build/tools/einstage_bench_planner --budgets 0.01,0.1,1 --json planner.json
    build/tools/einstage_bench_planner --budgets 10 --no-scale --skip <n=2 files> --json planner10.json
    python3 tools/bench/planner_table.py planner.json planner10.json

Prints two tables: tc (log2 multiply-adds) per tier with the reference columns and a check of each target, and the
planning wall time (ms) with the budget overshoot ("raised": the budget was below one greedy run; "guard": the
clock guard fired, so that tree depends on timing). Later files add columns (the 10 s tier) to earlier ones.
"""
import json
import sys


def fmt(x, digits=2):
    return "—" if x is None else f"{x:.{digits}f}"


def main(paths):
    rows = {}   # instance -> {planner label -> record}
    order = []
    for path in paths:
        with open(path) as f:
            for r in json.load(f):
                name = r["instance"]
                if name not in rows:
                    rows[name] = {}
                    order.append(name)
                rows[name][r["planner"]] = r
    budgets = sorted({float(p.split()[1][:-1]) for recs in rows.values() for p in recs if p.startswith("auto(high) ")})

    def tier(recs, b):
        return recs.get(f"auto(high) {b:g}s")

    head = ["instance", "n", "oe greedy (ref)", "greedy tier", "auto"] + [f"{b:g} s" for b in budgets] + \
        ["RG-128 (ref)", "best known (ref)", "file opt_flops", "targets"]
    print("| " + " | ".join(head) + " |")
    print("|---|" + "---:|" * (len(head) - 2) + "---|")
    for name in order:
        recs = rows[name]
        if recs.get("greedy", {}).get("n", 3) <= 2:
            continue  # binary diagnostics: one possible tree
        any_rec = next(iter(recs.values()))
        oe, rg, best = any_rec.get("known_greedy_oe"), any_rec.get("known_rg128"), any_rec.get("known_best")
        file_tc = any_rec.get("file_opt_flops_tc")
        rules = [recs[p]["tc"] for p in ("greedy", "greedy(smallest_result)", "greedy(opt_einsum)") if p in recs]
        greedy_tier = min(rules) if rules else None  # best_greedy: the cheapest of the three rules
        cells = [name, str(any_rec["n"]), fmt(oe), fmt(greedy_tier), fmt(recs.get("auto", {}).get("tc"))]
        for b in budgets:
            t = tier(recs, b)
            cells.append(fmt(t["tc"]) if t else "—")
        cells += [fmt(rg), fmt(best), fmt(file_tc)]
        checks = []
        eps = 0.005
        if oe is not None and greedy_tier is not None:
            checks.append("greedy ok" if greedy_tier <= oe + eps else "greedy MISS")
        t1 = tier(recs, 1.0)
        if rg is not None and t1:
            checks.append("1s ok" if t1["tc"] <= rg + eps else "1s MISS")
        t10 = tier(recs, 10.0)
        if t10 and best is not None:
            checks.append("10s ok" if t10["tc"] <= best + 1 + eps else "10s MISS")
        if t10 and file_tc is not None:
            checks.append("file ok" if t10["tc"] <= file_tc + eps else "file MISS")
        cells.append(", ".join(checks) or "—")
        print("| " + " | ".join(cells) + " |")

    print()
    head = ["instance", "n", "greedy (memory_removed)", "greedy tier (3 rules)", "auto"] + \
        [f"{b:g} s (overshoot)" for b in budgets]
    print("| " + " | ".join(head) + " |")
    print("|---|" + "---:|" * (len(head) - 1))
    for name in order:
        recs = rows[name]
        if recs.get("greedy", {}).get("n", 3) <= 2:
            continue
        cells = [name, str(next(iter(recs.values()))["n"])]
        for p in ["greedy", "auto(fast)", "auto"]:
            cells.append(fmt(recs[p]["seconds"] * 1e3, 1) if p in recs else "—")
        for b in budgets:
            t = tier(recs, b)
            if not t:
                cells.append("—")
                continue
            over = (t["seconds"] - b) * 1e3
            flags = (", raised" if t.get("budget_raised") else "") + (", guard" if t.get("stopped_by_budget") else "")
            cells.append(f"{t['seconds'] * 1e3:.1f} ({over:+.1f}{flags})")
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
