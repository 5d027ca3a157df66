"""The gate's state for people: its threshold, how it was set, and the calibration's sweep."""

from __future__ import annotations

from typing import Any

from bot.builder import Builder
from retrieval.search import DEFAULT_THRESHOLD, Calibration, format_calibration

Say = Any  # click.echo-like: (message, err=...) -> None


def calibration(b: Builder, compute: bool, say: Say = None) -> Calibration | None:
    """The calibration of the current index (computed now if asked and missing), or None."""
    if b.settings.gate_threshold is not None:
        return None
    cal = b.calibrator.current()
    if cal is None and compute:
        if say is not None:
            say("Calibrating the gate on this index …", err=True)
        cal = b.calibrator.ensure()
    return cal


def gate_text(b: Builder, compute: bool, say: Say = None) -> str:
    s = b.settings
    if s.gate_threshold is not None:
        return f"Gate: fixed threshold {s.gate_threshold:.3f} (FOOTNOTE_GATE_THRESHOLD); self-calibration is off."
    cal = calibration(b, compute, say)
    if cal is not None:
        return format_calibration(cal)
    last = b.calibrator.latest()
    default = f"{DEFAULT_THRESHOLD:.2f} (the uncalibrated default)"
    using = f"{last.threshold:.3f} from an earlier index" if last else default
    return f"Gate: not calibrated for this index yet (`footnote serve` does it after a sync, or `footnote status --calibrate`); using {using}."


def gate_json(b: Builder, compute: bool, say: Say = None) -> dict[str, Any]:
    cal = calibration(b, compute, say)
    return {
        "threshold": b.gate_config().current().threshold,
        "explicit": b.settings.gate_threshold is not None,
        "calibration": {k: v for k, v in cal.as_json().items() if k != "signals"} if cal else None,
    }
