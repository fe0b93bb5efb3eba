"""How ``pai experiment`` shows experiments, their trials and a trial's metrics (the master's JSON in, text out)."""

from __future__ import annotations

from typing import Any

from pai.cli.output import MISSING, format_time, render_table

LIST_HEADERS = ("NAME", "STATE", "SEARCHER", "TRIALS", "BEST")
TRIAL_STATES = ("WAITING", "RUNNING", "COMPLETED", "STOPPED", "FAILED")  # the order TRIALS counts them in


def format_value(value: object) -> str:
    """A metric or hyperparameter: six significant digits for a float, anything else as it is."""
    if value is None:
        return MISSING
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def _smaller_is_better(searcher: dict[str, Any]) -> bool:
    return bool(searcher.get("smallerIsBetter", True))


def _searcher(searcher: dict[str, Any]) -> str:
    goal = "min" if _smaller_is_better(searcher) else "max"
    return f"{searcher.get('name', MISSING)} ({goal} {searcher.get('metric', MISSING)})"


def trial_counts(counts: dict[str, int]) -> str:
    """``3 running, 5 completed, 2 stopped``: each state with trials in it, in the order trials go through them."""
    states = [*TRIAL_STATES, *sorted(set(counts) - set(TRIAL_STATES))]
    parts = [f"{counts[s]} {s.lower()}" for s in states if counts.get(s)]
    return ", ".join(parts) or MISSING


def _best(best: dict[str, Any] | None) -> str:
    if not best:
        return MISSING
    return f"{format_value((best.get('metric') or {}).get('value'))} (#{best.get('number')})"


def render_experiments(experiments: Any) -> str:
    rows = [
        (e.get("key"), e.get("state"), _searcher(e.get("searcher") or {}), trial_counts(e.get("trialCounts") or {}),
         _best(e.get("bestTrial")))
        for e in (experiments if isinstance(experiments, list) else [])
    ]
    return render_table(LIST_HEADERS, rows)


def _point(point: dict[str, Any] | None) -> str:
    if not point:
        return MISSING
    return f"{format_value(point.get('value'))} (step {point.get('step')})"


def _state(trial: dict[str, Any]) -> str:
    state = str(trial.get("state") or MISSING)
    return f"{state} ({trial['stoppedBy']})" if trial.get("stoppedBy") == "searcher" else state


def sort_trials(trials: list[dict[str, Any]], by: str, smaller_is_better: bool) -> list[dict[str, Any]]:
    """By trial number, or by best value of the metric (best first; trials without one last, by number)."""
    if by == "number":
        return sorted(trials, key=lambda t: t.get("number", 0))
    sign = 1 if smaller_is_better else -1

    def key(t: dict[str, Any]) -> tuple[int, float, int]:
        best = t.get("best")
        if not best or not isinstance(best.get("value"), int | float):
            return (1, 0.0, t.get("number", 0))
        return (0, sign * best["value"], t.get("number", 0))

    return sorted(trials, key=key)


def _hparam_names(detail: dict[str, Any], trials: list[dict[str, Any]]) -> list[str]:
    names = list(detail.get("hyperparameters") or {})
    for trial in trials:
        names += [n for n in trial.get("hparams") or {} if n not in names]
    return names


def render_experiment(detail: dict[str, Any], sort: str = "metric") -> str:
    searcher = detail.get("searcher") or {}
    smaller = _smaller_is_better(searcher)
    limits = f"at most {searcher.get('maxTrials')} trials"
    if searcher.get("maxConcurrentTrials"):
        limits += f", {searcher['maxConcurrentTrials']} at a time"
    lines = [
        f"Experiment: {detail.get('key')}",
        f"State: {detail.get('state')}",
        f"Searcher: {searcher.get('name')} ({limits})",
        f"Metric: {searcher.get('metric')} ({'smaller' if smaller else 'larger'} is better)",
        f"VC: {detail.get('virtualCluster')}",
        f"Created: {format_time(detail.get('createdTime'))}",
        f"Ended: {format_time(detail.get('completedTime'))}",
    ]
    if detail.get("description"):
        lines.insert(1, f"Description: {detail['description']}")
    trials = sort_trials(list(detail.get("trials") or []), sort, smaller)
    if not trials:
        return "\n".join([*lines, "", "No trials yet."])
    best = detail.get("bestTrial") or {}
    names = _hparam_names(detail, trials)
    rows = [
        (f"{t.get('number')}{'*' if best and t.get('id') == best.get('id') else ''}", t.get("jobName"), _state(t),
         *(format_value((t.get("hparams") or {}).get(n)) for n in names), _point(t.get("latest")),
         _point(t.get("best")))
        for t in trials
    ]
    lines += ["", render_table(("#", "JOB", "STATE", *names, "LATEST", "BEST"), rows)]
    if best:
        lines += ["", f"* best: trial {best.get('number')}, {searcher.get('metric')} "
                      f"{_point(best.get('metric'))}"]
    return "\n".join(lines)


def render_series(answer: dict[str, Any]) -> str:
    """One row a step, one column a metric (``-`` where that metric has no value at that step)."""
    metrics: dict[str, list[list[Any]]] = answer.get("metrics") or {}
    if not any(metrics.values()):
        return f"trial {answer.get('number')} of {answer.get('experiment')} has reported no metrics yet"
    by_step: dict[int, dict[str, Any]] = {}
    for name, points in metrics.items():
        for step, value in points:
            by_step.setdefault(step, {})[name] = value
    names = list(metrics)
    rows = [(step, *(format_value(values.get(n)) for n in names)) for step, values in sorted(by_step.items())]
    return render_table(("STEP", *names), rows)
