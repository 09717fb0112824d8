"""The kernel benchmark's targets, markdown tables and chart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .kernel_workloads import FUSED, TARGETS, megabytes
from .timing import fmt_ratio, fmt_time

# -------------------------------------------------------------------------- targets


def evaluate_targets(results: dict[str, Any], tiny: bool) -> list[dict[str, Any]]:
    """The kernel targets, each measured, with met True/False (None: not measurable)."""
    wl = results["workloads"]
    targets = []
    label = FUSED
    for key, metric, op, limit, text in TARGETS:
        t = {
            "target": text,
            "workload": key,
            "system": f"{label} prepared",
            "metric": metric,
            "op": op,
            "limit": limit,
        }
        t.update(value=None, met=None, note="")
        workload = wl.get(key)
        row = workload["systems"].get(f"{label} prepared") if workload else None
        if tiny:
            t["note"] = "not evaluated on --tiny sizes"
        elif workload is None:
            t["note"] = "workload not run"
        elif row is None:
            reason = workload["not_applicable"].get(label)
            t["note"] = f"{label}: {reason}" if reason else f"no backend named {label!r} was found"
        elif row["correct"] is False:
            t["note"] = "wrong result"
        else:
            value = None
            if metric == "x_bound":
                value = row["x_bound"]
            elif metric == "vs_numpy":
                value = row["speedup_vs_numpy"]
            elif metric == "vs_numexpr":
                ne = workload["systems"].get("numexpr")
                value = ne["median_s"] / row["median_s"] if ne else None
                if ne is None:
                    t["note"] = workload["skipped"].get("numexpr", "numexpr not measured")
            if value is not None:
                t["value"] = value
                t["met"] = bool(
                    value <= limit if op == "<=" else value >= limit if op == ">=" else value > limit
                )
        targets.append(t)
    return targets


def _target_value(t: dict[str, Any]) -> str:
    if t["value"] is None:
        return "-"
    if t["metric"] == "x_bound":
        return f"{t['value']:.2f}x the bound"
    other = "numexpr" if t["metric"] == "vs_numexpr" else "numpy eager"
    return f"{t['value']:.2f}x faster than {other}"


def status(t: dict[str, Any]) -> str:
    if t["met"] is None:
        return f"n/a ({t['note']})" if t["note"] else "n/a"
    return "met" if t["met"] else "MISSED"


# ------------------------------------------------------------------------- printing


def markdown(results: dict[str, Any]) -> str:
    out = []
    marks: dict[tuple[str, str], list[str]] = {}
    for t in results["targets"]:
        short = {"x_bound": f"<= {t['limit']:.2f}x bound", "vs_numexpr": "< numexpr"}.get(
            t["metric"], f"{t['op']} {t['limit']:g}x vs numpy"
        )
        marks.setdefault((t["workload"], t["system"]), []).append(f"{short}: {status(t).split(' (')[0]}")
    for key, w in results["workloads"].items():
        head = f"### {key}: {w['title']}\n\n{w['shape']}"
        if w["bound_s"]:
            head += (
                f"; {megabytes(w['bytes_moved'])} read + written; bound {fmt_time(w['bound_s'])} "
                f"({w['bound_gb_per_s']:.1f} GB/s)"
            )
        out += [head, ""]
        out.append("| system | median | IQR | speedup vs numpy eager | x bound | check | target |")
        out.append("| --- | ---: | ---: | ---: | ---: | --- | --- |")
        for name, r in w["systems"].items():
            if r["group"] == "ffi":
                continue
            check = {True: "ok", False: "WRONG", None: "-"}[r["correct"]]
            iqr = f"{fmt_time(r['p25_s'])}-{fmt_time(r['p75_s'])}"
            target = "; ".join(marks.get((key, name), []))
            out.append(
                f"| {name} | {fmt_time(r['median_s'])} | {iqr} | {fmt_ratio(r['speedup_vs_numpy'])} | "
                f"{fmt_ratio(r['x_bound'])} | {check} | {target} |"
            )
        notes = [f"{k}: {v}" for k, v in w["not_applicable"].items()]
        if notes:
            out.append("\nnot expressible by: " + "; ".join(notes))
        if w["skipped"]:
            out.append("skipped peers: " + "; ".join(f"{k}: {v}" for k, v in w["skipped"].items()))
        out.append("")
    co = results.get("call_overhead")
    if co and co["backends"]:
        out += ["### prepared-call fast path (guide subgraph, 10x10; median per call)", ""]
        out.append(
            "| backend | prepared() | raw tvm_ffi, prebuilt tensors | raw tvm_ffi, numpy arrays "
            "| get_function(*arrays) | prepared - raw | prepared vs numpy eager |"
        )
        out.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
        for label, b in co["backends"].items():
            out.append(
                f"| {label} | {fmt_time(b['prepared_s'])} | {fmt_time(b['raw_tensors_s'])} | "
                f"{fmt_time(b.get('raw_numpy_s'))} | {fmt_time(b.get('get_function_s'))} | "
                f"{b['prepared_overhead_s'] * 1e9:+.0f} ns | "
                f"{fmt_ratio(co['numpy_eager_s'] / b['prepared_s'])} faster |"
            )
        floor = f"tvm_ffi's own call cost (testing.nop, same argument count): {fmt_time(co['tvm_ffi_nop_s'])}"
        out.append(f"\n{floor}; numpy eager on the same expression: {fmt_time(co['numpy_eager_s'])}\n")
    out += ["### kernel targets", "", "| target | measured | status |", "| --- | --- | --- |"]
    for t in results["targets"]:
        out.append(f"| {t['target']} | {_target_value(t)} | {status(t)} |")
    m = results["machine"]
    p = results["peers"]
    out.append(
        f"\n{m['cpu']}, {m['cores']} cores; {m['compiler']}; numpy {m['numpy']}, "
        f"numexpr {p['numexpr'] or 'absent'} ({p['numexpr_threads'] or '-'} threads), TVM {p['tvm'] or 'absent'}; "
        f"{results['rounds']} rounds, medians"
    )
    return "\n".join(out)


def chart(results: dict[str, Any], path: Path) -> Path | None:
    """A PNG of the medians per workload (log scale), when matplotlib is installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    workloads = list(results["workloads"].items())
    heights = [max(len(w["systems"]), 1) for _, w in workloads]
    fig, axes = plt.subplots(
        len(workloads),
        1,
        figsize=(9, 1.2 * len(workloads) + 0.28 * sum(heights)),
        squeeze=False,
        gridspec_kw={"height_ratios": heights},
    )
    colours = {"byoc": "tab:blue", "peer": "tab:orange", "bound": "tab:grey", "ffi": "tab:green"}
    for ax, (key, w) in zip(axes[:, 0], workloads):
        names = list(w["systems"])
        times = [w["systems"][n]["median_s"] for n in names]
        ax.barh(names, times, color=[colours[w["systems"][n]["group"]] for n in names])
        ax.set_xscale("log")
        ax.invert_yaxis()
        ax.set_title(f"{key}: {w['title']}", fontsize=9)
        ax.tick_params(labelsize=7)
        ax.set_xlabel("median seconds per call (log)", fontsize=7)
        if w["bound_s"]:
            ax.axvline(w["bound_s"], color="black", linestyle="--", linewidth=0.8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
