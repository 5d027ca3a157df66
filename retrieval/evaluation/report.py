"""How ``footnote eval`` shows its results: a terminal table and matplotlib plots.

``format_eval`` is pure (report in, text out). ``write_plots`` is the only place
matplotlib is imported, lazily, so the bot never pays for it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from retrieval.evaluation.suite import KS, EvalReport

_ORDER = ("default", "rewrite", "hybrid", "bm25", "A", "B", "C", "D", "E", "F")


def _row(name: str, s: dict[str, Any]) -> str:
    r, w = s["recall_at"], s["wilson"]
    cells = " ".join(f"{r[str(k)]:.3f}" for k in KS)
    return (
        f"{name:8} {cells}  {s['mrr']:.3f}  {s['destroyed']:3}  {s['context_chars']:6.0f}  "
        f"[{w['20'][0]:.3f}, {w['20'][1]:.3f}]  {s['label']}"
    )


def format_eval(report: EvalReport) -> str:
    data = report.as_json()
    every = {"default": data["default"], **data["strategies"]}
    n = data["default"]["n"]
    lines = [
        f"Retrieval on {n} questions (hit = a passage containing the whole needle)",
        f"{'strategy':8} {'R@1':>5} {'R@4':>5} {'R@8':>5} {'R@20':>5}  {'MRR':>5}  lost  ctx/4  R@20 95% Wilson   what",
    ]
    lines += [_row(name, every[name]) for name in _ORDER if name in every]
    if data.get("absent_needles"):
        ids = data["absent_needles"]
        lines.append(
            f"warning: {len(ids)} needle(s) are in no document ({', '.join(map(str, ids[:5]))}"
            f"{', …' if len(ids) > 5 else ''}): every strategy misses them, and they are not counted as lost; "
            "check the questions against these documents"
        )
    if data.get("untranslated"):
        lines.append(
            f"warning: {data['untranslated']} of the questions could not be translated into the drive's language "
            "(a busy CPU or a failing model) and were searched as asked: their figures are lower; run the eval alone"
        )
    for name in ("default", "rewrite"):
        styles = every.get(name, {}).get("by_style")
        if not styles:
            continue
        lines.append("")
        lines.append(f"By question style ({'default pipeline' if name == 'default' else 'default + rewrite'}):")
        for style, s in styles.items():
            r = s["recall_at"]
            lines.append(
                f"  {style:10} n={s['n']:3}  R@1 {r['1']:.3f}  R@4 {r['4']:.3f}  R@20 {r['20']:.3f}  MRR {s['mrr']:.3f}"
            )
    lines.append("")
    lines.append("Paired exact sign tests (two-sided, discordant pairs):")
    for t in data["sign_tests"]:
        lines.append(f"  {t['a']:>7} vs {t['b']:<7} at R@{t['k']:<2}  +{t['wins']}/−{t['losses']}, p = {t['p']:.4f}")
    if data["refusal_sweep"]:
        lines.append("")
        g = report.gate
        sentence = f" + {g.sentence_weight:g} × nearest sentence's distance" if g.sentence_weight else ""
        lines.append(
            f"Refusal sweep (gate = nearest chunk's distance{sentence} + {g.coverage_weight:g} × (1 − idf coverage)):"
        )
        lines.append("  threshold  bluffs  answerable refused")
        for r in data["refusal_sweep"]:
            mark = "  ← default" if r["default"] else ""
            lines.append(f"  {r['threshold']:9.2f}  {r['bluffs']:3}/{r['of']:<3} {r['refused']:3}/{n}{mark}")
        lines.append("")
        lines.append("Gate signal (lower = more relevant):")
        for name, vals in data["gate_signal"].items():
            if vals:
                s = sorted(vals)
                lines.append(
                    f"  {name:9} n={len(s):3}  min {s[0]:.3f}  median {s[len(s) // 2]:.3f}  max {s[-1]:.3f}  {_spark(s)}"
                )
        if data.get("gate_by_style"):
            lines.append("")
            lines.append("Gate by question style (AUC against unanswerable questions of the same style):")
            for style, g in data["gate_by_style"].items():
                lines.append(
                    f"  {style:10} AUC {g['auc']:.3f}  refused {g['refused']}/{g['n']}  "
                    f"unanswerable let through {g['bluffs']}/{g['n_ood']}"
                )
        if data.get("gate_auc"):
            lines.append("")
            lines.append("Gate evidence, AUC in-domain vs out-of-domain (1 = separates perfectly, 0.5 = chance):")
            for name, value in data["gate_auc"].items():
                lines.append(f"  {name:28} {value:.3f}")
    return "\n".join(lines)


def format_paired(paired: list[dict[str, Any]], earlier: object) -> str:
    """Paired sign tests of this run's ranks against an earlier run's."""
    lines = [f"Paired against {earlier} (exact sign test, two-sided; + this run finds it, − only the earlier did):"]
    for t in paired:
        lines.append(f"  {t['style']:8} R@{t['k']}  n={t['n']:3}  +{t['wins']}/−{t['losses']}, p = {t['p']:.4f}")
    return "\n".join(lines)


def _spark(values: list[float], lo: float = 0.2, hi: float = 1.2, bins: int = 20) -> str:
    """A one-line histogram over [lo, hi] so the two distributions can be compared by eye."""
    counts = [0] * bins
    for v in values:
        counts[min(bins - 1, max(0, int((v - lo) / (hi - lo) * bins)))] += 1
    top = max(counts) or 1
    return f"{lo:.1f}|" + "".join(" ▁▂▃▄▅▆▇█"[round(c / top * 8)] for c in counts) + f"|{hi:.1f}"


def write_plots(report: EvalReport, out_dir: Path) -> list[Path]:
    """recall@k per strategy with 95 % interval bars, and the refusal sweep with both signal distributions."""
    import matplotlib

    matplotlib.use("Agg")  # no display on servers
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    data = report.as_json()
    every = {"default": data["default"], **data["strategies"]}
    names = [n for n in _ORDER if n in every]

    fig, ax = plt.subplots(figsize=(9, 4.5))
    width = 0.8 / len(KS)
    for j, k in enumerate(KS):
        vals = [every[n]["recall_at"][str(k)] for n in names]
        lo = [v - every[n]["wilson"][str(k)][0] for v, n in zip(vals, names, strict=True)]
        hi = [every[n]["wilson"][str(k)][1] - v for v, n in zip(vals, names, strict=True)]
        xs = [i + (j - (len(KS) - 1) / 2) * width for i in range(len(names))]
        ax.bar(xs, vals, width, yerr=[lo, hi], capsize=2, label=f"R@{k}")
    ax.set_xticks(range(len(names)), names)
    ax.set_ylim(0, 1)
    ax.set_ylabel("recall (95 % Wilson)")
    ax.set_title(f"Recall@k per strategy, {data['default']['n']} questions")
    ax.legend(ncol=len(KS), fontsize="small")
    recall_png = out_dir / "recall.png"
    fig.tight_layout()
    fig.savefig(recall_png, dpi=120)
    plt.close(fig)
    written = [recall_png]

    if data["refusal_sweep"]:
        fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.5))
        sweep = data["refusal_sweep"]
        ts = [r["threshold"] for r in sweep]
        left.plot(ts, [r["bluffs"] for r in sweep], marker="o", label="bluffs (OOD answered)")
        left.plot(ts, [r["refused"] for r in sweep], marker="s", label="answerable refused")
        left.axvline(report.gate.threshold, color="grey", linestyle="--", label="default")
        left.set_xlabel("gate threshold")
        left.set_ylabel("questions")
        left.set_title("Refusal sweep")
        left.legend(fontsize="small")
        sig = data["gate_signal"]
        right.hist([sig["in_domain"], sig["ood"]], bins=20, label=["in-domain", "out-of-domain"])
        right.axvline(report.gate.threshold, color="grey", linestyle="--")
        right.set_xlabel("gate signal (lower = more relevant)")
        right.set_title("Gate signal distributions")
        right.legend(fontsize="small")
        sweep_png = out_dir / "refusal_sweep.png"
        fig.tight_layout()
        fig.savefig(sweep_png, dpi=120)
        plt.close(fig)
        written.append(sweep_png)
    return written


def _share(label: str, s: dict[str, Any]) -> str:
    lo, hi = s["wilson"]
    return f"  {label:34} {s['k']:3}/{s['n']:<3} {s['share']:.3f}  [{lo:.3f}, {hi:.3f}]"


def format_answers(answers: dict[str, Any]) -> str:
    """The answer-level figures of ``footnote eval --answers``."""
    s = answers["summary"]
    lines = [
        "",
        f"Answers ({answers['model']}; {s['questions']} questions, {s['ood']} out-of-domain; 95 % Wilson):",
        _share("answered", s["answered"]),
        _share("answered with >= 1 citation", s["cited_of_answered"]),
        _share("a cited span contains the needle", s["evidence_hit"]),
        f"  {'needle content words in the answer':34} mean {s['needle_share_mean']:.3f}",
        _share("out-of-domain answered (bluffs)", s["ood_answered"]),
        f"  support check: {s['removed']} sentences removed, {s['reattributed']} re-attributed, "
        f"{s['shown_as_evidence']} answers shown as the evidence itself",
        f"  answer time (model called): p50 {s['seconds_p50']:.2f} s, p95 {s['seconds_p95']:.2f} s",
    ]
    failed, replay_failed = s.get("failed", 0), answers.get("replay_failed", 0)  # 0 in an older run's JSON
    if answers.get("replayed") is not None:
        lines.append(
            f"  replayed {answers['replay_file']}: {answers['replayed']} passages confirmed before scoring"
            + (f" ({replay_failed} questions got no answer, so nothing to confirm)" if replay_failed else "")
        )
    if failed or replay_failed:
        # A figure lowered by failures measures the machine, not the drive: say so where it is read.
        lines.append(
            f"  warning: {failed} scored and {replay_failed} replayed questions got an "
            "error, not an answer (counted as refused): a busy CPU or a failing model; run the eval alone"
        )
    for p in answers.get("paired", []):
        lines.append(f"  vs earlier run, {p['metric']:21} +{p['wins']}/−{p['losses']}, p = {p['p']:.4f}")
    lines += [
        "",
        "Outcomes (answerable: needle cited in an answer / answered, not cited / needle quoted by a pointer /",
        "pointed, not quoted / dead ends, i.e. refused; unanswerable: answered / pointed / refused):",
    ]
    styles = answers.get("by_style") or {"all": s}
    for style, st in styles.items():
        lines.append(_outcome_line(style, st["outcomes"]))
        for p in answers.get("paired_by_style", {}).get(style, []):
            lines.append(f"    vs earlier run, {p['metric']:21} +{p['wins']}/−{p['losses']}, p = {p['p']:.4f}")
    return "\n".join(lines)


def _k(o: dict[str, Any], name: str) -> str:
    """k of a share an older run's JSON may not hold ("–")."""
    return str(o[name]["k"]) if name in o else "–"


def _outcome_line(style: str, o: dict[str, Any]) -> str:
    def k(name: str) -> str:
        return f"{o[name]['k']}/{o[name]['n']}"

    return (
        f"  {style:10} cited {k('cited')} (the cited sentence alone {_k(o, 'cited_sentence')}), answered {o['answered_not_cited']['k']}, quoted {k('quoted')}, "
        f"pointed {o['pointed_not_quoted']['k']}, dead ends {o['dead_ends']['k']} (shown {k('shown')}; "
        f"{o['learned']} from learned pairs; in the asker's language {k('in_the_askers_language')}) | "
        f"unanswerable answered {k('ood_answered')}, pointed "
        f"{o['ood_pointed']['k']}, refused {o['ood_refused']['k']}; pointer p50 {o['pointer_seconds_p50'] * 1000:.0f} ms"
    )
