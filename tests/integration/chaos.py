#!/usr/bin/env python3
"""tests/integration/chaos.py - random SIGKILLs of servers and workers during a
shardps-launch job with spares, and what the job made of them.

Starts one sync job (spare servers, --respawn so every killed server's place
gets a new spare and every killed worker is started again to rejoin,
checkpoints, --min-workers 1), waits for its first complete checkpoint, then
kills a random live server or worker every random --gap seconds until
--kills are done: half the kills (--worker-share), at random places in the
sequence, take a random worker (until the last epoch starts), the others a
random live server. A worker
is killed only while every worker is live (killing the last one would end
the job): such a kill waits for the rejoin. Which pid is which node is read
from the scheduler's log lines (registrations, joins and failovers). At the
end it checks that the job ended ok, that every server kill was a
replacement in the summary and every worker kill a leave and a join, that
the accuracy reaches --min-accuracy and that no process of the job is left,
and prints the replacements' detection and recovery times (median, max).

Used by test_chaos.sh (20 kills of servers and workers) and, with
--servers-only, to measure recovery times (docs/failures.md, "Measuring
recovery"). Exit status 0 when every check holds, 1 otherwise.
"""
import argparse
import json
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import time

TRAIN_SAMPLES = 60000  # Fashion-MNIST's training set


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie is dead for us: its parent (the launcher) reaps it.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class Nodes:
    """Which pid is which node, from the scheduler's log lines."""

    REG = re.compile(r" C I registered ([SW])(\d+) \(pid (\d+)")
    JOIN = re.compile(r"membership: W(\d+) \(pid (\d+)\) joins at step")
    LEAVE = re.compile(r"membership: lost W(\d+) ")
    # The job's step, from whichever line names it: worker 0's progress
    # lines stop while it is out, the scheduler's joins, leaves and
    # checkpoints go on.
    PROGRESS = re.compile(r" W0 I epoch=(\d+)/\d+ step=(\d+)/")
    STEP = re.compile(r"(?:joins|lost W\d+ \(pid \d+\)) at step (\d+)|checkpoint step-(\d+) "
                      r"complete|rolls back to step (\d+)")
    FAILOVER = re.compile(r"failover \d+: lost S(\d+) \(pid \d+\).*(?:spare|its replica) S\d+ "
                          r"\(pid (\d+)")
    IN_STEP = re.compile(r"S\d+ is in step with S(\d+)|the replica of S(\d+) is rebuilt")
    PID = re.compile(r"\(pid (\d+)")

    def __init__(self, log, steps_per_epoch):
        self.log = log
        self.spe = steps_per_epoch
        self.at = 0
        self.servers = {}    # rank -> pid serving it now
        self.workers = {}    # rank -> pid
        self.out = set()     # worker ranks killed or left out and not joined again
        self.step = 0        # the newest step a line named
        self.replacing = set()  # server ranks killed and not yet replaced
        self.replicated = set()  # --replicas: server ranks whose replica is in step
        self.seen = set()    # every pid the log named

    def update(self):
        with open(self.log, errors="replace") as f:
            f.seek(self.at)
            text = f.read()
        cut = text.rfind("\n") + 1
        self.at += len(text[:cut].encode(errors="replace"))
        for line in text[:cut].splitlines():
            self.seen.update(int(p) for p in self.PID.findall(line))
            m = self.REG.search(line)
            if m:
                (self.servers if m[1] == "S" else self.workers)[int(m[2])] = int(m[3])
            m = self.PROGRESS.search(line)
            if m:
                self.step = max(self.step, (int(m[1]) - 1) * self.spe + int(m[2]))
            m = self.STEP.search(line)
            if m:
                self.step = max(self.step, int(next(g for g in m.groups() if g)))
            m = self.JOIN.search(line)
            if m:
                self.workers[int(m[1])] = int(m[2])
                self.out.discard(int(m[1]))
            m = self.LEAVE.search(line)
            if m:
                self.out.add(int(m[1]))
            m = self.IN_STEP.search(line)
            if m:
                self.replicated.add(int(m[1] or m[2]))
            m = self.FAILOVER.search(line)
            if m:
                self.servers[int(m[1])] = int(m[2])
                self.replacing.discard(int(m[1]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--launch", required=True, help="the shardps-launch binary")
    ap.add_argument("--dir", required=True, help="where the log, summary and checkpoints go")
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--servers", type=int, default=2)
    ap.add_argument("--workers", type=int, default=3)
    ap.add_argument("--spares", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--batch", type=int, default=64, help="per worker")
    ap.add_argument("--checkpoint-every", type=int, default=50)
    ap.add_argument("--servers-only", action="store_true", help="kill servers only")
    ap.add_argument("--replicas", type=int, default=0,
                    help="--replicas K: a server is killed only once its replica is in step")
    ap.add_argument("--no-checkpoints", action="store_true",
                    help="no checkpoint directory (with --replicas: takeovers only)")
    ap.add_argument("--dump-params", help="passed on: the final parameters")
    ap.add_argument("--worker-share", type=float, default=0.5,
                    help="of the kills that take a worker")
    ap.add_argument("--min-accuracy", type=float, default=0.87)
    ap.add_argument("--gap", type=float, nargs=2, default=(0.2, 0.7), metavar=("MIN", "MAX"),
                    help="seconds between kills, drawn uniformly")
    ap.add_argument("--seed", type=int, default=None, help="of the kills (default: random)")
    ap.add_argument("--timeout", type=float, default=540)
    ap.add_argument("--peer-timeout", default="2",
                    help="seconds of silence that make a node lost (a loaded machine "
                         "may pause a process for a second)")
    a = ap.parse_args()
    seed = a.seed if a.seed is not None else random.SystemRandom().randrange(1 << 30)
    rng = random.Random(seed)
    log = os.path.join(a.dir, "chaos.log")
    summary = os.path.join(a.dir, "chaos.json")
    ckdir = os.path.join(a.dir, "ck")
    cmd = [a.launch, "--servers", str(a.servers), "--workers", str(a.workers),
           "--spares", str(a.spares), "--respawn", str(2 * a.kills), "--min-workers", "1",
           "--epochs", str(a.epochs), "--batch", str(a.batch),
           "--peer-timeout", a.peer_timeout, "--summary", summary,
           "--timeout", str(a.timeout), "--log-level", "info", "--progress", "0.2"]
    if not a.no_checkpoints:
        cmd += ["--checkpoint-every", str(a.checkpoint_every), "--checkpoint-dir", ckdir]
    if a.replicas:
        cmd += ["--replicas", str(a.replicas)]
    if a.dump_params:
        cmd += ["--dump-params", a.dump_params]
    print(f"chaos: seed {seed}: {' '.join(cmd)}", flush=True)
    with open(log, "w") as out:
        job = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                               start_new_session=True)
    spe = TRAIN_SAMPLES // (a.workers * a.batch)  # as the scheduler counts them
    last_epoch = (a.epochs - 1) * spe  # its first step
    nodes = Nodes(log, spe)
    problems = []
    kills = []  # (seconds since the first kill, node)
    deadline = time.monotonic() + a.timeout + 30
    # The first kill once a checkpoint is complete (or, without checkpoints,
    # once training runs).
    while job.poll() is None and time.monotonic() < deadline:
        nodes.update()
        if (os.path.exists(os.path.join(ckdir, "latest")) if not a.no_checkpoints
                else nodes.step > 0):
            break
        time.sleep(0.05)
    # Which kills take a worker, at random places in the sequence.
    nworker = 0 if a.servers_only else round(a.kills * a.worker_share)
    worker_kill = set(rng.sample(range(a.kills), nworker))
    t0 = time.monotonic()
    while len(kills) < a.kills and job.poll() is None and time.monotonic() < deadline:
        time.sleep(rng.uniform(*a.gap))
        nodes.update()
        # In the last epoch a killed worker might come back too late to
        # join (a job at its last step takes none): servers only then.
        if len(kills) in worker_kill and nodes.step < last_epoch:
            live = [(r, p) for r, p in sorted(nodes.workers.items())
                    if r not in nodes.out and alive(p)]
            cands = [("W", r, p) for r, p in live] if len(live) == a.workers else []
        else:
            cands = [("S", r, p) for r, p in sorted(nodes.servers.items())
                     if r not in nodes.replacing and alive(p) and
                     (not a.replicas or r in nodes.replicated)]
        if not cands or job.poll() is not None:
            continue
        role, rank, pid = rng.choice(cands)
        os.kill(pid, signal.SIGKILL)
        if role == "S":
            nodes.replacing.add(rank)
            nodes.replicated.discard(rank)
        else:
            nodes.out.add(rank)
        kills.append((time.monotonic() - t0, f"{role}{rank}"))
        print(f"chaos: kill {len(kills)} at {kills[-1][0]:.1f} s: {role}{rank} (pid {pid})",
              flush=True)
    try:
        rc = job.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        os.killpg(job.pid, signal.SIGKILL)
        rc = job.wait()
        problems.append("the job hangs")
    nodes.update()
    if len(kills) < a.kills:
        problems.append(f"the job ended after {len(kills)} of {a.kills} kills")
    if rc != 0:
        problems.append(f"shardps-launch exited {rc}")
    server_kills = sum(1 for _, n in kills if n[0] == "S")
    worker_kills = len(kills) - server_kills
    reps = []
    try:
        with open(summary) as f:
            d = json.load(f)
        reps = d.get("server_replacements", [])
        acc = d.get("test_accuracy", -1)
        if d.get("status") != "ok":
            problems.append(f"status {d.get('status')}: {d.get('failure')}")
        if len(reps) != server_kills:
            problems.append(f"{len(reps)} replacements for {server_kills} server kills")
        # A worker killed near the end may come back after the others
        # finished the job: it (refused at the last step) or the launcher
        # (the scheduler gone) says so, and it owes no join.
        with open(log, errors="replace") as f:
            late = len(re.findall(r"the job ended before this worker took part in it", f.read()))
        if d.get("workers_joined", 0) != worker_kills - late:
            problems.append(f"{d.get('workers_joined')} joins for {worker_kills} worker kills "
                            f"({late} back after the job finished)")
        if acc < a.min_accuracy:
            problems.append(f"test accuracy {acc:.4f} < {a.min_accuracy}")
        print(f"chaos: {len(kills)} kills ({server_kills} servers, {worker_kills} workers), "
              f"test_accuracy {acc:.4f}, membership_changes {d.get('membership_changes')}, "
              f"workers_joined {d.get('workers_joined')}, steps_with_fewer_workers "
              f"{d.get('steps_with_fewer_workers')}, wall {d.get('wall_seconds', 0):.1f} s",
              flush=True)
    except (OSError, ValueError) as e:
        problems.append(f"no summary: {e}")
    time.sleep(0.5)
    left = sorted(p for p in nodes.seen if alive(p))
    if left:
        problems.append(f"processes left: {left}")
        for p in left:
            os.kill(p, signal.SIGKILL)
    rec = [r["recover_s"] for r in reps if r["recover_s"] >= 0]
    det = [r["detect_s"] for r in reps]
    total = [r["detect_s"] + r["recover_s"] for r in reps if r["recover_s"] >= 0]
    lost = [r["steps_lost"] for r in reps]
    if rec:
        print(f"chaos: recovery after detection: median {statistics.median(rec):.3f} s, "
              f"max {max(rec):.3f} s; detection: median {statistics.median(det):.2f} s, "
              f"max {max(det):.2f} s; steps lost: median {statistics.median(lost):.0f}, "
              f"max {max(lost)}; last heard to the first step after: median "
              f"{statistics.median(total):.3f} s, max {max(total):.3f} s (n={len(rec)})",
              flush=True)
    for p in problems:
        print(f"chaos: FAIL: {p} (seed {seed}; log {log})", flush=True)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
