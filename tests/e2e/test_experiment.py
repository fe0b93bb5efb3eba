"""The example experiment (examples/experiment.yaml) on a real master and agent (process runtime): its trials import
pai_trial from the agent, report to the master, and ASHA stops the poor ones early; the best trial is where the
example's optimum is. And a master SIGKILLed mid-experiment loses no trial, no metric and no decision."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.e2e.harness import Cluster, cluster, wait_for

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = (ROOT / "examples" / "experiment.yaml").read_bytes()
KEY = "admin~lr-search"


def experiment(c: Cluster) -> dict[str, Any]:
    status, body = c.raw("GET", f"/api/v2/experiments/{KEY}")
    assert status == 200, body
    return dict(body)


def ended(c: Cluster, timeout: float = 240.0) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        got = experiment(c)
        return got if got["state"] in ("COMPLETED", "STOPPED") else None
    return dict(wait_for("the experiment to end", probe, timeout, 0.5))


def at_step_0(c: Cluster, trial: dict[str, Any], name: str) -> float:
    """What the trial reported of ``name`` (the example's facts of its data) at step 0."""
    status, series = c.raw("GET", f"/api/v2/trials/{trial['id']}/metrics?name={name}")
    assert status == 200, series
    [[step, value]] = series["metrics"][name]
    assert step == 0
    return float(value)


def contraction(lr: float, optimal: float, largest: float) -> float:
    """How much gradient descent at ``lr`` shrinks the error per step on the example's data: max |1 - lr * eigenvalue|
    of the data's covariance, whose eigenvalues follow from the optimal lr 2 / (l1 + l2) and the largest 2 / l1."""
    l1 = 2 / largest
    l2 = 2 / optimal - l1
    return max(abs(1 - lr * l1), abs(1 - lr * l2))


def test_the_example_runs_to_the_end_and_its_best_trial_is_at_the_optimum(tmp_path: Path) -> None:
    with cluster(tmp_path, None, [("node-a", "127.0.0.2", 4)]) as c:
        status, body = c.raw("POST", "/api/v2/experiments", EXAMPLE, "text/yaml")
        assert status == 202, body
        done = ended(c)
        trials = done["trials"]
        assert done["state"] == "COMPLETED" and len(trials) == 16
        assert {t["state"] for t in trials} <= {"COMPLETED", "STOPPED"}, [(t["number"], t["state"]) for t in trials]
        stopped = [t for t in trials if t["state"] == "STOPPED"]
        assert stopped and all(t["stoppedBy"] == "searcher" for t in stopped)  # ASHA stopped the poor ones early
        assert sum(t["latest"]["step"] < 32 for t in stopped) > len(stopped) / 2  # most well before their end
        assert all(t["latest"]["step"] == 32 for t in trials if t["state"] == "COMPLETED")
        best = done["bestTrial"]
        optimum, largest = at_step_0(c, best, "optimal_lr"), at_step_0(c, best, "max_lr")
        assert 4.0 < optimum < 5.0 < largest < 6.0  # 2 / (l1 + l2) and 2 / l1 of the example's data
        # the best trial is where the optimum is: of the trials that ran to the end, its learning rate descends fastest
        # (the nearest to the optimum, in what matters: the contraction per step)
        rate = {t["number"]: contraction(t["hparams"]["lr"], optimum, largest) for t in trials
                if t["state"] == "COMPLETED"}
        assert min(rate, key=lambda n: rate[n]) == best["number"] and rate[best["number"]] < 0.8, (rate, best)
        assert best["state"] == "COMPLETED" and best["metric"]["value"] < 1e-6
        job = c.job(best["jobName"])
        assert job["jobStatus"]["state"] == "SUCCEEDED"
        out = c.log(best["jobName"], "train", 0)
        assert f"lr={best['hparams']['lr']:.4g}" in out and "optimal lr" in out
        status, checkpoint = c.raw("GET", f"/api/v2/trials/{best['id']}/checkpoints/latest")
        assert status == 200 and checkpoint["step"] == 32 and Path(checkpoint["path"]).is_file()


def test_a_master_killed_mid_experiment_loses_nothing(tmp_path: Path) -> None:
    with cluster(tmp_path, None, [("node-a", "127.0.0.2", 4)]) as c:
        status, body = c.raw("POST", "/api/v2/experiments", EXAMPLE, "text/yaml")
        assert status == 202, body

        def midway() -> dict[str, Any] | None:
            got = experiment(c)
            ended_trials = [t for t in got["trials"] if t["state"] in ("COMPLETED", "STOPPED")]
            return got if len(ended_trials) >= 4 and len(got["trials"]) < 16 else None
        before = wait_for("a few trials ended, the search midway", midway, 180, 0.2)
        c.kill("master")  # SIGKILL: no clean step down, whatever it held in memory is gone
        c.restart("master")
        c.wait_master()
        after = ended(c)
        assert after["state"] == "COMPLETED"
        numbers = [t["number"] for t in after["trials"]]
        assert numbers == list(range(16))  # no trial lost, none asked twice
        now = {t["number"]: t for t in after["trials"]}
        for trial in before["trials"]:  # what was decided stays decided
            kept = now[trial["number"]]
            assert (kept["id"], kept["hparams"], kept["jobName"]) == (trial["id"], trial["hparams"], trial["jobName"])
            assert kept["points"] >= trial["points"]  # no metric lost
            if trial["state"] in ("COMPLETED", "STOPPED"):
                assert (kept["state"], kept["stoppedBy"]) == (trial["state"], trial["stoppedBy"])
            if trial["stopRequested"]:
                assert kept["state"] == "STOPPED" and kept["stoppedBy"] == "searcher"
        assert {t["state"] for t in after["trials"]} <= {"COMPLETED", "STOPPED"}
        for trial in after["trials"]:  # every curve is whole: a step for each report, none missing
            status, series = c.raw("GET", f"/api/v2/trials/{trial['id']}/metrics?name=loss")
            steps = [step for step, _ in series["metrics"]["loss"]]
            assert steps == list(range(trial["latest"]["step"] + 1)), (trial["number"], steps)
