"""Job-size limits that are a cluster setting (``limits`` in the cluster configuration, job_schemas/vc-config.json).

The hard ceilings of every field (strings, resources, retries, ports) live in the job schemas themselves
(job_schemas/v1.json, v2.json); docs/job-protocol.md lists them all.
"""

from __future__ import annotations

from dataclasses import dataclass

INT32_MAX = 2_147_483_647  # the widest integer column of the store (``Integer``)
JSON_SAFE_INT = 2**53 - 1  # the widest integer every JSON client (JavaScript's numbers) reads exactly


@dataclass(frozen=True, slots=True)
class JobLimits:
    """How big one job may be on this cluster; checked at submission, before any task is built."""

    tasks_per_role: int = 1_000  # instances of one task role (v1 taskNumber, v2 instances)
    tasks_per_job: int = 5_000  # instances of all task roles together
    trials_per_experiment: int = 1_000  # an experiment's searcher.maxTrials

    def to_dict(self) -> dict[str, int]:
        return {"tasksPerRole": self.tasks_per_role, "tasksPerJob": self.tasks_per_job,
                "trialsPerExperiment": self.trials_per_experiment}


DEFAULT_JOB_LIMITS = JobLimits()
