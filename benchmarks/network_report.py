"""The networks suite's ratios, targets and markdown tables."""

from __future__ import annotations

import re
from typing import Any

from .timing import fmt_ratio, fmt_time

REFERENCES = {  # ratio column -> the paths whose fastest system is the reference
    "x_onednn": ("dnnl_plain", "dnnl_any"),
    "x_sgemm": ("sgemm",),
    "x_numpy": ("numpy",),
    "x_ort": ("ort_1", "ort_2"),
}
HEADINGS = {
    "x_onednn": "x oneDNN direct",
    "x_sgemm": "x sgemm direct",
    "x_numpy": "x numpy",
    "x_ort": "x best ORT",
}
TARGETS = (  # (workload, system, metric, op, limit, text)
    (
        "conv3x3",
        "byoc dnnl prepared, constant weights",
        "x_onednn",
        "<=",
        1.10,
        "dnnl conv2d+bias+relu: within 1.10x of oneDNN called directly",
    ),
    (
        "conv3x3",
        "byoc dnnl prepared, constant weights",
        "x_ort",
        "<=",
        1.0,
        "dnnl conv2d+bias+relu: at least as fast as ONNX Runtime (best threads)",
    ),
    (
        "conv3x3_int8",
        "byoc dnnl prepared",
        "x_onednn",
        "<=",
        1.10,
        "dnnl int8 conv2d+bias+relu (QDQ): within 1.10x of oneDNN's int8 convolution called directly",
    ),
    (
        "conv3x3_int8",
        "byoc dnnl prepared",
        "x_ort",
        "<=",
        1.0,
        "dnnl int8 conv2d+bias+relu (QDQ): at least as fast as ONNX Runtime's int8 run (best threads)",
    ),
    (
        "light_resnet50",
        "byoc dnnl,fused executor.run()",
        "x_ort",
        "<=",
        1.0,
        "dnnl,fused ResNet-50 end to end: at least as fast as ONNX Runtime (best threads)",
    ),
    (
        "basic_block",
        "byoc dnnl,fused executor.run(), constant weights",
        "x_ort",
        "<=",
        1.10,
        "dnnl,fused ResNet basic block: within 1.10x of ONNX Runtime (best threads)",
    ),
    (
        "dense",
        "byoc cblas prepared",
        "x_sgemm",
        "<=",
        1.05,
        "cblas dense 1024: within 1.05x of sgemm called directly",
    ),
    (
        "dense",
        "byoc cblas prepared",
        "x_numpy",
        "<=",
        1.05,
        "cblas dense 1024: within 1.05x of numpy's matmul",
    ),
    (
        "conv3x3",
        "byoc fused prepared",
        "x_peak",
        ">=",
        0.25,
        "fused conv2d (plain C): at least 25% of the machine's peak FLOP rate",
    ),
    (
        "dense",
        "byoc fused prepared",
        "x_peak",
        ">=",
        0.5,
        "fused dense 1024x1024x1024 (plain C): at least 50% of the machine's peak FLOP rate",
    ),
    (
        "dense_10",
        "byoc cblas prepared",
        "overhead_sgemm_s",
        "<",
        2e-6,
        "cblas prepared call at 10x10 dense: under 2 µs over sgemm called directly",
    ),
    (
        "dense_10",
        "byoc dnnl prepared",
        "overhead_onednn_s",
        "<",
        2e-6,
        "dnnl prepared call at 10x10 dense: under 2 µs over oneDNN called directly",
    ),
    (
        "matmul_attention",
        "byoc dnnl,fused prepared",
        "x_onednn",
        "<=",
        1.10,
        "dnnl,fused batched matmul 12x128x64x128: within 1.10x of oneDNN called directly",
    ),
    (
        "matmul_attention",
        "byoc cblas,fused prepared",
        "x_sgemm",
        "<=",
        1.10,
        "cblas,fused batched matmul 12x128x64x128: within 1.10x of sgemm called directly",
    ),
    (
        "matmul_linear",
        "byoc dnnl,fused prepared",
        "x_onednn",
        "<=",
        1.10,
        "dnnl,fused matmul 1x128x768 @ 768x3072: within 1.10x of oneDNN called directly",
    ),
    (
        "matmul_linear",
        "byoc cblas,fused prepared",
        "x_sgemm",
        "<=",
        1.10,
        "cblas,fused matmul 1x128x768 @ 768x3072: within 1.10x of sgemm called directly",
    ),
    *(
        target
        for key, title in (
            ("bert_base", "BERT-base"),
            ("gpt2_small", "GPT-2-small"),
            ("llama_style", "Llama-style"),
        )
        for target in (
            (
                key,
                "byoc dnnl,fused executor.run()",
                "x_ort",
                "<=",
                1.0,
                f"dnnl,fused {title} end to end: at least as fast as ONNX Runtime (best threads)",
            ),
            (
                key,
                "byoc fused executor.run()",
                "x_ort",
                "<=",
                1.5,
                f"fused {title} end to end (no library): within 1.5x of ONNX Runtime (best threads)",
            ),
        )
    ),
)


def ratios(w: dict[str, Any], run_peak: float | None = None) -> dict[str, Any]:
    """The workload's references (fastest of each kind) and peak, and each row's ratios;
    the peak is at least ``run_peak``, the best the probe attained in the whole run."""
    rows = w["systems"]
    refs = {}
    for column, paths in REFERENCES.items():
        found = {n: r["median_s"] for n, r in rows.items() if r["path"] in paths}
        refs[column] = min(found.items(), key=lambda kv: kv[1]) if found else None
    # the peak is the best rate the FMA probe attained (its fastest sample), so that a
    # busy second core does not lower it: fractions of it are never overstated
    peaks = {r["threads"]: r["flops"] / r["min_s"] for r in rows.values() if r["group"] == "peak"}
    peak = max([*peaks.values(), *([run_peak] if run_peak else [])], default=None)
    isa = next((r["isa"] for r in rows.values() if r["group"] == "peak"), None)
    for r in rows.values():
        t = r["median_s"]
        for column, ref in refs.items():
            r[column] = t / ref[1] if ref else None
        r["gflop_per_s"] = w["flops"] / t / 1e9 if w["flops"] and r["group"] != "peak" else None
        r["x_peak"] = r["gflop_per_s"] * 1e9 / peak if peak and r["gflop_per_s"] else None
        r["overhead_sgemm_s"] = t - refs["x_sgemm"][1] if refs["x_sgemm"] else None
        r["overhead_onednn_s"] = t - refs["x_onednn"][1] if refs["x_onednn"] else None
    return {
        "references": {k: (v[0] if v else None) for k, v in refs.items()},
        "peak_flop_per_s": peak,
        "peak_by_threads": {str(k): v for k, v in peaks.items()},
        "peak_isa": isa,
    }


def evaluate_targets(results: dict[str, Any], tiny: bool) -> list[dict[str, Any]]:
    """Each target measured, met True/False (None: not evaluated on --tiny sizes, or the
    peer it compares with is not installed); a target whose system or reference was
    not measured is missed, with the reason in note."""
    targets = []
    for key, system, metric, op, limit, text in TARGETS:
        t = {"target": text, "workload": key, "system": system, "metric": metric, "op": op, "limit": limit}
        t.update(value=None, met=None, note="")
        w = results["workloads"].get(key)
        row = w["systems"].get(system) if w else None
        column = metric if metric.startswith("x_") else "x_" + metric.split("_")[1]
        if tiny:
            t["note"] = "not evaluated on --tiny sizes"
        elif w is None:
            t["note"] = "workload not run"
        elif row is None:
            label = re.sub(r" (prepared|executor\.run\(\))", "", system.removeprefix("byoc "))
            missing = w["skipped"].get(f"byoc {label.split(', ')[0]}")
            if missing:  # its library is not installed: not evaluated, like a missing peer
                t["note"] = f"{system} not measured: {missing}"
            else:
                why = w["failed"].get(f"byoc {label}") or w["not_applicable"].get(label) or "not measured"
                t.update(met=False, note=f"{system} not measured: {why}")
        elif row.get(metric) is None:
            peer = "ONNX Runtime" if column == "x_ort" else None
            if peer and peer in w["skipped"]:
                t["note"] = f"{peer}: {w['skipped'][peer]}"
            else:
                t.update(met=False, note=f"no reference for {HEADINGS.get(column, 'the peak')} was measured")
        else:
            value = row[metric]
            t["value"] = value
            t["met"] = bool(value <= limit if op == "<=" else value >= limit if op == ">=" else value < limit)
        targets.append(t)
    return targets


def failures(results: dict[str, Any]) -> list[dict[str, str]]:
    return [
        {"workload": key, "system": system, "error": error}
        for key, w in results["workloads"].items()
        for system, error in w["failed"].items()
    ]


def target_value(t: dict[str, Any]) -> str:
    if t["value"] is None:
        return "-"
    if t["metric"] == "x_peak":
        return f"{t['value'] * 100:.1f}% of peak"
    if t["metric"].startswith("overhead"):
        return f"{t['value'] * 1e6:+.2f} µs"
    return f"{t['value']:.2f}x the time of {HEADINGS[t['metric']].removeprefix('x ')}"


def status(t: dict[str, Any]) -> str:
    if t["met"] is None:
        return f"n/a ({t['note']})" if t["note"] else "n/a"
    if t["met"]:
        return "met"
    return f"MISSED ({t['note']})" if t["note"] else "MISSED"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x * 100:.1f}%"


def markdown(results: dict[str, Any]) -> str:
    out = []
    columns = list(HEADINGS)
    for key, w in results["workloads"].items():
        out += [f"### {key}: {w['title']}", ""]
        if w["peak_by_threads"]:  # a workload without FLOPs (a whole network) has no peak rows
            per = ", ".join(
                f"{k} thread{'s' * (k != '1')} {v / 1e9:.0f}" for k, v in w["peak_by_threads"].items()
            )
            probe = f"{w['peak_isa']} FMA" if w.get("peak_isa") else "FMA"
            out += [
                f"peak ({probe}, fastest sample of the same run): {per} GFLOP/s",
                "",
                "GFLOP/s and % peak count the direct algorithm's multiply-adds; one that multiplies "
                "less (the dnnl backend's Winograd, for 3x3 convs) can pass 100%.",
                "",
            ]
        out.append(
            "| system | median | IQR | rounds | GFLOP/s | % peak | "
            + " | ".join(HEADINGS[c] for c in columns)
            + " | check |"
        )
        out.append(
            "| --- | ---: | ---: | ---: | ---: | ---: | " + " | ".join("---:" for _ in columns) + " | --- |"
        )
        for name, r in w["systems"].items():
            if r["group"] == "peak":
                continue
            check = {True: "ok", False: "WRONG", None: "-"}[r["correct"]]
            if r["correct"] is False and r.get("caveat"):
                check = f"differs by {r['max_abs_error']:.3g}: {r['caveat']}"
            gf = "-" if r["gflop_per_s"] is None else f"{r['gflop_per_s']:.1f}"
            cells = " | ".join(fmt_ratio(r[c]) for c in columns)
            out.append(
                f"| {name} | {fmt_time(r['median_s'])} | {fmt_time(r['p25_s'])}-{fmt_time(r['p75_s'])} | {r['samples']} | {gf} | "
                f"{_pct(r['x_peak'])} | {cells} | {check} |"
            )
        for title, items in (
            ("not expressible by", w["not_applicable"]),
            ("skipped (not installed, or not computed on this CPU)", w["skipped"]),
            ("not run", w["not_run"]),
            ("FAILED", w["failed"]),
        ):
            if items:
                out.append(f"\n{title}: " + "; ".join(f"{k}: {v}" for k, v in items.items()))
        impls = [f"{n}: {r['impl']}" for n, r in w["systems"].items() if r.get("impl")]
        if impls:
            out.append("\noneDNN implementations: " + "; ".join(impls))
        out.append("")
    out += ["### network targets", "", "| target | measured | status |", "| --- | --- | --- |"]
    out += [f"| {t['target']} | {target_value(t)} | {status(t)} |" for t in results["targets"]]
    if results["failures"]:
        out += [
            "",
            "### failures (each fails the suite)",
            "",
            "| workload | system | error |",
            "| --- | --- | --- |",
        ]
        out += [f"| {f['workload']} | {f['system']} | {f['error']} |" for f in results["failures"]]
    m, p = results["machine"], results["peers"]
    out.append(
        f"\n{m['cpu']}, {m['cores']} cores; {m['compiler']}; numpy {m['numpy']}, TVM {p['tvm'] or 'absent'}, "
        f"ONNX Runtime {p['onnxruntime'] or 'absent'}; GOMP_SPINCOUNT {m.get('GOMP_SPINCOUNT') or 'unset'}, "
        f"OPENBLAS_THREAD_TIMEOUT {m.get('OPENBLAS_THREAD_TIMEOUT') or 'unset'}, "
        f"OPENBLAS_CORETYPE {m.get('OPENBLAS_CORETYPE') or 'unset'}; "
        f"{results['rounds']} rounds, medians; "
        "x columns are time / the reference's time (below 1.00x is faster)"
    )
    return "\n".join(out)
