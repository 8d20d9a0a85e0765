#!/usr/bin/env python3
"""A soak of a local Cohort cluster: many short jobs of mixed strategies while
agents, ps tasks and the coordinator itself are killed at random.

  tests/soak/soak.py --jobs=1000 --kills=40            # hours, for operators
  tests/soak/soak.py --jobs=30 --kills=5 --max_minutes=10  # what CI runs

Kills fall between the first 10% and 70% of the jobs; the last 30% run
undisturbed. At the end it checks that every job ended (SUCCEEDED, or
FAILED/CANCELLED with a cause), that none is stuck, that the store holds no
keys of finished jobs, that /dev/shm holds nothing left behind, and that
the processes kept their open files, threads and resident memory flat over
the undisturbed tail (and over the whole run, for those never killed). It
prints the figures after the warm-up, at the start of the tail and at the
end, and exits 1 when a check fails. Every wait has a deadline; it kills only processes it started or
that its coordinator launched, by pid.
"""

import argparse
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

STRATEGIES = ["multi_worker_mirrored", "mirrored", "one_device",
              "central_storage", "parameter_server"]
TERMINAL = {"JOB_SUCCEEDED", "JOB_FAILED", "JOB_CANCELLED"}
# Growth beyond these, for a process that lived through the run, is a leak.
MAX_FD_GROWTH = 16
MAX_THREAD_GROWTH = 16
MAX_RSS_GROWTH = 1.5  # end <= start * this + 32 MiB


def log(*parts):
    print(time.strftime("%H:%M:%S"), *parts, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """A coordinator (and the tasks it launches) in a scratch state dir."""

    def __init__(self, build, work, cpu_devices):
        self.bin = os.path.join(build, "bin")
        self.work = work
        self.address = "127.0.0.1:%d" % free_port()
        self.spec = os.path.join(work, "cluster.json")
        ports = [free_port() for _ in range(4)]
        with open(self.spec, "w") as f:
            json.dump({"cluster": {
                "chief": ["127.0.0.1:%d" % ports[0]],
                "worker": ["127.0.0.1:%d" % ports[1]],
                "ps": ["127.0.0.1:%d" % p for p in ports[2:]]}}, f)
        self.cpu_devices = cpu_devices
        self.coordinator = None
        self.coordinator_log = open(os.path.join(work, "coordinator.log"), "ab")
        self.restarts = 0

    def start_coordinator(self):
        self.coordinator = subprocess.Popen(
            [os.path.join(self.bin, "cohort-coordinator"),
             "--cluster_spec=" + self.spec, "--listen=" + self.address,
             "--state_dir=" + os.path.join(self.work, "state"),
             "--cpu_devices=%d" % self.cpu_devices,
             "--heartbeat_timeout=3s", "--restart_backoff=200ms",
             "--restart_backoff_max=2s", "--task_orphan_timeout=60s"],
            stdout=self.coordinator_log, stderr=subprocess.STDOUT)

    def ctl(self, *args, timeout=30):
        result = subprocess.run(
            [os.path.join(self.bin, "cohortctl"),
             "--coordinator=" + self.address, *args],
            capture_output=True, text=True, timeout=timeout)
        return result.returncode, result.stdout, result.stderr

    def state(self):
        try:
            code, out, _ = self.ctl("status", "--json", timeout=10)
        except subprocess.TimeoutExpired:
            return None
        return json.loads(out) if code == 0 else None

    def jobs(self):
        try:
            code, out, _ = self.ctl("jobs", "--json", timeout=20)
        except subprocess.TimeoutExpired:
            return None
        if code != 0:
            return None
        parsed = json.loads(out)
        return parsed.get("jobs", []) if isinstance(parsed, dict) else parsed

    def task_pids(self):
        """{"worker:0": pid} of the tasks the coordinator shows alive."""
        state = self.state() or {}
        pids = {}
        for task in state.get("tasks", []):
            name = "%s:%d" % (task["type"], task.get("index", 0))
            if task.get("state") == "READY" and int(task.get("pid", 0)) > 0:
                pids[name] = int(task["pid"])
        return pids

    def wait_ready(self, deadline_s):
        end = time.time() + deadline_s
        while time.time() < end:
            state = self.state()
            if state and state.get("tasks") and all(
                    t.get("state") == "READY" for t in state["tasks"]):
                return True
            time.sleep(0.5)
        return False

    def kill_coordinator(self):
        self.coordinator.kill()
        self.coordinator.wait(timeout=10)
        self.restarts += 1
        self.start_coordinator()

    def stop(self):
        pids = list(self.task_pids().values())
        if self.coordinator and self.coordinator.poll() is None:
            self.coordinator.send_signal(signal.SIGTERM)
            try:
                self.coordinator.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.coordinator.kill()
                self.coordinator.wait(timeout=10)
        # Tasks the coordinator launched, should it have left any.
        for pid in pids:
            if is_cohort_process(pid):
                os.kill(pid, signal.SIGKILL)


def is_cohort_process(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return b"cohort-" in f.read()
    except OSError:
        return False


def figures(pid):
    """Open files, threads and resident KiB of `pid`, or None if gone."""
    try:
        fds = len(os.listdir("/proc/%d/fd" % pid))
        status = {}
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                key, _, value = line.partition(":")
                status[key] = value.split()
        return {"fds": fds, "threads": int(status["Threads"][0]),
                "rss_kib": int(status["VmRSS"][0])}
    except (OSError, KeyError, IndexError):
        return None


def processes(cluster):
    procs = {"coordinator": cluster.coordinator.pid}
    procs.update(cluster.task_pids())
    return {name: (pid, figures(pid)) for name, pid in procs.items()}


def compare(label, before, after):
    """Prints `before` and `after` side by side; the leaks, as failures."""
    print("%s:\n%-12s %8s %8s | %6s %6s | %7s %7s | %9s %9s" % (
        label, "process", "pid", "end pid", "fds", "end", "threads", "end",
        "rss KiB", "end"))
    failures = []
    for name in sorted(after):
        start_pid, start = (before or {}).get(name, (None, None))
        end_pid, end = after[name]
        if start is None or end is None:
            continue
        same = start_pid == end_pid
        print("%-12s %8d %8d | %6d %6d | %7d %7d | %9d %9d%s" % (
            name, start_pid, end_pid, start["fds"], end["fds"],
            start["threads"], end["threads"], start["rss_kib"],
            end["rss_kib"], "" if same else "  (restarted)"))
        if not same:
            continue  # a fresh process says nothing of leaks
        if end["fds"] > start["fds"] + MAX_FD_GROWTH:
            failures.append("%s open files grew %d -> %d" %
                            (name, start["fds"], end["fds"]))
        if end["threads"] > start["threads"] + MAX_THREAD_GROWTH:
            failures.append("%s threads grew %d -> %d" %
                            (name, start["threads"], end["threads"]))
        if end["rss_kib"] > start["rss_kib"] * MAX_RSS_GROWTH + 32768:
            failures.append("%s resident memory grew %d -> %d KiB" %
                            (name, start["rss_kib"], end["rss_kib"]))
    return failures


def shm_entries():
    try:
        return {n for n in os.listdir("/dev/shm") if n.startswith("cohort")}
    except OSError:
        return set()


def submit(cluster, library, n, rng):
    strategy = STRATEGIES[n % len(STRATEGIES)]
    config = json.dumps({"dim": 4, "num_examples": 256,
                         "true_w": [0.5, -1.25, 2.0, 0.75], "true_b": 0.3,
                         "step_sleep_ms": rng.choice([0, 2, 5])})
    args = ["submit", "--library=" + library, "--init=linear_init",
            "--step=linear_step", "--dataset=linear_data",
            "--steps=%d" % rng.choice([20, 40, 60]), "--global_batch=16",
            "--strategy=" + strategy, "--checkpoint_every=10",
            "--max_restarts=5", "--collective_timeout=20s",
            "--name=soak-%d" % n, "--config=" + config]
    code, out, err = cluster.ctl(*args, timeout=60)
    if code != 0:
        return None, err.strip() or out.strip()
    return out.strip().split()[-1], None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", default="build", help="the build directory")
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--kills", type=int, default=40,
                        help="processes to kill over the run (about 1 in 5 "
                        "is the coordinator)")
    parser.add_argument("--max_minutes", type=float, default=240,
                        help="give up (and fail) after this long")
    parser.add_argument("--queue", type=int, default=4,
                        help="jobs waiting at most at any time")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--cpu_devices", type=int, default=2)
    parser.add_argument("--keep", action="store_true",
                        help="keep the scratch dir (logs, state)")
    args = parser.parse_args()

    rng = random.Random(args.seed)
    build = os.path.abspath(args.build)
    library = os.path.join(build, "lib", "libcohort_example_linear.so")
    if not os.path.exists(library):
        sys.exit("soak: %s is missing; build first (tools/build.sh)" % library)
    work = tempfile.mkdtemp(prefix="cohort-soak-")
    shm_before = shm_entries()
    cluster = Cluster(build, work, args.cpu_devices)
    deadline = time.time() + args.max_minutes * 60
    failures = []
    try:
        cluster.start_coordinator()
        if not cluster.wait_ready(120):
            sys.exit("soak: the cluster did not become READY in 120 s; "
                     "see " + work)
        log("cluster READY at", cluster.address, "scratch", work)

        submitted, ids, refused = 0, [], []
        start_figures = None
        kills_done = 0
        # Kills spread over the middle of the run, not the warm-up or the
        # tail, over which the figures are compared.
        first = max(1, args.jobs // 10)
        tail = max(first + 1, args.jobs * 7 // 10)
        kill_at = sorted(rng.randrange(first, tail) for _ in range(args.kills))
        tail_figures = None
        last_progress = 0
        while time.time() < deadline:
            jobs = cluster.jobs()
            if jobs is None:  # the coordinator is restarting
                time.sleep(0.5)
                continue
            ended = [j for j in jobs if j.get("state") in TERMINAL]
            waiting = len(jobs) - len(ended)
            if start_figures is None and len(ended) >= min(5, args.jobs):
                start_figures = processes(cluster)
            if tail_figures is None and not kill_at and len(ended) >= tail:
                # Let restarted tasks register before they are measured.
                cluster.wait_ready(60)
                tail_figures = processes(cluster)
            while waiting < args.queue and submitted < args.jobs:
                job_id, error = submit(cluster, library, submitted, rng)
                submitted += 1
                if job_id is None:
                    refused.append(error)
                else:
                    ids.append(job_id)
                    waiting += 1
            while kill_at and kill_at[0] <= len(ended):
                kill_at.pop(0)
                kills_done += 1
                pids = cluster.task_pids()
                if rng.random() < 0.2 or not pids:
                    log("kill coordinator pid", cluster.coordinator.pid)
                    cluster.kill_coordinator()
                else:
                    name = rng.choice(sorted(pids))
                    log("kill", name, "pid", pids[name])
                    if is_cohort_process(pids[name]):
                        os.kill(pids[name], signal.SIGKILL)
            if len(ended) - last_progress >= max(1, args.jobs // 20):
                last_progress = len(ended)
                log("%d/%d jobs ended, %d kills" %
                    (len(ended), args.jobs, kills_done))
            if submitted >= args.jobs and waiting == 0:
                break
            time.sleep(0.3)
        else:
            # Only the job loop is bounded by --max_minutes; the settling
            # and the shutdown after it have deadlines of their own.
            failures.append("the jobs had not all ended when "
                            "--max_minutes=%g passed" % args.max_minutes)

        jobs = cluster.jobs() or []
        by_state = {}
        for job in jobs:
            by_state[job.get("state")] = by_state.get(job.get("state"), 0) + 1
            state = job.get("state")
            if state not in TERMINAL:
                failures.append("job %s is stuck in %s" % (job["job_id"], state))
            elif state != "JOB_SUCCEEDED" and not job.get("error"):
                failures.append("job %s ended %s without a cause" %
                                (job["job_id"], state))
            elif state != "JOB_SUCCEEDED":
                log("job %s (%s) %s: %s" % (
                    job["job_id"], job["spec"].get("strategy"), state,
                    job["error"]))
        if len(jobs) != len(ids):
            failures.append("%d jobs accepted, %d listed" % (len(ids), len(jobs)))
        for error in refused:
            failures.append("a submission was refused: " + error)

        # Let the coordinator's second sweep and the tasks settle.
        keys = None
        settle = time.time() + 45
        while time.time() < settle:
            keys = int((cluster.state() or {}).get("store_keys", -1))
            if keys == 0:
                break
            time.sleep(1)
        if keys != 0:
            failures.append("the store still holds %s keys" % keys)
        end_figures = processes(cluster)

        log("jobs:", json.dumps(by_state), "kills:", kills_done,
            "coordinator restarts:", cluster.restarts)
        log("store keys at the end:", keys)
        failures += compare("after the warm-up", start_figures, end_figures)
        failures += compare("over the undisturbed tail", tail_figures,
                            end_figures)
    finally:
        cluster.stop()
        leftover = shm_entries() - shm_before
        if leftover:
            failures.append("/dev/shm holds %s" % sorted(leftover))
        log("/dev/shm entries left behind:", len(leftover))
        if not args.keep and not failures:
            shutil.rmtree(work, ignore_errors=True)
    for failure in failures:
        log("FAIL:", failure)
    if failures:
        log("logs and state kept in", work)
        return 1
    log("soak passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
