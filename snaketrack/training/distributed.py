"""Data-parallel training: worker processes, their process group, and the pieces the training loop needs.

:func:`launch` starts ``workers`` processes on this machine with PyTorch's
own elastic launcher (``torch.distributed.launcher.api.elastic_launch``,
the library behind ``torchrun``), joins them into one process group
(``gloo`` on CPU, ``nccl`` when CUDA is there, each worker on its own GPU)
and runs a function in each. Several machines join through a rendezvous
at ``address`` (``HOST:PORT`` of the machine with node rank 0), each
machine running the same command with its own ``node_rank``: the
``torchrun --nnodes N --node-rank R --master-addr HOST --master-port PORT``
convention. A worker that fails or dies ends the launch at once: the
launcher stops the others, and :class:`WorkerError` says in one line which
worker failed and why. The process group's collectives time out after
:data:`TIMEOUT_S`, so a worker that hangs without dying cannot hang the
others for ever.

Inside a worker, :class:`Workers` says which worker it is and offers the
few collectives the training loop needs; :func:`sync_batchnorm` makes the
model's batch norms compute their statistics over the global batch (on
CPU with :class:`CpuSyncBatchNorm`, on GPU with ``torch.nn.SyncBatchNorm``),
so that a step on N shards of a batch computes the same gradient as a step
on the whole batch in one process; :func:`plain_batchnorm` turns them back
into ``torch.nn.BatchNorm2d`` for saving and for single-process use.
"""
from __future__ import annotations

import logging
import os
import signal
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Callable, Optional, Sequence

import torch
from torch.distributed.elastic.multiprocessing.api import SignalException
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, record
from torch.distributed.launcher.api import LaunchConfig, elastic_launch

import snaketrack.device as devices
from snaketrack.errors import InputError, SnaketrackError

TIMEOUT_S = 1800.0  # [s] a collective waits this long (rank 0 validates while the others wait)


class WorkerError(SnaketrackError, RuntimeError):
    """A training worker failed or died; the launch was ended."""


@dataclass(frozen=True)
class Workers:
    """This process's place among the workers of a data-parallel run.

    rank: global rank (0 validates and writes); world_size: workers in all;
    local_rank: rank on this machine; device: ``"cpu"`` or ``"cuda:<local_rank>"``;
    bn_group: the process group of the batch norms' statistics.
    """

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: str = "cpu"
    bn_group: Any = None

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    def barrier(self) -> None:
        if self.distributed:
            torch.distributed.barrier()

    def from_main(self, obj: Any) -> Any:
        """Rank 0's ``obj`` (any picklable value), on every rank."""
        if not self.distributed:
            return obj
        box = [obj]
        torch.distributed.broadcast_object_list(box, src=0)
        return box[0]

    def floats_from_main(self, values: Sequence[float]) -> list[float]:
        """Rank 0's ``values`` (a few floats), on every rank; cheaper than :meth:`from_main`."""
        if not self.distributed:
            return [float(v) for v in values]
        t = torch.tensor([float(v) for v in values], dtype=torch.float64, device=self.device)
        torch.distributed.broadcast(t, src=0)
        return t.cpu().tolist()

    def mean(self, values: Sequence[float]) -> list[float]:
        """The mean of ``values`` (a few floats) over all ranks, on every rank."""
        if not self.distributed:
            return [float(v) for v in values]
        t = torch.tensor([float(v) for v in values], dtype=torch.float64, device=self.device)
        torch.distributed.all_reduce(t)
        return (t / self.world_size).cpu().tolist()


def check_workers(workers: int, batch_size: int, nnodes: int = 1, node_rank: int = 0,
                  address: Optional[str] = None) -> tuple[str, int]:
    """Check a launch's settings; the rendezvous (host, port) of ``address`` (``("", 0)``: none given).

    The global batch stays ``batch_size``: each of ``workers * nnodes`` workers gets an equal share.
    """
    if int(workers) != workers or workers < 1:
        raise InputError(f"--workers {workers}: expected a positive number of worker processes")
    if int(nnodes) != nnodes or nnodes < 1:
        raise InputError(f"--nnodes {nnodes}: expected a positive number of machines")
    if not 0 <= node_rank < nnodes:
        raise InputError(f"--node-rank {node_rank}: expected 0 to {nnodes - 1} (--nnodes {nnodes})")
    world = workers * nnodes
    if batch_size % world:
        raise InputError(f"--batch-size {batch_size} over {world} workers: the global batch must divide evenly; "
                         f"use a multiple of {world}")
    if nnodes > 1 and not address:
        raise InputError(f"--nnodes {nnodes}: give --address HOST:PORT of the machine with --node-rank 0")
    return parse_address(address)


def parse_address(address: Optional[str]) -> tuple[str, int]:
    """The rendezvous (host, port) of ``address`` (``HOST:PORT``); ``("", 0)`` when none is given."""
    if not address:
        return "", 0
    host, _, port = str(address).rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise InputError(f"--address {address!r}: expected HOST:PORT, e.g. 10.0.0.1:29500")
    return host.strip("[]"), int(port)


def workers_device(spec: str, workers: int) -> str:
    """Where ``workers`` worker processes on this machine compute for ``--device spec``: ``"cpu"`` or
    ``"cuda"`` (worker ``i`` on GPU ``cuda:i``). ``auto`` is ``cuda`` when torch sees a GPU per worker;
    ``cuda`` without as many GPUs, and ``cuda:N`` (one GPU for all), are an :class:`InputError`."""
    name = devices.resolve_device(spec)  # a bad spec, or cuda without any GPU: its one line
    n = devices.cuda_count()
    if devices.check_device(spec) == "auto":
        return "cuda" if 0 < n and int(workers) <= n else "cpu"
    if name == "cpu":
        return "cpu"
    if name != "cuda":
        raise InputError(f"--device {name}: a data-parallel run takes a GPU per worker (cuda:0 to cuda:"
                         f"{int(workers) - 1}); use --device cuda")
    if n < int(workers):
        raise InputError(f"--device cuda with --workers {workers}: a GPU per worker, and torch sees {n}")
    return "cuda"


#: what a worker says when another one died under it (gloo's lost connection): a consequence, not the cause
_PEER_LOST = ("closed by peer", "reset by peer", "remote worker crashing")


def _failure_lines(failure) -> list[str]:
    """The lines of a worker failure's error message (empty when the worker left none, e.g. killed)."""
    msg = failure.message
    if isinstance(msg, dict):
        msg = msg.get("message", "")
    return str(msg or "").strip().splitlines()


def _root_failure(error) -> tuple:
    """``(rank, failure)`` of the worker whose failure caused the others': the first failure (by time) that is
    not a lost connection to a failed peer, else the first of all. A worker that dies without a message
    (``os._exit``, a signal) is seen by the launcher only at its next poll, after its peers' errors about it."""
    failures = sorted(error.failures.items(), key=lambda kv: (kv[1].timestamp, kv[0]))
    causes = [(r, f) for r, f in failures
              if not any(p in line for line in _failure_lines(f) for p in _PEER_LOST)]
    return (causes or failures)[0]


def launch(fn: Callable[..., Any], args: tuple = (), workers: int = 2, address: Optional[str] = None,
           nnodes: int = 1, node_rank: int = 0, device: str = "auto") -> list[Any]:
    """Run ``fn(Workers, *args)`` in ``workers`` new processes on this machine; their return values
    by local rank.

    ``fn`` and ``args`` must be picklable (the workers are started with ``spawn``). Without
    ``address`` the workers meet at a free local port; with it, at ``HOST:PORT`` together with the
    workers of the other ``nnodes - 1`` machines (this one being ``node_rank``). ``device``: ``--device``
    (:func:`workers_device`). Raises :class:`WorkerError` (one line) when a worker fails.
    """
    device = workers_device(device, workers)
    host, port = parse_address(address)
    if host:  # torchrun's static rendezvous: node ranks as given, node 0 holds the store at HOST:PORT
        rdzv = dict(rdzv_backend="static", rdzv_endpoint=f"{host}:{port}", run_id="snaketrack",
                    rdzv_configs={"rank": int(node_rank), "timeout": int(TIMEOUT_S)})
    else:  # torchrun --standalone: a store on a free local port
        rdzv = dict(rdzv_backend="c10d", rdzv_endpoint="localhost:0", run_id=str(uuid.uuid4()))
    cfg = LaunchConfig(min_nodes=nnodes, max_nodes=nnodes, nproc_per_node=int(workers), max_restarts=0,
                       monitor_interval=0.5, start_method="spawn", **rdzv)
    quiet = logging.getLogger("torch.distributed.elastic")  # its tracebacks become one line here
    level = quiet.level
    quiet.setLevel(logging.CRITICAL)
    try:
        out = elastic_launch(cfg, _worker_main)(fn, args, device)
    except SignalException as e:  # the launcher's own signal handler; Ctrl-C reaches the workers too
        if e.sigval == signal.SIGINT:
            raise KeyboardInterrupt from None
        raise WorkerError(f"training stopped by {signal.Signals(e.sigval).name}") from None
    except ChildFailedError as e:
        rank, failure = _root_failure(e)
        msg = _failure_lines(failure)
        why = msg[-1] if msg else (f"killed by signal {failure.signal_name()}" if failure.exitcode < 0
                                   else f"exit status {failure.exitcode}")
        raise WorkerError(f"training worker {rank} failed: {why}; the other workers were stopped") from None
    finally:
        quiet.setLevel(level)
    return [out[k] for k in sorted(out)]


def _worker_main(fn: Callable[..., Any], args: tuple, device: str = "cpu") -> Any:
    """A worker process: join the process group, run ``fn``, leave the group."""
    return record(_in_group)(fn, args, device)


def _in_group(fn: Callable[..., Any], args: tuple, device: str = "cpu") -> Any:
    rank, world, local = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ["LOCAL_RANK"])
    # a GPU per worker of this machine (workers_device), or none used: all workers must agree on the backend
    cuda = device == "cuda"
    device = f"cuda:{local}" if cuda else "cpu"
    if cuda:
        torch.cuda.set_device(local)
    torch.distributed.init_process_group("nccl" if cuda else "gloo", timeout=timedelta(seconds=TIMEOUT_S),
                                         device_id=torch.device(device) if cuda else None)
    try:
        # the batch norms' collectives run inside the autograd graph: a group of their own keeps them
        # apart from the gradient all-reduces DistributedDataParallel issues during the backward pass
        bn_group = torch.distributed.new_group(backend="nccl" if cuda else "gloo",
                                               timeout=timedelta(seconds=TIMEOUT_S))
        return fn(Workers(rank, world, local, device, bn_group), *args)
    finally:
        torch.distributed.destroy_process_group()


class _AllReduceSum(torch.autograd.Function):
    """Sum over the workers, differentiable: the gradient of the sum is the sum of the gradients."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, group: Any) -> torch.Tensor:
        ctx.group = group
        x = x.clone()
        torch.distributed.all_reduce(x, group=group)
        return x

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        grad = grad.clone()
        torch.distributed.all_reduce(grad, group=ctx.group)
        return grad, None


class CpuSyncBatchNorm(torch.nn.BatchNorm2d):
    """``BatchNorm2d`` whose training-mode statistics are those of the global batch over all workers.

    ``torch.nn.SyncBatchNorm`` runs on GPUs only; this is its CPU counterpart for ``gloo``. In
    training mode with a process group of more than one worker, the per-channel mean and (biased)
    variance of (B, C, H, W) inputs are all-reduced over ``group`` (differentiable all-reduces, whose
    backward pass all-reduces the gradients, so DistributedDataParallel's averaging then yields the
    whole batch's gradient); running statistics are updated with the global values, the variance
    unbiased over the global count. Otherwise it is ``BatchNorm2d``. Same parameters and buffers.
    """

    group: Any = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not (self.training and torch.distributed.is_available() and torch.distributed.is_initialized()
                and torch.distributed.get_world_size(self.group) > 1):
            return super().forward(x)
        group = self.group or torch.distributed.group.WORLD
        n_local = x.numel() // x.shape[1]
        s = torch.cat([x.sum(dim=(0, 2, 3)), x.new_tensor([float(n_local)])])
        s = _AllReduceSum.apply(s, group)
        n = s[-1]
        mean = s[:-1] / n
        xc = x - mean[None, :, None, None]
        var = _AllReduceSum.apply((xc * xc).sum(dim=(0, 2, 3)), group) / n
        if self.track_running_stats:
            with torch.no_grad():
                self.num_batches_tracked.add_(1)
                m = self.momentum if self.momentum is not None else 1.0 / float(self.num_batches_tracked)
                self.running_mean.mul_(1 - m).add_(mean.detach(), alpha=m)
                self.running_var.mul_(1 - m).add_(var.detach() * (n / (n - 1)).clamp(min=1.0), alpha=m)
        y = xc * torch.rsqrt(var + self.eps)[None, :, None, None]
        if self.affine:
            y = y * self.weight[None, :, None, None] + self.bias[None, :, None, None]
        return y


def _swap_batchnorm(module: torch.nn.Module, make: Callable[[torch.nn.modules.batchnorm._BatchNorm],
                                                             torch.nn.Module]) -> torch.nn.Module:
    """``module`` with each batch-norm child replaced by ``make(child)`` (parameters and buffers shared)."""
    if isinstance(module, torch.nn.modules.batchnorm._BatchNorm):
        return make(module)
    for name, child in module.named_children():
        new = _swap_batchnorm(child, make)
        if new is not child:
            setattr(module, name, new)
    return module


def _rebuild(bn: torch.nn.modules.batchnorm._BatchNorm, cls: type) -> torch.nn.Module:
    if type(bn) is cls:
        return bn
    new = cls(bn.num_features, bn.eps, bn.momentum, bn.affine, bn.track_running_stats)
    if bn.affine:
        new.weight, new.bias = bn.weight, bn.bias
    if bn.track_running_stats:
        new.running_mean, new.running_var = bn.running_mean, bn.running_var
        new.num_batches_tracked = bn.num_batches_tracked
    new.train(bn.training)
    return new


def sync_batchnorm(model: torch.nn.Module, ctx: Workers) -> torch.nn.Module:
    """``model`` with its batch norms computing global-batch statistics over ``ctx``'s workers
    (``torch.nn.SyncBatchNorm`` on GPU, :class:`CpuSyncBatchNorm` on CPU); parameters are shared, not copied."""
    if ctx.device.startswith("cuda"):
        return torch.nn.SyncBatchNorm.convert_sync_batchnorm(model, process_group=ctx.bn_group)

    def make(bn):
        new = _rebuild(bn, CpuSyncBatchNorm)
        new.group = ctx.bn_group
        return new

    return _swap_batchnorm(model, make)


def plain_batchnorm(model: torch.nn.Module) -> torch.nn.Module:
    """``model`` with synchronised batch norms back as ``torch.nn.BatchNorm2d`` (the model as a
    single process builds it, for saving and for inference)."""
    return _swap_batchnorm(model, lambda bn: _rebuild(bn, torch.nn.BatchNorm2d))


def data_parallel(model: torch.nn.Module, ctx: Workers) -> tuple[torch.nn.Module, torch.nn.Module]:
    """(model, net): ``model`` with synchronised batch norms (:func:`sync_batchnorm`), and ``net``, the
    ``DistributedDataParallel`` wrapper the training steps run, which averages the gradients over
    the workers in the backward pass; for a single process both are ``model``."""
    if not ctx.distributed:
        return model, model
    model = sync_batchnorm(model, ctx)
    net = torch.nn.parallel.DistributedDataParallel(
        model, device_ids=[ctx.local_rank] if ctx.device.startswith("cuda") else None,
        forward_sync_buffers=False)  # batch-norm buffers agree already: their statistics are global
    return model, net


def shard_batches(n: int, batch_size: int, seed_draw: int, ctx: Workers) -> list[list[int]]:
    """This worker's share of each training batch: the single-process batches of ``n`` samples
    (shuffled by a generator seeded ``seed_draw``, as the single-process loader draws them; the last
    partial batch dropped), each cut into ``ctx.world_size`` equal consecutive parts, part
    ``ctx.rank`` kept. The union of the workers' parts is the single-process batch.

    >>> shard_batches(10, 4, 7, Workers(0, 2))[0] + shard_batches(10, 4, 7, Workers(1, 2))[0] == \\
    ...     shard_batches(10, 4, 7, Workers(0, 1))[0]
    True
    """
    gen = torch.Generator().manual_seed(int(seed_draw))
    order = torch.utils.data.DataLoader(range(n), batch_size=batch_size, shuffle=True, generator=gen,
                                        num_workers=0, drop_last=n > batch_size)
    per = batch_size // ctx.world_size
    return [b.tolist()[ctx.rank * per:(ctx.rank + 1) * per] for b in order]
