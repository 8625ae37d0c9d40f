"""Site simulation: 10,000 storage nodes x 1,000 users, the edges in-process, the center's weight step for real.

    .venv/bin/python -m benchmarks.site_simulation [--nodes 10000] [--users 1000] [--seconds 20] [--step-iterations N]

What is simulated, and how:
  - the edges: every node's read bandwidth (one resource per node, 60-200 MB/s) is shared at every
    tick (TICK_SECONDS) by weighted water-filling of the users' true demands with the node's current
    local weights (policy.water_filling): the fluid limit of a per-packet weighted scheduler,
    work-conserving at once;
  - the agents (agents/storage/agent.py): each node's agent reports every --report-seconds (1 s,
    the agents' default; the nodes' reports spread over the period), and at once when it applies new
    weights, with the next report a rate span (0.5 s) after those (agents/storage/report_interval.py);
    between reports it looks at its demand every --probe-seconds (0.25 s) and reports at once where a
    user's moved sharply (stopped, came back, halved or doubled), once its rates are a span old;
    a report gives, per user, the rate since the node's last report and whether it was held (served
    less than it asked: it wants what its waits say, rate / (1 - the part of its time it waited),
    which for a client that would take `asked` is `asked`, at most HELD_GROWTH times what it moved;
    a lower bound that gets no standby weight) or not (given all it asked: its rate, and its
    standby weight lets it grow at once). The center has each node's last report;
  - the center: the real weight step (policy.local_weights, warm-started from its last weights and
    levels, its iterations within STEP_SHARE of the period as in coordinator/control/weight_control.py), then
    only nodes where some share moved beyond the hysteresis (policy.hysteresis.THRESHOLD: a user's rate
    there, for the demands the center knows, would move by more than --hysteresis) get the new weights once
    the step's own elapsed time has passed (from the next tick at the soonest; its threads work
    blocks of columns at once, policy.column_shards, so the simulation is otherwise still while it
    runs). As the coordinator's control loop runs (coordinator/api/control_loop.py), the next step begins
    a period after this one began (at once if it took longer), and not before every node sent weights
    has reported an interval measured under them (at most AWAIT_PERIODS periods). Each step's
    elapsed time and CPU (all its threads) are printed.
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
from benchmarks.scenario_runner import cpu
from vnode_sync.agents.config import PROBE_SECONDS
from vnode_sync.agents.storage.demand import FLOW_SPAN_SECONDS, HELD_GROWTH
from vnode_sync.agents.storage.demand_summary import FLOOR_BPS, SHARP
from vnode_sync.agents.storage.report_interval import next_report_in
from vnode_sync.coordinator.api.control_loop import AWAIT_PERIODS
from vnode_sync.coordinator.policy.hysteresis import THRESHOLD, nodes_to_send, rates_moved
from vnode_sync.coordinator.policy.local_weights import local_weights
from vnode_sync.coordinator.policy.water_filling import water_fill
from vnode_sync.coordinator.control.weight_control import STEP_SHARE

TICK_SECONDS = 0.1
CONTROL_SECONDS = 1.0
PRINT_SECONDS = 0.5
REPORT_SECONDS = 1.0   # agents/config.py's report_seconds
HELD = 0.98            # served below this fraction of what it asked: held, it would take more
HEADROOM = 1.0        # a user given all it wants is counted at what it moved: its standby weight lets it grow at once
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
        self.served = None

    def tick(self, ceiling: np.ndarray) -> np.ndarray:
        self.served, self.level = water_fill(self.weight, self.site.capacity, ceiling, level=self.level)
        return self.served


class Agents:
    """Every node's agent (agents/storage/agent.py): counts each user's bytes and reports every
    `report_seconds` (the nodes' first reports spread over a period), and at once when new weights
    are applied, after which its next report is `next_in` ticks away (a rate span); between reports
    it looks every `probe_seconds` (0: never) and reports at once where a user's demand moved sharply
    (probe; its rates are those since the last report, where the agent's span its last 0.5 s and see
    a stop sooner). Each report gives (demand, held) over the interval since the node's last one (the
    agent's rates span 0.5 s at least: with reports under 0.5 s apart this is fresher than the
    agent). `demand` and `held` are what the center has: each node's last report."""

    def __init__(self, shape: tuple[int, int], report_seconds: float, probe_seconds: float = PROBE_SECONDS):
        self.moved = np.zeros(shape, dtype=np.float32)      # bytes since the node's last report, per (user, node)
        self.asked = np.zeros(shape, dtype=np.float32)      # bytes they would have taken (held if more than moved)
        self.demand = np.zeros(shape, dtype=np.float32)
        self.held = np.zeros(shape, dtype=bool)
        self.per_report = max(1, int(round(report_seconds / TICK_SECONDS)))
        self.per_probe = max(1, int(round(probe_seconds / TICK_SECONDS))) if probe_seconds else 0
        self.per_span = int(round(FLOW_SPAN_SECONDS / TICK_SECONDS))
        nodes = shape[1]
        self.since = np.zeros(nodes, dtype=int)                    # the first tick the next report counts
        self.due = np.arange(nodes) % self.per_report + 1          # the tick of each node's next report
        self.applied = np.full(nodes, -1)          # the tick each node's current weights apply from
        self.measured_from = np.zeros(nodes, dtype=int)   # the first tick of each node's last report

    def measured_under_current(self, nodes: np.ndarray) -> bool:
        """Whether each of these nodes has reported an interval wholly under its current weights."""
        return bool((self.measured_from[nodes] >= self.applied[nodes]).all())

    def tick(self, tick: int, served: np.ndarray, ceiling: np.ndarray) -> None:
        self.moved += served * TICK_SECONDS
        self.asked += ceiling * TICK_SECONDS
        self.report(np.flatnonzero(self.due <= tick), tick)
        if self.per_probe and tick % self.per_probe == 0:
            self.probe(tick)

    def weights_applied(self, nodes: np.ndarray, tick: int, next_in: int) -> None:
        """New weights take effect on these nodes from `tick`: each reports what it measured before,
        and its next report, `next_in` ticks later, is the first measured under them."""
        self.report(nodes, tick - 1)
        self.due[nodes] = tick - 1 + next_in      # also where the last report came at tick - 1 already
        self.applied[nodes] = tick

    def probe(self, tick: int) -> None:
        """Between reports (agents/storage/report_interval.py): a node whose last report and weights are
        a rate span old or more looks at its demand, and reports at once if a user's moved sharply."""
        ready = np.flatnonzero((tick + 1 - np.maximum(self.since, self.applied) >= self.per_span) & (self.due > tick))
        if not len(ready):
            return
        demand, _ = self.estimate(ready, tick)
        old = self.demand[:, ready]
        # demand_summary.Entry.moved_sharply_from, on arrays
        sharp = np.abs(demand - old) > np.maximum(SHARP * np.maximum(demand, old), FLOOR_BPS)
        self.report(ready[sharp.any(axis=0)], tick)

    def estimate(self, nodes: np.ndarray, through: int) -> tuple[np.ndarray, np.ndarray]:
        """(demand, held) of these nodes over the ticks since their last report through `through`."""
        moved, asked = self.moved[:, nodes], self.asked[:, nodes]
        seconds = ((through - self.since[nodes] + 1) * TICK_SECONDS).astype(np.float32)
        held = moved < HELD * asked
        # A client that would take `asked` waits for the part of it not served (1 - moved / asked of its
        # time): the agent's rate / (1 - waited) is asked, up to HELD_GROWTH (demand.held_growth).
        with np.errstate(divide="ignore", invalid="ignore"):
            growth = np.where(held, np.minimum(HELD_GROWTH, asked / moved), HEADROOM)
        return moved / seconds * growth, held

    def report(self, nodes: np.ndarray, through: int) -> None:
        """These nodes report the ticks from their last report through `through`, and count anew."""
        nodes = nodes[self.since[nodes] <= through]
        if not len(nodes):
            return
        self.demand[:, nodes], self.held[:, nodes] = self.estimate(nodes, through)
        self.measured_from[nodes] = self.since[nodes]
        self.moved[:, nodes] = 0.0
        self.asked[:, nodes] = 0.0
        self.since[nodes] = through + 1
        self.due[nodes] = through + self.per_report


def measure(served: np.ndarray, fair: np.ndarray, site: Site, ceiling: np.ndarray) -> tuple[float, float, float]:
    totals = served.sum(axis=1, dtype=np.float64)
    counted = fair > 1e-6 * site.capacity.max()
    ratio = totals[counted] / fair[counted]
    possible = np.minimum(ceiling.sum(axis=0, dtype=np.float64), site.capacity).sum()
    return float(ratio.min()), float(ratio.min() / ratio.max()), float(served.sum(dtype=np.float64) / possible)


def run(nodes: int, users: int, seconds: float, change_at: float, seed: int, fair_iterations: int,
        hysteresis: float, step_iterations: int | None = None, report_seconds: float = REPORT_SECONDS,
        step_share: float = STEP_SHARE, probe_seconds: float = PROBE_SECONDS) -> int:
    site = Site(nodes, users, seed)
    users_ = len(site.weight)
    static = np.broadcast_to(site.weight[:, None], (users_, nodes))
    center = Edges(site, static)
    baseline = Edges(site, static)
    no_floor, no_limit = np.zeros(users_), np.full(users_, np.inf)
    fair, spent = cpu(lambda: site.fair_totals(fair_iterations))
    print(f"# the fair totals (step to convergence, {fair_iterations} iterations): {spent:.1f} s of CPU",
          flush=True)
    agents = Agents((users_, nodes), report_seconds, probe_seconds)
    previous, level = None, None
    sent = center.weight.copy()
    print(f"{'t s':>5} {'center: min':>11} {'min-max':>8} {'use':>6} | {'static: min':>11} {'min-max':>8} {'use':>6} "
          f"| center step")
    ticks = int(round(seconds / TICK_SECONDS))
    per_control = int(round(CONTROL_SECONDS / TICK_SECONDS))
    per_print = int(round(PRINT_SECONDS / TICK_SECONDS))
    change_tick = int(round(change_at / TICK_SECONDS))
    per_wait = int(round(AWAIT_PERIODS * CONTROL_SECONDS / TICK_SECONDS))
    after_new_weights = int(round(next_report_in(True, report_seconds) / TICK_SECONDS))
    sent_nodes = np.arange(0)
    pending: np.ndarray | None = None      # weights decided, applied from tick `applies`
    applies = 0
    next_step = per_control
    step_note = ""
    history = []
    for tick in range(1, ticks + 1):
        if tick == change_tick + 1:
            site.go_idle()
            fair, spent = cpu(lambda: site.fair_totals(fair_iterations))
            print(f"# t={change_at:.1f} s: users 0-{users_ // 2 - 1} idle on nodes 0-{nodes // 2 - 1}; new fair totals "
                  f"in {spent:.1f} s of CPU", flush=True)
        if pending is not None and tick >= applies:
            center.weight = pending
            pending = None
            agents.weights_applied(sent_nodes, tick, after_new_weights)
        ceiling = site.ceiling()
        served = center.tick(ceiling)
        served_static = baseline.tick(ceiling)
        agents.tick(tick, served, ceiling)
        if (tick >= next_step and pending is None
                and (agents.measured_under_current(sent_nodes) or tick >= applies + per_wait)):
            t0, cpu0 = time.perf_counter(), time.process_time()
            step = local_weights(site.capacity, site.weight, agents.demand, no_floor, no_limit, previous=previous,
                                 held=agents.held, max_iterations=step_iterations, previous_level=level,
                                 seconds=None if step_iterations else step_share * CONTROL_SECONDS)
            step_seconds, step_cpu = time.perf_counter() - t0, time.process_time() - cpu0
            previous, level = step.weight, step.level
            send = nodes_to_send(rates_moved(step.realised(sent), step.allocation, hysteresis), np.arange(nodes), nodes)
            sent[:, send] = step.weight[:, send]
            pending, sent_nodes = sent.copy(), send
            applies = tick + max(1, int(np.ceil(step_seconds / TICK_SECONDS)))
            next_step = max(tick + per_control, applies)
            step_note = (f"{step_seconds:.2f} s ({step_cpu:.2f} s CPU), {step.iterations} it, "
                         f"{len(send)} nodes sent")
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
          f"{'met' if ok else 'NOT met'} (target <= 5 s; agents report every {report_seconds} s, "
          f"{f'and a sharp move at once (looked at every {probe_seconds} s)' if probe_seconds else 'only then'})")
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
                        help="iterations of each center step (default: as many as STEP_SHARE of the period allows)")
    parser.add_argument("--report-seconds", type=float, default=REPORT_SECONDS, help="the agents' report_seconds")
    parser.add_argument("--probe-seconds", type=float, default=PROBE_SECONDS,
                        help="the agents' probe_seconds: a sharp move in demand is reported between reports (0: never)")
    parser.add_argument("--step-share", type=float, default=STEP_SHARE,
                        help="the share of the period the step's iterations may take (weight_control.STEP_SHARE)")
    args = parser.parse_args()
    print(f"# {machine()}")
    print(f"$ python -m benchmarks.site_simulation --nodes {args.nodes} --users {args.users} --seconds {args.seconds} "
          f"--change-at {args.change_at} --hysteresis {args.hysteresis}"
          + (f" --step-iterations {args.step_iterations}" if args.step_iterations else "")
          + f" --report-seconds {args.report_seconds} --probe-seconds {args.probe_seconds}"
          + f" --step-share {args.step_share} --seed {args.seed}", flush=True)
    code = run(args.nodes, args.users, args.seconds, args.change_at, args.seed, args.fair_iterations, args.hysteresis,
               args.step_iterations, args.report_seconds, args.step_share, args.probe_seconds)
    print(f"load average at the end {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return code


if __name__ == "__main__":
    sys.exit(main())
