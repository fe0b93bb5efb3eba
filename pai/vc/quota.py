"""Quota arithmetic: the cluster total, percent amounts, the guarantee check and ``default`` taking the rest."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace

from pai.domain.errors import InvalidParametersError
from pai.domain.resources import ZERO, Resources
from pai.vc.snapshot import NodeView, VcQuota

DEFAULT_VC = "default"
RESOURCE_KEYS = ("gpu", "cpu", "memoryMB")


def cluster_total(nodes: Iterable[NodeView]) -> Resources:
    """What the schedulable nodes could hold if empty (failed GPUs excluded)."""
    total = ZERO
    for n in nodes:
        if n.schedulable:
            total = total + n.usable
    return total


def resolve_amount(value: int | float | str, total: int, *, field: str = "") -> int:
    """``12`` stays 12; ``"50%"`` is half of ``total``, rounded down. Negative amounts are refused."""
    if isinstance(value, str):
        text = value.strip()
        try:
            number = float(text[:-1]) if text.endswith("%") else float(int(text))
        except ValueError:
            raise InvalidParametersError(f"{field or 'amount'}: {value!r} is neither a number nor a percent",
                                         field=field) from None
        amount = int(number * total / 100) if text.endswith("%") else int(number)
    else:
        number = amount = int(value)
    if number < 0:
        raise InvalidParametersError(f"{field or 'amount'}: {value!r} is negative", field=field)
    return amount


def resolve_resources(amounts: Mapping[str, int | float | str], total: Resources, *, field: str = "") -> Resources:
    """A ``{gpu, cpu, memoryMB}`` mapping of absolute or percent amounts; missing keys are 0."""
    tot = total.to_dict()
    values = {k: resolve_amount(amounts[k], tot[k], field=f"{field}.{k}") for k in RESOURCE_KEYS if k in amounts}
    return Resources.from_dict(values)


def validate_guarantees(vcs: Iterable[VcQuota], total: Resources) -> None:
    """Raise InvalidParametersError when the guarantees sum past the cluster, or a guarantee passes its max."""
    acc = ZERO
    names: set[str] = set()
    for vc in vcs:
        if vc.name in names:
            raise InvalidParametersError(f"virtual cluster {vc.name!r} is listed twice", field=vc.name)
        names.add(vc.name)
        if vc.max is not None and not vc.guaranteed.fits_in(vc.max):
            raise InvalidParametersError(
                f"virtual cluster {vc.name!r}: guaranteed ({vc.guaranteed.describe()}) exceeds max "
                f"({vc.max.describe()})", field=vc.name)
        acc = acc + vc.guaranteed
    if not acc.fits_in(total):
        raise InvalidParametersError(
            f"guarantees sum to {acc.describe()}, more than the cluster's {total.describe()}", field="guaranteed")


def effective_quotas(vcs: Iterable[VcQuota], total: Resources) -> tuple[VcQuota, ...]:
    """The VCs as the scheduler applies them: ``default`` (added when missing) with a zero guarantee gets the
    rest of the cluster. No validation: a snapshot taken after nodes were lost may over-commit guarantees."""
    vcs = tuple(vcs)
    others = ZERO
    for vc in vcs:
        if vc.name != DEFAULT_VC:
            others = others + vc.guaranteed
    rest = (total - others).clamp0()
    out = [replace(vc, guaranteed=rest) if vc.name == DEFAULT_VC and vc.guaranteed == ZERO else vc for vc in vcs]
    if all(vc.name != DEFAULT_VC for vc in vcs):
        out.append(VcQuota(DEFAULT_VC, guaranteed=rest))
    return tuple(out)
