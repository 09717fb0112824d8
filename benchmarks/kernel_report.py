"""The kernel benchmark's targets, markdown tables and chart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .kernel_workloads import FUSED, TARGETS, megabytes
from .timing import fmt_ratio, fmt_time

# -------------------------------------------------------------------------- targets


def evaluate_targets(results: dict[str, Any], tiny: bool) -> list[dict[str, Any]]:
    """The kernel targets, each measured, with met True/False (None: not evaluated on
    --tiny sizes, or the peer it compares with is not installed). A target whose own
    system (or the bound) could not be measured is missed, with the reason in note."""
    wl = results["workloads"]
    targets = []
    for key, metric, op, limit, text in TARGETS:
        system = f"{FUSED} prepared"
        t = {"target": text, "workload": key, "system": system, "metric": metric, "op": op, "limit": limit}
        t.update(value=None, met=None, note="")
        workload = wl.get(key)
        row = workload["systems"].get(system) if workload else None
        if workload is not None:
            t["residency"] = workload.get("residency")
        if tiny:
            t["note"] = "not evaluated on --tiny sizes"
        elif workload is None:
            t["note"] = "workload not run"
        elif row is None:
            why = workload["failed"].get(system) or workload["failed"].get(FUSED)
            why = why or workload["not_applicable"].get(FUSED) or f"no backend named {FUSED!r} was found"
            t.update(met=False, note=f"{system} not measured: {why}")
        elif metric == "x_bound" and row["x_bound"] is None:
            t.update(met=False, note="the memory bound was not measured")
        elif metric == "vs_numexpr" and "numexpr" not in workload["systems"]:
            why = workload["skipped"].get("numexpr") or workload["failed"].get("numexpr", "not measured")
            t.update(met=None if "numexpr" in workload["skipped"] else False, note=f"numexpr: {why}")
        else:
            value = {
                "x_bound": row["x_bound"],
                "vs_numpy": row["speedup_vs_numpy"],
                "vs_numexpr": workload["systems"]["numexpr"]["median_s"] / row["median_s"],
            }[metric]
            t["value"] = value
            t["met"] = bool(value <= limit if op == "<=" else value >= limit if op == ">=" else value > limit)
        targets.append(t)
    return targets


def failures(results: dict[str, Any]) -> list[dict[str, str]]:
    """Every system that failed to build, to run or to compute the right result, per
    workload: each one fails the suite (a peer that is not installed is only skipped)."""
    return [
        {"workload": key, "system": system, "error": error}
        for key, w in results["workloads"].items()
        for system, error in w["failed"].items()
    ]


def target_value(t: dict[str, Any]) -> str:
    if t["value"] is None:
        return "-"
    if t["metric"] == "x_bound":
        return f"{t['value']:.2f}x the {t.get('residency') or 'memory'} bound"
    other = "numexpr" if t["metric"] == "vs_numexpr" else "numpy eager"
    return f"{t['value']:.2f}x faster than {other}"


def status(t: dict[str, Any]) -> str:
    if t["met"] is None:
        return f"n/a ({t['note']})" if t["note"] else "n/a"
    if t["met"]:
        return "met"
    return f"MISSED ({t['note']})" if t["note"] else "MISSED"


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
                f"; {megabytes(w['bytes_moved'])} read + written, {w['residency']}-resident; "
                f"memory bound {fmt_time(w['bound_s'])} ({w['bound_gb_per_s']:.1f} GB/s, "
                f"{w['bound_system'].removeprefix('memory bound: ')})"
            )
        out += [head, ""]
        bound = f"x {w['residency']} bound" if w["bound_s"] else "x bound"
        out.append(f"| system | median | IQR | speedup vs numpy eager | {bound} | check | target |")
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
        if w["failed"]:
            out.append("FAILED: " + "; ".join(f"{k}: {v}" for k, v in w["failed"].items()))
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
        out.append(f"| {t['target']} | {target_value(t)} | {status(t)} |")
    if results["failures"]:
        out += [
            "",
            "### failures (each fails the suite)",
            "",
            "| workload | system | error |",
            "| --- | --- | --- |",
        ]
        out += [f"| {f['workload']} | {f['system']} | {f['error']} |" for f in results["failures"]]
    m = results["machine"]
    p = results["peers"]
    caches = ", ".join(f"{k} {megabytes(v)}" for k, v in m.get("caches", {}).items())
    out.append(
        f"\n{m['cpu']}, {m['cores']} cores ({caches}); {m['compiler']}; numpy {m['numpy']}, "
        f"numexpr {p['numexpr'] or 'absent'} ({p['numexpr_threads'] or '-'} threads), TVM {p['tvm'] or 'absent'}, "
        f"ONNX Runtime {p['onnxruntime'] or 'absent'}; {results['rounds']} rounds, medians"
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
