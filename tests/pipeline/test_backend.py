"""Backend choice from the workers' answers (no cluster needed)."""

import socket

import pytest

from barsweep.engine import backend
from barsweep.engine.backend import process_gpu
from barsweep.errors import BackendError
from barsweep.pipeline.run.execute import choose_backend


def answer(problem=None, gpu="host:0"):
    return {"problem": problem, "gpu": gpu}


def test_auto_takes_gpus_that_each_worker_has_to_itself():
    backend, why = choose_backend("auto", {"w1": answer(gpu="a:0"), "w2": answer(gpu="a:1")})
    assert (backend, why) == ("cuda", "auto: each of the 2 workers has a CUDA GPU of its own")


def test_auto_stays_on_the_cpu_when_workers_would_share_a_gpu():
    backend, why = choose_backend("auto", {"w1": answer(), "w2": answer(), "w3": answer()})
    assert backend == "cpu"
    assert why.startswith("auto: CPU, since 3 workers would share GPU host:0; use cluster: cuda")


def test_auto_names_the_first_worker_without_a_gpu():
    backend, why = choose_backend("auto", {"w2": answer("no driver"), "w1": answer()})
    assert (backend, why) == ("cpu", "auto: CPU, since w2: no driver")
    assert choose_backend("auto", {}) == ("cpu", "auto: CPU, since the cluster has no workers")


def test_cuda_is_refused_naming_every_worker_without_a_gpu():
    with pytest.raises(BackendError, match="every worker: w1: no driver; w3: no NVVM"):
        choose_backend("cuda", {"w1": answer("no driver"), "w2": answer(),
                                "w3": answer("no NVVM")})
    with pytest.raises(BackendError, match="every worker: no workers"):
        choose_backend("cuda", {})


def test_cuda_shares_a_gpu_when_asked():
    backend, _ = choose_backend("cuda", {"w1": answer(), "w2": answer()})
    assert backend == "cuda"


def test_a_worker_without_a_driver_answers_without_numba_cuda(monkeypatch):
    monkeypatch.delenv("NUMBA_ENABLE_CUDASIM", raising=False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,0")
    monkeypatch.setattr(backend.Path, "exists", lambda self: False)  # no driver traces
    found = process_gpu()
    assert found["problem"].startswith("no NVIDIA driver on this machine (none of ")
    assert found["gpu"] == f"{socket.gethostname()}:3"
