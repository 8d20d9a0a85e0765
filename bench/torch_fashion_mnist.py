#!/usr/bin/python3
"""The Fashion-MNIST example's model in PyTorch, for comparison with Cohort.

The same MLP 784-256-128-10 (ReLU, softmax cross-entropy, Glorot-uniform
kernels, zero biases), Adam (lr 1e-3, epsilon 1e-7 as Keras and Cohort),
global batch 128, pixels scaled to [0, 1], read from the same gzipped IDX
files, one thread per process. With --procs=2 it runs DistributedDataParallel
over the gloo backend on loopback, each process taking half of every global
batch.

Prints one JSON line: steps/s over a timed run, and the steps and seconds to
reach --target test accuracy (evaluated every --eval_every steps, the
evaluation time included, as Cohort's early-stopping job includes it).

Run with Debian's own python3 (/usr/bin/python3), which sees python3-torch.
With --device=cuda (one process) it times the same on the GPU.
"""

import argparse
import gzip
import json
import os
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn

SOURCE = "/usr/share/datasets/fashion-mnist"


def read_split(source, split):
    def payload(path, magic, header):
        with gzip.open(path, "rb") as f:
            data = f.read()
        got = int.from_bytes(data[:4], "big")
        if got != magic:
            sys.exit(f"{path}: magic number {got:#010x}, expected {magic:#010x}")
        return data[header:]

    images = payload(f"{source}/{split}-images-idx3-ubyte.gz", 0x803, 16)
    labels = payload(f"{source}/{split}-labels-idx1-ubyte.gz", 0x801, 8)
    x = np.frombuffer(images, dtype=np.uint8).reshape(-1, 784)
    y = np.frombuffer(labels, dtype=np.uint8)
    return (torch.from_numpy(x.astype(np.float32) / 255.0),
            torch.from_numpy(y.astype(np.int64)))


def blas_in_use():
    """The BLAS library this process mapped, as the dynamic loader chose it."""
    with open("/proc/self/maps") as maps:
        names = {line.split()[-1] for line in maps if "blas" in line.lower()}
    return sorted(n for n in names if n.startswith("/"))


def model(seed):
    torch.manual_seed(seed)
    net = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128),
                        nn.ReLU(), nn.Linear(128, 10))
    for layer in net:
        if isinstance(layer, nn.Linear):
            nn.init.xavier_uniform_(layer.weight)
            nn.init.zeros_(layer.bias)
    return net


def accuracy(net, x, y):
    with torch.no_grad():
        return (net(x).argmax(1) == y).float().mean().item()


def train(rank, args, result):
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    if args.procs > 1:
        os.environ["MASTER_ADDR"] = "127.0.0.1"
        os.environ["MASTER_PORT"] = str(args.port)
        dist.init_process_group("gloo", rank=rank, world_size=args.procs)
    train_x, train_y = (t.to(device) for t in read_split(args.source, "train"))
    test_x, test_y = (t.to(device) for t in read_split(args.source, "t10k"))
    net = model(args.seed).to(device)
    if args.procs > 1:
        net = nn.parallel.DistributedDataParallel(net)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3, eps=1e-7)
    loss_fn = nn.CrossEntropyLoss()
    per_rank = args.batch // args.procs
    generator = torch.Generator().manual_seed(args.seed)
    order = torch.randperm(len(train_x), generator=generator).to(device)
    at = 0

    def step():
        nonlocal order, at
        if at + args.batch > len(order):
            order = torch.randperm(len(train_x), generator=generator).to(device)
            at = 0
        batch = order[at + rank * per_rank: at + (rank + 1) * per_rank]
        at += args.batch
        opt.zero_grad()
        loss = loss_fn(net(train_x[batch]), train_y[batch])
        loss.backward()
        opt.step()

    def barrier():
        if args.procs > 1:
            dist.barrier()
        if device.type == "cuda":
            torch.cuda.synchronize()

    # Steps/s: a warm-up, then a timed run without evaluation.
    for _ in range(20):
        step()
    barrier()
    start = time.perf_counter()
    for _ in range(args.steps):
        step()
    barrier()
    steps_per_s = args.steps / (time.perf_counter() - start)

    # Time to the target, from fresh weights, evaluating every eval_every.
    net_state = model(args.seed).state_dict()
    (net.module if args.procs > 1 else net).load_state_dict(net_state)
    # load_state_dict copies into the parameters where they live.
    opt = torch.optim.Adam(net.parameters(), lr=1e-3, eps=1e-7)
    barrier()
    start = time.perf_counter()
    reached, steps, acc = None, 0, 0.0
    while steps < args.max_steps:
        step()
        steps += 1
        if steps % args.eval_every == 0:
            flag = torch.zeros(1)
            if rank == 0:
                acc = accuracy(net, test_x, test_y)
                flag[0] = acc
            if args.procs > 1:
                dist.broadcast(flag, 0)
            if flag[0].item() >= args.target:
                reached = time.perf_counter() - start
                break
    if rank == 0:
        result.update({
            "framework": "torch", "procs": args.procs, "threads": args.threads,
            "global_batch": args.batch, "steps_per_s": round(steps_per_s, 2),
            "steps_to_target": steps if reached is not None else None,
            "seconds_to_target": round(reached, 2) if reached else None,
            "accuracy": round(float(flag[0].item()), 4),
            "device": args.device, "torch": torch.__version__,
            "blas": blas_in_use(),
        })
    if args.procs > 1:
        dist.destroy_process_group()


def worker(rank, args, queue):
    result = {}
    train(rank, args, result)
    if rank == 0:
        queue.put(result)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--procs", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batch", type=int, default=128, help="global batch")
    parser.add_argument("--steps", type=int, default=1000,
                        help="steps of the timed run")
    parser.add_argument("--target", type=float, default=0.85)
    parser.add_argument("--eval_every", type=int, default=100)
    parser.add_argument("--max_steps", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--port", type=int, default=29533)
    parser.add_argument("--source", default=SOURCE)
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    args = parser.parse_args()
    if args.device != "cpu" and args.procs != 1:
        sys.exit("--device=cuda times one process")
    if args.batch % args.procs:
        sys.exit(f"--batch {args.batch} does not divide over {args.procs} processes")
    if args.procs == 1:
        result = {}
        train(0, args, result)
    else:
        queue = mp.get_context("spawn").SimpleQueue()
        mp.spawn(worker, args=(args, queue), nprocs=args.procs, join=True)
        result = queue.get()
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
