"""Command-line overrides of a spec's cluster: ``--cluster``, ``--scheduler`` and the
``--tls-*`` files (each refusal names its flag)."""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import ValidationError

from ...errors import SpecError, refusals
from .cluster import ADDRESS_PATTERN, SECURITY_TAGS, ClusterSpec
from .model import Spec


def with_cluster(spec: Spec, value: str | None) -> Spec:
    """``spec`` run on the cluster ``value`` (``--cluster``: ``auto``, ``threads``,
    ``local``, ``cuda``, ``slurm``, ``pbs`` or a scheduler address); SpecError naming the
    flag when refused. A kind replaces the spec's whole ``cluster`` section but its
    ``dashboard`` and its ``security`` mode (``temporary``, ``plain``), which a local
    cluster still uses."""
    if value is None:
        return spec
    if ADDRESS_PATTERN.match(value):
        return with_scheduler(spec, value)
    try:
        cluster = ClusterSpec.model_validate(value)
        if cluster.kind in ("local", "cuda") and "dashboard" in spec.cluster.model_fields_set:
            cluster = cluster.model_copy(update={"dashboard": spec.cluster.dashboard})
        if cluster.kind in ("auto", "local", "cuda") and isinstance(spec.cluster.security, str):
            cluster = cluster.model_copy(update={"security": spec.cluster.security})
    except ValidationError as err:
        lines = refusals(err, ClusterSpec, skip=SECURITY_TAGS)
        raise SpecError(f"--cluster: {'; '.join(lines)}") from None
    return spec.model_copy(update={"cluster": cluster})


def with_scheduler(spec: Spec, address: str | None = None,
                   tls: Mapping[str, str | None] | None = None) -> Spec:
    """``spec`` run on the scheduler at ``address`` (``--scheduler``), with the TLS files
    ``tls`` (``{"ca", "cert", "key"}``, from ``--tls-*``; relative to the current
    directory) replacing ``cluster.security``; SpecError naming the flag when refused."""
    tls = {k: v for k, v in (tls or {}).items() if v is not None}
    if address is None and not tls:
        return spec
    if tls and len(tls) < 3:
        missing = ", ".join(f"--tls-{k}" for k in ("ca", "cert", "key") if k not in tls)
        raise SpecError(f"TLS needs --tls-ca, --tls-cert and --tls-key together: {missing} "
                        f"missing")
    data = spec.cluster.model_dump(exclude_unset=True)
    if address is not None:
        data = {"kind": "scheduler", "address": address,
                **({"security": data["security"]} if "security" in data else {})}
    if tls:
        data["security"] = tls
    try:
        cluster = ClusterSpec.model_validate(data)
    except ValidationError as err:
        lines = refusals(err, ClusterSpec, skip=SECURITY_TAGS)
        for part in ("ca", "cert", "key"):  # a flag's file: name the flag
            lines = [line.replace(f"security.{part}:", f"--tls-{part}:")
                     if part in tls else line for line in lines]
        raise SpecError(f"--scheduler/--tls-*: {'; '.join(lines)}") from None
    return spec.model_copy(update={"cluster": cluster})


