"""Site simulation: 10,000 storage nodes x 1,000 users, the edges in-process, the center's weight step for real.

    .venv/bin/python -m benchmarks.site_simulation [--nodes 10000] [--users 1000] [--seconds 20] [--step-iterations N]

What is simulated, and how:
  - the edges: every node's read bandwidth (one resource per node, 60-200 MB/s) is shared at every
    tick (TICK_SECONDS) by weighted water-filling of the users' true demands with the node's current
    local weights (policy.water_filling): the fluid limit of a per-packet weighted scheduler,
    work-conserving at once;
  - the agents: each control period they send the center a demand summary per (user, node): held
    (served less than it asked: it wants at least HELD_GROWTH times what it moved, a lower bound that
    gets no standby weight) or what it moved (given all it asked, its standby weight lets it grow at once);
  - the center: every CONTROL_SECONDS the real weight step (policy.local_weights, warm-started from
    its last weights), then only nodes where some share moved beyond the hysteresis
    (policy.hysteresis: a user's rate there, for the demands the center knows, would move by more
    than --hysteresis) get the new weights once the step's own CPU time has passed (from the next
    tick at the soonest), and the next step comes a period after that, on the rates the agents saw
    since, as in the coordinator's control loop (coordinator/control_loop.py). Its CPU per step is
    printed.
Users: weights 1-10; 60% read without pause from every node, 40% are light (Pareto-distributed
bytes/s per node). At --change-at seconds, the first half of the users go idle on the first half
of the nodes.
Measured every half second against the weighted max-min of the true demands at that moment (the
weight step run to convergence: the exact solver cannot run at this size; benchmarks.weight_step_fairness
checks the step against it): min over users of (total / fair total), the min-max ratio of those
(Pisces' measure), and utilisation (bytes moved / what the nodes could move for the demands). The
baseline, in the same run: the same edges with Algorithm 1's weights (each user's priority on every
node) and no center. Target: settled within 5 s of the change (min ratio >= 0.95 from then on).
"""

import argparse
import os
import sys
import time

import numpy as np

from benchmarks.policy_instances import MB, machine
from vnode_sync.coordinator.policy.hysteresis import THRESHOLD, nodes_to_send, rates_moved
from vnode_sync.coordinator.policy.local_weights import local_weights
from vnode_sync.coordinator.policy.water_filling import water_fill

TICK_SECONDS = 0.1
CONTROL_SECONDS = 1.0
PRINT_SECONDS = 0.5
HELD = 0.98            # served below this fraction of what it asked: held, it would take more
HEADROOM = 1.0        # a user given all it wants is counted at what it moved: its standby weight lets it grow at once
HELD_GROWTH = 4.0      # a held user is taken to want four times what it moved (a lower bound, no standby weight)
SETTLED = 0.95


class Site:
    def __init__(self, nodes: int, users: int, seed: int):
        rng = np.random.default_rng(seed)
        self.capacity = rng.uniform(60, 200, nodes) * MB
        self.weight = rng.integers(1, 11, users).astype(float)
        light = rng.random(users) < 0.4
        demand = np.full((users, nodes), np.inf, dtype=np.float32)
        demand[light] = (rng.pareto(1.5, (int(light.sum()), nodes)) * 0.02 * MB).astype(np.float32)
        self.base_demand = demand
        self.demand = demand.copy()

    def go_idle(self) -> None:
        users, nodes = self.demand.shape
        self.demand[: users // 2, : nodes // 2] = 0.0

    def ceiling(self) -> np.ndarray:
        return np.minimum(self.demand, self.capacity.astype(np.float32)[None, :])

    def fair_totals(self, iterations: int) -> np.ndarray:
        users = len(self.weight)
        return local_weights(self.capacity, self.weight, self.demand, np.zeros(users), np.full(users, np.inf),
                             max_iterations=iterations, tolerance=0.0).totals()


class Edges:
    """The nodes' schedulers, as a fluid: one water-filling per tick."""

    def __init__(self, site: Site, weight: np.ndarray):
        self.site = site
        self.weight = weight.astype(np.float32)
        self.level = None
        self.moved = np.zeros_like(self.weight)      # bytes over the control period, per (user, node)
        self.asked = np.zeros_like(self.weight)      # bytes they would have taken (held if more than moved)
        self.served = None

    def tick(self, ceiling: np.ndarray) -> np.ndarray:
        self.served, self.level = water_fill(self.weight, self.site.capacity, ceiling, level=self.level)
        self.moved += self.served * TICK_SECONDS
        self.asked += ceiling * TICK_SECONDS
        return self.served

    def summary(self, seconds: float) -> tuple[np.ndarray, np.ndarray]:
        """The agents' demand summaries for the last period, (demand, held); resets the counters."""
        rate = self.moved / seconds
        held = self.moved < HELD * self.asked
        demand = rate * np.where(held, HELD_GROWTH, HEADROOM)
        self.restart()
        return demand, held

    def restart(self) -> None:
        """The next summary counts from here."""
        self.moved[:] = 0
        self.asked[:] = 0


def measure(served: np.ndarray, fair: np.ndarray, site: Site, ceiling: np.ndarray) -> tuple[float, float, float]:
    totals = served.sum(axis=1, dtype=np.float64)
    counted = fair > 1e-6 * site.capacity.max()
    ratio = totals[counted] / fair[counted]
    possible = np.minimum(ceiling.sum(axis=0, dtype=np.float64), site.capacity).sum()
    return float(ratio.min()), float(ratio.min() / ratio.max()), float(served.sum(dtype=np.float64) / possible)


def run(nodes: int, users: int, seconds: float, change_at: float, seed: int, fair_iterations: int,
        hysteresis: float, step_iterations: int | None = None) -> int:
    site = Site(nodes, users, seed)
    users_ = len(site.weight)
    static = np.broadcast_to(site.weight[:, None], (users_, nodes))
    center = Edges(site, static)
    baseline = Edges(site, static)
    no_floor, no_limit = np.zeros(users_), np.full(users_, np.inf)
    t0 = time.process_time()
    fair = site.fair_totals(fair_iterations)
    print(f"# the fair totals (step to convergence, {fair_iterations} iterations): {time.process_time() - t0:.1f} s of CPU",
          flush=True)
    previous = None
    sent = center.weight.copy()
    print(f"{'t s':>5} {'center: min':>11} {'min-max':>8} {'use':>6} | {'static: min':>11} {'min-max':>8} {'use':>6} "
          f"| center step")
    ticks = int(round(seconds / TICK_SECONDS))
    per_control = int(round(CONTROL_SECONDS / TICK_SECONDS))
    per_print = int(round(PRINT_SECONDS / TICK_SECONDS))
    change_tick = int(round(change_at / TICK_SECONDS))
    pending: np.ndarray | None = None      # weights decided, applied from tick `applies`
    applies = 0
    next_control = per_control
    last_summary = 0
    step_note = ""
    history = []
    for tick in range(1, ticks + 1):
        if tick == change_tick + 1:
            site.go_idle()
            t0 = time.process_time()
            fair = site.fair_totals(fair_iterations)
            print(f"# t={change_at:.1f} s: users 0-{users_ // 2 - 1} idle on nodes 0-{nodes // 2 - 1}; new fair totals "
                  f"in {time.process_time() - t0:.1f} s of CPU", flush=True)
        if pending is not None and tick >= applies:
            center.weight = pending
            pending = None
            # The agents' rates are recent (a report's 0.5 s window), not an average over a period
            # that began under the old weights: the next summary starts here.
            center.restart()
            last_summary = tick - 1   # this tick's bytes are the first counted
        ceiling = site.ceiling()
        served = center.tick(ceiling)
        served_static = baseline.tick(ceiling)
        if tick >= next_control and pending is None:
            period = (tick - last_summary) * TICK_SECONDS
            last_summary = tick
            demand, held = center.summary(period)
            baseline.summary(period)
            t0 = time.process_time()
            step = local_weights(site.capacity, site.weight, demand, no_floor, no_limit, previous=previous, held=held,
                                 max_iterations=step_iterations)
            step_cpu = time.process_time() - t0
            previous = step.weight
            send = nodes_to_send(rates_moved(step.realised(sent), step.allocation, hysteresis), np.arange(nodes), nodes)
            sent[:, send] = step.weight[:, send]
            pending = sent.copy()
            applies = tick + max(1, int(np.ceil(step_cpu / TICK_SECONDS)))
            next_control = applies + per_control     # the loop waits a period after each tick (control_loop.py)
            step_note = f"{step_cpu:.2f} s CPU, {step.iterations} it, {len(send)} nodes sent"
        if tick % per_print == 0:
            now = tick * TICK_SECONDS
            c = measure(served, fair, site, ceiling)
            s = measure(served_static, fair, site, ceiling)
            history.append((now, c))
            print(f"{now:>5.1f} {c[0]:>11.3f} {c[1]:>8.3f} {c[2]:>6.3f} | {s[0]:>11.3f} {s[1]:>8.3f} {s[2]:>6.3f} "
                  f"| {step_note}", flush=True)
            step_note = ""
    after = [(t, m) for t, m in history if t > change_at]
    unsettled = [t for t, m in after if m[0] < SETTLED]
    settle = (max(unsettled) - change_at + PRINT_SECONDS) if unsettled else 0.0
    ok = bool(after) and (not unsettled or max(unsettled) < after[-1][0]) and settle <= 5.0
    print(f"settled {settle:.1f} s after the change (min ratio >= {SETTLED} from then on, sampled every "
          f"{PRINT_SECONDS} s; control period {CONTROL_SECONDS} s, edge tick {TICK_SECONDS} s): "
          f"{'met' if ok else 'NOT met'} (target <= 5 s)")
    return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--users", type=int, default=1_000)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--change-at", type=float, default=8.0)
    parser.add_argument("--fair-iterations", type=int, default=300)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--hysteresis", type=float, default=THRESHOLD,
                        help="a node gets new weights when a user's rate there would move by more than this fraction")
    parser.add_argument("--step-iterations", type=int, default=None,
                        help="iterations of each center step (default: the policy's own budget)")
    args = parser.parse_args()
    print(f"# {machine()}")
    print(f"$ python -m benchmarks.site_simulation --nodes {args.nodes} --users {args.users} --seconds {args.seconds} "
          f"--change-at {args.change_at} --hysteresis {args.hysteresis}"
          + (f" --step-iterations {args.step_iterations}" if args.step_iterations else ""), flush=True)
    code = run(args.nodes, args.users, args.seconds, args.change_at, args.seed, args.fair_iterations, args.hysteresis,
               args.step_iterations)
    print(f"load average at the end {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return code


if __name__ == "__main__":
    sys.exit(main())
