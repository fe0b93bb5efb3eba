"""The ssh plugin's ``sshbarrier``: before the role's commands, wait until every other task of the job answers over
SSH, as openpai-runtime's ``plugins/ssh/sshbarrier.sh`` does (for jobs that start MPI or Horovod over SSH).

It runs in the task, with the image's ``ssh`` client and the job's ``~/.ssh`` layout (``jobssh``; the config is at
``$PAI_SSH_DIR/config``): every peer ``<role>-<index>`` is tried with ``ssh -o BatchMode=yes <peer> exit 0``, those
that fail again every few seconds, until ``sshbarrierTimeout`` minutes (default 30) have passed: then the task fails
with exit code 10, as OpenPAI's does. An image without ``ssh`` fails at once, saying so.
"""

from __future__ import annotations

from typing import Any

from pai.domain.errors import InvalidProtocolError

DEFAULT_TIMEOUT_MINUTES = 30
RETRY_SECONDS = 3
EXIT_CODE = 10


def wanted(parameters: dict[str, Any], gang: bool) -> bool:
    """Whether the plugin asks for a barrier that runs: ``jobssh`` and ``sshbarrier`` true, in a gang job."""
    return gang and str(parameters.get("jobssh", "")).lower() == "true" \
        and str(parameters.get("sshbarrier", "")).lower() == "true"


def barrier(parameters: dict[str, Any], params_path: str, config: dict[str, Any]) -> list[str]:
    """The barrier's shell lines for a task of the job ``config``."""
    minutes = parameters.get("sshbarrierTimeout", DEFAULT_TIMEOUT_MINUTES)
    if isinstance(minutes, bool) or not isinstance(minutes, int | float) or not 0 < minutes <= 7 * 24 * 60:
        where = f"{params_path}.sshbarrierTimeout"
        raise InvalidProtocolError(f"{where}: must be a number of minutes between 0 and {7 * 24 * 60}, not "
                                   f"{minutes!r}", field=where)
    roles: dict[str, dict[str, Any]] = config.get("taskRoles") or {}
    peers = " ".join(f"{name}-{i}" for name, role in roles.items() for i in range(int(role.get("instances", 1))))
    return [
        'command -v ssh >/dev/null || { echo "sshbarrier: the image has no ssh client" >&2; exit 10; }',
        f"deadline=$(( $(date +%s) + {int(minutes * 60)} ))",
        'me="${PAI_CURRENT_TASK_ROLE_NAME}-${PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX}"',
        'conf="${PAI_SSH_DIR:-$HOME/.ssh}/config"',
        f'left="{peers}"',
        "while :; do",
        '  failed=""',
        "  for peer in $left; do",
        '    [ "$peer" = "$me" ] && continue',
        '    ssh -F "$conf" -q -o BatchMode=yes -o ConnectTimeout=10 "$peer" "exit 0" </dev/null'
        ' || failed="$failed $peer"',
        "  done",
        '  [ -z "$failed" ] && break',
        '  if [ "$(date +%s)" -ge "$deadline" ]; then',
        f'    echo "sshbarrier: cannot reach$failed over SSH" >&2; exit {EXIT_CODE}',
        "  fi",
        '  left="$failed"',
        f"  sleep {RETRY_SECONDS}",
        "done",
        'echo "sshbarrier: every task answers over SSH"',
    ]
