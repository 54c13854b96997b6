"""Where a sweep's blocks run: the spec's ``cluster`` section, and the scheduler flags
(``--scheduler``, ``--tls-*``) that replace it."""

from __future__ import annotations

import os
import re
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    Discriminator,
    Field,
    Tag,
    field_validator,
    model_validator,
)

from ...errors import BackendError, Problems
from .files import PathStr
from .sections import SECTION_CONFIG

ADDRESS_PATTERN = re.compile(r"^(tcp|tls|ucx|ws|wss)://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.\-]+)(:\d{1,5})?$")


def check_address(address: str, what: str) -> str:
    """``address`` if it reads as a Dask scheduler address (``tcp://host:8786``), else
    BackendError naming ``what`` (``--scheduler``, ``cluster``)."""
    if not ADDRESS_PATTERN.match(address):
        raise BackendError(f"{what}: {address!r} is not a scheduler address; expected "
                           f"e.g. tcp://host:8786 or tls://host:8786")
    return address


def _readable_file(value: str) -> str:
    if not os.path.isfile(value):
        raise ValueError(f"no file at {value}")
    if not os.access(value, os.R_OK):
        raise ValueError(f"{value} is not readable")
    return value


TlsFile = Annotated[PathStr, AfterValidator(_readable_file)]


class SecuritySpec(BaseModel):
    """TLS to the Dask cluster: the certificate authority that signed the scheduler's
    and workers' certificates, and this client's certificate and private key (PEM
    files; the key may be in ``cert``'s file too, then give that file twice)."""

    model_config = SECTION_CONFIG

    ca: TlsFile
    cert: TlsFile
    key: TlsFile


#: How a cluster barsweep starts on this machine (``local``, ``cuda``; ``auto`` when it
#: becomes one) talks: ``temporary`` (the default), TLS with encryption required and a
#: key and certificate made for the run, held in memory and handed to its workers as
#: they start, so that no other local user can connect to its scheduler or workers;
#: ``plain``, unencrypted TCP on 127.0.0.1, which any local user can reach.
LOCAL_SECURITY = ("temporary", "plain")
#: The member tags of ``cluster.security`` (TLS files, or a mode of :data:`LOCAL_SECURITY`),
#: dropped from the keys of its refusals.
SECURITY_TAGS = frozenset({"tls-files", "tls-mode"})

#: Kinds of cluster: chosen by the size of the work (auto), threads of this process
#: (threads), started here (local, cuda), reached (scheduler), or submitted as batch jobs
#: through dask-jobqueue (slurm, pbs).
CLUSTER_KINDS = ("auto", "threads", "local", "cuda", "scheduler", "slurm", "pbs")
#: Kinds that run on this machine, with workers barsweep starts (``n_workers`` applies).
STARTED_HERE = ("auto", "threads", "local", "cuda")
_JOBQUEUE_KEYS = ("cores", "memory", "walltime", "jobs", "queue", "account",
                  "job_directives", "interface")
_DASHBOARD = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.\-]*):\d{1,5}$")
_MEMORY = re.compile(r"^\d+(\.\d+)?\s*([kKMGTP]i?B|B)$")
_WALLTIME = re.compile(r"^(\d+-)?\d{1,3}:\d{2}(:\d{2})?$")


class ClusterSpec(BaseModel):
    """Where the blocks run.

    ``kind``: ``auto`` (the default: ``threads`` for a small sweep, ``local`` for a large
    one, see :func:`barsweep.pipeline.run.cluster.choose`), ``threads`` (one in-process Dask
    worker with a thread per core: no process to start, no dashboard), ``local`` (a
    LocalCluster of one single-threaded worker process per core), ``cuda`` (dask-cuda's
    LocalCUDACluster, one worker per GPU),
    ``scheduler`` (a running scheduler at ``address``, with TLS when ``security`` is
    given), or ``slurm`` / ``pbs`` (batch jobs through dask-jobqueue, the ``[hpc]``
    extra: ``jobs`` jobs of ``cores`` single-threaded workers sharing ``memory``, for
    ``walltime``, in ``queue`` billed to ``account``, with extra ``job_directives``).
    ``security``: a running scheduler's (and slurm/pbs's) TLS files; for a cluster
    started here, ``temporary`` (None means it) or ``plain`` (:data:`LOCAL_SECURITY`).
    ``dashboard`` is where a cluster barsweep starts serves its dashboard:
    127.0.0.1 (this machine only) unless it says otherwise. A spec may say just
    ``cluster: local`` (or ``auto``, ``threads``, ``cuda``, ``slurm``, ``pbs``, or an
    address).
    """

    model_config = SECTION_CONFIG

    kind: Literal["auto", "threads", "local", "cuda", "scheduler", "slurm",
                  "pbs"] = "auto"
    address: str | None = None
    dashboard: str = "127.0.0.1:8787"
    security: Annotated[
        Annotated[SecuritySpec, Tag("tls-files")]
        | Annotated[Literal["temporary", "plain"], Tag("tls-mode")],
        Discriminator(lambda v: "tls-mode" if isinstance(v, str | bool) else "tls-files"),
    ] | None = None
    cores: int | None = Field(None, gt=0, strict=True)
    memory: str | None = None
    walltime: str = "01:00:00"
    jobs: int = Field(1, gt=0, strict=True)
    queue: str | None = None
    account: str | None = None
    job_directives: list[str] = Field(default_factory=list)
    interface: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, value: Any) -> Any:
        if isinstance(value, str):
            if value in CLUSTER_KINDS and value != "scheduler":
                return {"kind": value}
            if ADDRESS_PATTERN.match(value):
                return {"kind": "scheduler", "address": value}
            raise ValueError(
                "cluster must be 'auto', 'threads', 'local', 'cuda' or a scheduler address "
                f"such as 'tcp://host:8786' (or 'slurm', 'pbs', or a mapping with kind), got "
                f"{value!r}")
        return value

    @field_validator("address")
    @classmethod
    def _address(cls, value: str | None) -> str | None:
        if value is not None and not ADDRESS_PATTERN.match(value):
            raise ValueError(f"expected a scheduler address such as 'tcp://host:8786' or "
                             f"'tls://host:8786', got {value!r}")
        return value

    @field_validator("dashboard")
    @classmethod
    def _dashboard(cls, value: str) -> str:
        if not _DASHBOARD.match(value):
            raise ValueError(f"expected HOST:PORT such as '127.0.0.1:8787' or '0.0.0.0:8787' "
                             f"(port 0: any free one), got {value!r}")
        return value

    @field_validator("memory")
    @classmethod
    def _memory(cls, value: str | None) -> str | None:
        if value is not None and not _MEMORY.match(value):
            raise ValueError(f"expected an amount such as '16GB' or '64GiB', got {value!r}")
        return value

    @field_validator("walltime")
    @classmethod
    def _walltime(cls, value: str) -> str:
        if not _WALLTIME.match(value):
            raise ValueError(f"expected HH:MM:SS (or D-HH:MM:SS), got {value!r}")
        return value

    @model_validator(mode="after")
    def _fits_kind(self) -> ClusterSpec:
        problems = []
        fields = type(self).model_fields
        given = {k for k in self.model_fields_set
                 if getattr(self, k) != fields[k].get_default(call_default_factory=True)}
        jobqueue = self.kind in ("slurm", "pbs")
        if self.kind == "scheduler":
            if self.address is None:
                problems.append(("cluster.address", "kind 'scheduler' needs the scheduler's "
                                 "address, e.g. tcp://host:8786"))
            if "dashboard" in given:
                problems.append(("cluster.dashboard", "applies to clusters barsweep starts; "
                                 "a running scheduler serves its own dashboard"))
            if self.security is not None and self.address and not self.address.startswith(
                    "tls://"):
                problems.append(("cluster.security", f"TLS needs a tls:// address, got "
                                 f"{self.address!r}"))
        elif self.address is not None:
            problems.append(("cluster.address", f"applies to kind 'scheduler', not "
                             f"{self.kind!r}"))
        if self.kind == "threads" and "dashboard" in given:
            problems.append(("cluster.dashboard", "a threads cluster serves no dashboard "
                             "(it is for small sweeps); use kind 'local' to watch one"))
        problem = self._security_problem()
        if problem:
            problems.append(("cluster.security", problem))
        for key in _JOBQUEUE_KEYS:
            if key in given and not jobqueue:
                problems.append((f"cluster.{key}", f"applies to kinds slurm and pbs, not "
                                 f"{self.kind!r}"))
        if jobqueue:
            for key in ("cores", "memory"):
                if getattr(self, key) is None:
                    problems.append((f"cluster.{key}", f"kind {self.kind!r} needs {key} "
                                     f"(per job), e.g. cores: 32, memory: 64GB"))
        if problems:
            raise Problems(problems)
        return self

    def _security_problem(self) -> str | None:
        """Why ``security`` does not fit ``kind``, or None."""
        files = isinstance(self.security, SecuritySpec)
        if self.kind == "threads" and self.security is not None:
            return ("a threads cluster runs in this process and opens no connection to "
                    "secure; use kind 'local' for worker processes")
        if self.kind in STARTED_HERE and files:
            return (f"a cluster started here ({self.kind}) takes 'temporary' (the default: "
                    f"TLS with a key made for the run) or 'plain' (TCP); TLS files are for "
                    f"a remote scheduler or slurm/pbs")
        if self.kind not in STARTED_HERE and isinstance(self.security, str):
            return (f"{self.security!r} applies to clusters barsweep starts here (local, "
                    f"cuda); a {self.kind} cluster takes TLS files {{ca, cert, key}}")
        return None

    @property
    def encrypted_here(self) -> bool:
        """Whether a cluster started here (local, cuda) runs TLS with credentials made
        for the run (``security`` unset or ``temporary``), not plain TCP."""
        return self.security != "plain"

    def describe(self) -> str:
        """``local``, ``tcp://host:8786``, ``slurm (4 jobs of 32 cores)``..."""
        if self.kind == "scheduler":
            return str(self.address)
        if self.kind in ("slurm", "pbs"):
            return f"{self.kind} ({self.jobs} jobs of {self.cores} cores)"
        return self.kind
