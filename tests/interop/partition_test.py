#!/usr/bin/env python3
"""Network partitions between brokers, each in a network namespace of its own, checked Jepsen-style.

    partition_test.py --bin path/to/ringbroker --work DIR [--seed 1] [--soak-secs N]
                      [--producers 2] [--rate 50]

Needs root, `ip` (iproute2, with `ip netns`) and `nft` (nftables); without them it prints a SKIP
line. The tcp_proxy of replication_test.py can only cut a broker's client listener; here packets
are dropped in the kernel between particular brokers and particular listeners, as a real network
partition does (no RST: connections hang until TCP gives up or the link heals).

  network   per run (names from the pid, `rbp<pid>-…`, so concurrent runs do not collide): a hub
            namespace with a bridge (10.77.0.254/24) and one namespace per broker (10.77.0.N/24)
            joined to it by a veth pair; `lo` up everywhere. The brokers run there with
            `ip netns exec` (PLAINTEXT on 10.77.0.N:9092, CONTROLLER on 10.77.0.N:9093, advertised
            10.77.0.N:9092); this script sets the network up, then runs itself again (`--inner`)
            in the hub namespace, where the clients are: every client reaches every broker
            through the bridge, also while a broker is cut off from the others.
  cluster   as replication_test.py: three nodes, each `process.roles=broker,controller` (so the
            controller quorum is the three CONTROLLER listeners), 1 unpinned shard, metrics off,
            short heartbeat / session / election / replica-lag timeouts; data DIR/part-N, logs
            DIR/broker-part-N-K.{out,err} (run.sh's panic check sees them), librdkafka's log in
            DIR/partition-clients.log.
  topic     `jepsen`, 3 partitions, RF 3, min.insync.replicas=2; idempotent acks=all
            confluent-kafka producers (common.ProducerThread) at a modest rate, every delivery
            report recorded.
  faults    nftables rules in the faulted broker's own namespace (table inet rbfault), never in
            the root namespace; each fault lasts 1.5-3 session timeouts, then heals:
              cut-replication  a partition leader cut from the other brokers' PLAINTEXT traffic
                               (replica fetches both ways), its controller traffic untouched
              cut-quorum       a partition leader cut from the others' CONTROLLER traffic (the
                               quorum, its heartbeats, AlterPartition), replication untouched
              isolate          one broker (the active controller first, then a leader) cut from
                               both others entirely: a minority of one; clients still reach it
              flap             a broker's isolation toggled on and off every 0.3-2 s
              loss             random loss (`numgen random mod 100 < N drop`) on all of a
                               broker's traffic, N 5-20 %
            During each the metadata (as the brokers not faulted see it) is watched; afterwards
            the test waits (bounded) until every broker reports every ISR full and says how long.
  rules     cut-replication: the followers leave the partition's ISR or the leadership moves;
            while the leader stayed, no acks=all write to that partition is acknowledged from a
            second after the cut to the heal (the leader cannot reach min.insync.replicas).
            cut-quorum and an isolated leader: the partition gets another leader (the cut broker's
            session expires, it is fenced).
  end       producers stop and flush (bounded), the rules are flushed, the ISR heals (bounded),
            every partition is read low to high watermark via each broker and by kafka-python,
            jepsen_checker: lost, duplicated, reordered, two-valued, skipped, went back,
            unexpected all 0 (history in DIR/partition-history.json); the brokers exit 0 on
            SIGTERM and their replicas hold the same batches below the high watermark.

The CI variant runs every fault once (about 2 minutes in all); with --soak-secs N (or env
RINGBROKER_PARTITION_SOAK_SECS=N) the faults repeat, with random targets, for N seconds. Every
wait and loop is bounded; every process is stopped and the namespaces (with their veths and the
bridge) deleted at the end, also on an exception, SIGINT or SIGTERM (try/finally and atexit in
the outer process, which also kills what is left in the namespaces).
"""

import argparse
import atexit
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster_nodes  # noqa: E402
import common  # noqa: E402
from common import Reporter  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--bin", required=True)
ap.add_argument("--work", required=True)
ap.add_argument("--seed", type=int, default=1)
ap.add_argument("--soak-secs", type=float, default=float(os.environ.get("RINGBROKER_PARTITION_SOAK_SECS") or 0))
ap.add_argument("--producers", type=int, default=2)
ap.add_argument("--rate", type=float, default=50.0, help="records per second per producer")
ap.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)  # the run in the hub namespace
ap.add_argument("--prefix", default=None, help=argparse.SUPPRESS)  # the namespaces' name prefix
args = ap.parse_args()
rep = Reporter("partition")

NODES = [1, 2, 3]
SUBNET = "10.77.0"
HUB_ADDR = f"{SUBNET}.254"
PORT = 9092  # PLAINTEXT, on every broker's own address
CPORT = 9093  # CONTROLLER
TABLE = "rbfault"


def addr(n):
    return f"{SUBNET}.{n}"


def ns_names(prefix):
    return f"{prefix}-hub", {n: f"{prefix}-n{n}" for n in NODES}


def sh(*cmd, stdin=None, timeout=20):
    """Runs a command; (returncode, stderr + stdout)."""
    try:
        out = subprocess.run(list(cmd), input=stdin, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        return 1, f"{type(e).__name__}: {e}"
    return out.returncode, (out.stderr + out.stdout).strip()


# ---------------------------------------------------------------- the outer process (root namespace)

class Network:
    """The hub namespace with its bridge, one namespace per broker joined by a veth pair, and an
    empty nftables table in every broker namespace. `remove()` kills what still runs in them
    (processes this run started there) and deletes them, which deletes the veths and the bridge."""

    def __init__(self, prefix):
        self.prefix = prefix
        self.hub, self.nodes = ns_names(prefix)
        self.created = []
        self.removed = False

    def create(self):
        steps = [("ip", "netns", "add", self.hub)]
        steps += [("ip", "-n", self.hub, "link", "set", "lo", "up"),
                  ("ip", "-n", self.hub, "link", "add", "br0", "type", "bridge"),
                  ("ip", "-n", self.hub, "addr", "add", f"{HUB_ADDR}/24", "dev", "br0"),
                  ("ip", "-n", self.hub, "link", "set", "br0", "up")]
        for n, ns in self.nodes.items():
            hub_end = f"{self.prefix}h{n}"  # created in the hub directly: no name in the root namespace
            steps += [("ip", "netns", "add", ns),
                      ("ip", "-n", ns, "link", "set", "lo", "up"),
                      ("ip", "link", "add", hub_end, "netns", self.hub, "type", "veth", "peer", "name", "eth0",
                       "netns", ns),
                      ("ip", "-n", self.hub, "link", "set", hub_end, "master", "br0", "up"),
                      ("ip", "-n", ns, "addr", "add", f"{addr(n)}/24", "dev", "eth0"),
                      ("ip", "-n", ns, "link", "set", "eth0", "up")]
        for cmd in steps:
            if cmd[:3] == ("ip", "netns", "add"):
                self.created.append(cmd[3])
            rc, out = sh(*cmd)
            if rc != 0:
                return f"{' '.join(cmd)}: {out}"
        for ns in self.nodes.values():
            rc, out = sh("ip", "netns", "exec", ns, "nft", "-f", "-", stdin=(
                f"add table inet {TABLE}\n"
                f"add chain inet {TABLE} input {{ type filter hook input priority 0; policy accept; }}\n"
                f"add chain inet {TABLE} output {{ type filter hook output priority 0; policy accept; }}\n"))
            if rc != 0:
                return f"nft in {ns}: {out}"
        return None

    def remove(self):
        """Idempotent (atexit calls it again); returns what is left, or None."""
        if self.removed:
            return None
        self.removed = True
        for ns in reversed(self.created):
            _, pids = sh("ip", "netns", "pids", ns)
            for pid in pids.split():
                if pid.isdigit():
                    try:
                        os.kill(int(pid), signal.SIGKILL)
                    except OSError:
                        pass
        time.sleep(0.2 if self.created else 0)
        for ns in reversed(self.created):
            sh("ip", "netns", "del", ns)
        _, listed = sh("ip", "netns", "list")
        _, links = sh("ip", "-o", "link", "show")
        left = [w for w in listed.split() if w.startswith(self.prefix)]
        left += [line.split(":")[1].strip() for line in links.splitlines() if self.prefix in line]
        return left or None


def outer():
    why = None
    if os.geteuid() != 0:
        why = "needs root (network namespaces, nftables)"
    elif not shutil.which("ip") or sh("ip", "netns", "list")[0] != 0:
        why = "needs `ip netns` (iproute2)"
    elif not shutil.which("nft"):
        why = "needs `nft` (nftables)"
    if why:
        rep.skip("network partitions between brokers in network namespaces", why)
        rep.finish()
    prefix = args.prefix or f"rbp{os.getpid()}"
    net = Network(prefix)
    atexit.register(net.remove)
    child = None
    rc = 1
    try:
        err = net.create()
        if err and len(net.created) <= 1 and "netns add" in err:
            rep.skip("network partitions between brokers in network namespaces", f"cannot create one: {err}")
        elif rep.check(err is None, f"namespaces {net.hub} (bridge {HUB_ADDR}/24) and "
                                    f"{', '.join(net.nodes.values())} ({SUBNET}.1-3) with an nftables table each",
                       err):
            inner_args = [a for a in sys.argv[1:] if a != "--inner"]
            child = subprocess.Popen(["ip", "netns", "exec", net.hub, sys.executable, os.path.abspath(__file__),
                                      "--inner", "--prefix", prefix] + inner_args)
            rc = child.wait()
            child = None
    except (KeyboardInterrupt, SystemExit) as e:
        # SIGINT, or SIGTERM (run.sh's timeout): clean up below, then report and exit non-zero.
        rep.fail("the run", f"interrupted ({type(e).__name__})")
    finally:
        if child is not None and child.poll() is None:
            # SIGINT, SIGTERM or an exception here: the inner run stops its brokers on SIGTERM.
            child.send_signal(signal.SIGTERM)
            try:
                child.wait(60)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait(10)
        left = net.remove()
        rep.check(left is None, "every namespace, veth and the bridge of the run removed", left)
    print(f"== partition: the run in the hub namespace exited {rc}", flush=True)
    if rc != 0 and rep.failed == 0:
        rep.fail("the run in the hub namespace", f"exited {rc}")
    rep.finish()


# ---------------------------------------------------------------- the inner process (hub namespace)

HEARTBEAT_MS = 200
SESSION_MS = 2000
ELECTION_MS = 300
LAG_MS = 2000  # a session: a cut follower leaves the ISR within 1.5 of it (checked every half)
TOPIC = "jepsen"
NPARTS = 3
RF = 3
MIN_ISR = 2
SOAK = args.soak_secs > 0
FAULT_SECS = args.soak_secs if SOAK else 150.0  # the CI variant stops after one of each kind anyway
KINDS = ["cut-replication", "cut-quorum", "isolate", "flap", "loss", "isolate"]  # isolate: controller, then a leader
MAX_FAULTS = 2000 if SOAK else len(KINDS)
# How long a fault lasts, in session timeouts. A cut leader must stay cut past
# replica.lag.time.max.ms (1.5 sessions) for its followers to leave the ISR, and past a session
# (plus a new controller's full session of grace when it was the active controller) to be fenced:
# those three take the upper part of the range.
LONG_S = (2.5 * SESSION_MS / 1000, 3.0 * SESSION_MS / 1000)
SHORT_S = (1.5 * SESSION_MS / 1000, 3.0 * SESSION_MS / 1000)
ACK_SLACK_S = 1.0  # answers to writes already replicated before the cut may still arrive
REJOIN_S = 30.0  # bound for every ISR to be full again after a fault
FLUSH_S = 45.0
READ_S = 40.0
NAME = "part"
LABEL = "partition"
rng = random.Random(args.seed)
_spread_rng = random.Random(args.seed + 1)
T0 = time.monotonic()


def log(msg):
    print(f"== {rep.name}: [{time.monotonic() - T0:6.1f}s] {msg}", flush=True)


def broker_settings(n):
    voters = ",".join(f"{m}@{addr(m)}:{CPORT}" for m in NODES)
    return [
        f"node.id={n}",
        "process.roles=broker,controller",
        f"controller.quorum.voters={voters}",
        f"controller.quorum.election.timeout.ms={ELECTION_MS}",
        f"broker.heartbeat.interval.ms={HEARTBEAT_MS}",
        f"broker.session.timeout.ms={SESSION_MS}",
        f"listeners=PLAINTEXT://{addr(n)}:{PORT},CONTROLLER://{addr(n)}:{CPORT}",
        f"advertised.listeners=PLAINTEXT://{addr(n)}:{PORT}",
        "ringbroker.pin.shards=false",
        "ringbroker.metrics.listen=none",
    ] + OPTIONAL_SETTINGS


OPTIONAL_SETTINGS = []
client_log = None
brokers = {}
NODE_NS = {}


def bootstrap(n):
    return f"{addr(n)}:{PORT}"


def all_bootstrap():
    return ",".join(bootstrap(n) for n in NODES)


def view(n, timeout=2.0):
    """Broker n's metadata: (live brokers, {partition: (leader, replicas, isr, err)}), or None."""
    if brokers[n].state != "up" or brokers[n].proc.poll() is not None:
        return None
    try:
        return common.topic_metadata(bootstrap(n), TOPIC, client_log, timeout)
    except Exception:  # noqa: BLE001 - not answering now
        return None


def full(md):
    return (md is not None and md[0] == NODES and md[1] is not None and len(md[1]) == NPARTS
            and all(len(isr) == RF and leader >= 0 for leader, _, isr, _ in md[1].values()))


def isr_full_everywhere():
    """Every broker answers with all three brokers live and every ISR full: also the healed one
    has caught up with the metadata."""
    return all(full(view(n)) for n in NODES)


def describe(n=None):
    ns = [n] if n else NODES
    out = []
    for m in ns:
        md = view(m)
        if md is None or md[1] is None:
            out.append(f"via {m}: {'no answer' if md is None else 'no topic'}")
            continue
        out.append(f"via {m}: brokers {md[0]}; " + ", ".join(
            f"p{p} {ldr}/{isr}" for p, (ldr, _, isr, _) in sorted(md[1].items())))
    return " | ".join(out)


def active_controller():
    for n in NODES:
        try:
            from confluent_kafka.admin import AdminClient

            c = AdminClient({"bootstrap.servers": bootstrap(n), "logger": client_log}).list_topics(
                timeout=3).controller_id
            if c in NODES:
                return c
        except Exception:  # noqa: BLE001 - ask the next one
            continue
    return None


def check_unexpected_exits():
    for n, b in brokers.items():
        if b.state != "down" and b.proc.poll() is not None:
            rep.fail(f"broker {n} stays up unless the test stops it",
                     f"exited {b.proc.returncode} on its own: {common.tail(b.base + '.err')}")
            b.state = "down"
            ok, detail = b.start()
            log(f"restarted broker {n} after its own exit: {ok} {detail}")


# ---------------------------------------------------------------- faults (nftables in a node namespace)

def nft_rules(n, inp, out):
    """Replaces broker n's fault rules (one transaction, so a toggle is atomic)."""
    script = f"flush chain inet {TABLE} input\nflush chain inet {TABLE} output\n"
    script += "".join(f"add rule inet {TABLE} input {r}\n" for r in inp)
    script += "".join(f"add rule inet {TABLE} output {r}\n" for r in out)
    rc, msg = sh("ip", "netns", "exec", NODE_NS[n], "nft", "-f", "-", stdin=script)
    if rc != 0:
        raise RuntimeError(f"nft in {NODE_NS[n]}: {msg}")


def heal(n):
    nft_rules(n, [], [])


def peers_set(n):
    return "{ " + ", ".join(addr(m) for m in NODES if m != n) + " }"


def cut_port_rules(n, port):
    """Both directions of every connection between broker n and the others on `port`, whichever
    side opened it (n fetching from them, or them from n)."""
    s = peers_set(n)
    return ([f"ip saddr {s} tcp dport {port} drop", f"ip saddr {s} tcp sport {port} drop"],
            [f"ip daddr {s} tcp dport {port} drop", f"ip daddr {s} tcp sport {port} drop"])


def isolate_rules(n):
    s = peers_set(n)
    return [f"ip saddr {s} drop"], [f"ip daddr {s} drop"]


def loss_rules(pct):
    return ([f'iifname "eth0" numgen random mod 100 < {pct} drop'],
            [f'oifname "eth0" numgen random mod 100 < {pct} drop'])


class Faults:
    def __init__(self, producers):
        self.producers = producers
        self.done = []

    def acked(self):
        return sum(len(p.acks) for p in self.producers)

    def target(self, kind):
        """(broker, partition): a partition's leader, or for the first isolation the active
        controller (and a partition it leads, if any)."""
        md = None
        for n in NODES:
            md = view(n)
            if md and md[1]:
                break
        p = rng.randrange(NPARTS)
        if not md or not md[1] or p not in md[1]:
            return rng.choice(NODES), p
        if kind == "isolate" and sum(1 for f in self.done if f["kind"] == "isolate") % 2 == 0:
            c = active_controller()
            if c is not None:
                led = [q for q, (ldr, _, _, _) in md[1].items() if ldr == c]
                return c, (rng.choice(led) if led else p)
        leader = md[1][p][0]
        if kind in ("cut-quorum", "isolate"):
            # A leader that is not the active controller: then its fencing needs only its own
            # session to run out (a new controller first gives every broker a full session of
            # grace, and electing it takes a while), so the fault's length suffices.
            c = active_controller()
            led = [q for q, (ldr, _, _, _) in md[1].items() if ldr in NODES and ldr != c]
            if led:
                p = rng.choice(led)
                leader = md[1][p][0]
        return (leader if leader in NODES else rng.choice(NODES)), p

    def watch(self, rec, seconds):
        """Sleeps `seconds` while asking the brokers not faulted (in turn) for the metadata:
        when partition p first had another leader, when its ISR first lost a broker, whether the
        faulted broker was fenced (left out of the live brokers), the smallest ISR seen."""
        node, p = rec["node"], rec["partition"]
        others = [m for m in NODES if m != node]
        t0 = time.monotonic()
        rec.update(moved_s=None, shrink_s=None, fenced_s=None, below_min_s=None, samples=0, leaders=[])
        isr_min = RF
        i = 0
        while time.monotonic() - t0 < seconds:
            md = view(others[i % len(others)], timeout=1.0)
            i += 1
            now = round(time.monotonic() - t0, 1)
            if md and md[1] and p in md[1]:
                leader, _, isr, _ = md[1][p]
                rec["samples"] += 1
                if not rec["leaders"] or rec["leaders"][-1] != leader:
                    rec["leaders"].append(leader)
                if rec["moved_s"] is None and leader >= 0 and leader != node:
                    rec["moved_s"] = now
                if rec["shrink_s"] is None and len(isr) < RF:
                    rec["shrink_s"] = now
                if rec["below_min_s"] is None and len(isr) < MIN_ISR:
                    rec["below_min_s"] = now
                if rec["fenced_s"] is None and node not in md[0]:
                    rec["fenced_s"] = now
                isr_min = min(isr_min, len(isr))
            time.sleep(max(0.0, min(0.3, seconds - (time.monotonic() - t0))))
        rec["isr_min"] = isr_min

    def flapper(self, node, seconds, stop):
        """Toggles broker node's isolation every 0.3-2 s for `seconds`; healed at the end."""
        end = time.monotonic() + seconds
        on = False
        toggles = 0
        try:
            while time.monotonic() < end and not stop.is_set():
                on = not on
                nft_rules(node, *(isolate_rules(node) if on else ([], [])))
                toggles += 1
                stop.wait(min(rng.uniform(0.3, 2.0), max(0.0, end - time.monotonic())))
        finally:
            heal(node)
        self.toggles = toggles

    def run_one(self, kind):
        node, p = self.target(kind)
        down = round(rng.uniform(*(LONG_S if kind in ("cut-replication", "cut-quorum", "isolate") else SHORT_S)), 1)
        rec = {"kind": kind, "node": node, "partition": p, "down_s": down}
        before = next((md for md in map(view, NODES) if md and md[1] and p in md[1]), None)
        rec["led"] = bool(before) and before[1][p][0] == node
        rec["controller"] = node == active_controller()
        acked0 = self.acked()
        flap = None
        detail = ""
        if kind == "cut-replication":
            inp, out = cut_port_rules(node, PORT)
        elif kind == "cut-quorum":
            inp, out = cut_port_rules(node, CPORT)
        elif kind == "isolate":
            inp, out = isolate_rules(node)
        elif kind == "loss":
            rec["loss_pct"] = rng.randint(5, 20)
            inp, out = loss_rules(rec["loss_pct"])
            detail = f" ({rec['loss_pct']} % each way)"
        rec["at"] = round(time.monotonic() - T0, 2)
        try:
            if kind == "flap":
                stop = threading.Event()
                flap = threading.Thread(target=self.flapper, args=(node, down, stop), daemon=True)
                flap.start()
            else:
                nft_rules(node, inp, out)
            self.watch(rec, down)
        finally:
            if flap is not None:
                stop.set()
                flap.join(10)
            heal(node)
        rec["healed"] = round(time.monotonic() - T0, 2)
        if kind == "flap":
            detail = f" ({getattr(self, 'toggles', 0)} toggles)"
        if rec["controller"]:
            detail += " (the active controller)"
        rec["acked_during"] = self.acked() - acked0
        # Acknowledgements of the faulted partition from a second after the cut to the heal.
        rec["acked_p"] = sorted(a["t"] for pr in self.producers for a in list(pr.acks)
                                if a["partition"] == p and rec["at"] + ACK_SLACK_S <= a["t"] <= rec["healed"])
        t0 = time.monotonic()
        back = common.wait_until(isr_full_everywhere, REJOIN_S, interval=0.25)
        rec["rejoin_s"] = round(time.monotonic() - t0, 1) if back else None
        self.done.append(rec)
        log(f"fault {len(self.done)}: {kind} of broker {node}{detail} ({'leader' if rec['led'] else 'not leader'} of p{p} before) for {down}s: "
            f"{rec['acked_during']} acknowledged meanwhile, {len(rec['acked_p'])} of p{p} after the first "
            f"{ACK_SLACK_S:.0f}s; p{p}'s leaders seen {rec['leaders']}, "
            + (f"new leader after {rec['moved_s']}s" if rec["moved_s"] is not None else "no new leader")
            + f"; ISR shrank {'after ' + str(rec['shrink_s']) + 's' if rec['shrink_s'] is not None else 'never'}"
            + f" (min {rec['isr_min']})"
            + (f"; broker {node} fenced after {rec['fenced_s']}s" if rec["fenced_s"] is not None else "")
            + "; " + (f"every ISR full again {rec['rejoin_s']}s after the heal" if back
                      else f"ISRs NOT full within {REJOIN_S:.0f}s of the heal: {describe()}"))
        self.check_rules(rec)

    def check_rules(self, rec):
        """What Kafka's rules say about the fault, as far as the metadata and the acknowledgements
        show it without timing thresholds beyond the fault's own length."""
        kind, node, p = rec["kind"], rec["node"], rec["partition"]
        if kind == "cut-replication":
            rep.check(rec["shrink_s"] is not None or rec["moved_s"] is not None,
                      f"fault {len(self.done)} cut-replication: p{p}'s followers leave its ISR or its leadership "
                      f"moves while leader {node} cannot reach them",
                      f"ISR never shrank and leaders stayed {rec['leaders']} over {rec['samples']} samples "
                      f"in {rec['down_s']}s")
            if rec["moved_s"] is None and rec["leaders"] == [node]:
                rep.check(not rec["acked_p"],
                          f"fault {len(self.done)} cut-replication: no acks=all write to p{p} acknowledged while "
                          f"its leader {node} could not replicate to anyone (from {ACK_SLACK_S:.0f}s after the cut)",
                          f"{len(rec['acked_p'])} acknowledged at {rec['acked_p'][:5]} (cut at {rec['at']}, healed "
                          f"at {rec['healed']}; ISR below {MIN_ISR} seen after {rec['below_min_s']}s)")
            else:
                log(f"fault {len(self.done)}: p{p}'s leadership moved ({rec['leaders']}): acknowledgements from "
                    f"the new leader are allowed, the no-ack check does not apply")
        elif rec["controller"] and kind in ("cut-quorum", "isolate"):
            # Not asserted: the others elect a controller first, which gives broker `node` a full
            # session of grace from then on; whether that ends within the fault is timing.
            log(f"fault {len(self.done)}: broker {node} was the active controller: p{p} "
                + (f"got another leader after {rec['moved_s']}s" if rec["moved_s"] is not None
                   else "kept its leader within the fault") + " (not checked: the new controller's grace)")
        elif kind == "cut-quorum" or (kind == "isolate" and rec["led"]):
            rep.check(rec["moved_s"] is not None,
                      f"fault {len(self.done)} {kind}: p{p} gets another leader while its leader {node} is cut "
                      f"from the controller quorum (fenced after its session)",
                      f"leaders seen {rec['leaders']} over {rec['samples']} samples in {rec['down_s']}s; "
                      f"fenced {rec['fenced_s']}")


# ---------------------------------------------------------------- the test

def create_topic():
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap(1), "socket.timeout.ms": 10000, "logger": client_log})
    fs = admin.create_topics([NewTopic(TOPIC, NPARTS, RF, config={"min.insync.replicas": str(MIN_ISR)})],
                             operation_timeout=20, request_timeout=30)
    fs[TOPIC].result(timeout=40)
    rep.ok(f"topic {TOPIC}: {NPARTS} partitions, RF {RF}, min.insync.replicas={MIN_ISR}")
    t0 = time.monotonic()
    ok = common.wait_until(isr_full_everywhere, 20, interval=0.25)
    return rep.check(bool(ok), f"every broker reports every ISR at {RF} ({time.monotonic() - t0:.1f}s)", describe())


def main():
    global client_log
    client_log = common.client_logger(args.work, LABEL)
    _, nodes_ns = ns_names(args.prefix)
    NODE_NS.update(nodes_ns)
    for n in NODES:
        brokers[n] = common.ProcessBroker(n, args.bin, args.work, NAME, lambda n=n: broker_settings(n),
                                          (addr(n), PORT), prefix=["ip", "netns", "exec", NODE_NS[n]])
    prop = f"replica.lag.time.max.ms={LAG_MS}"
    if common.knows_property(args.bin, os.path.join(args.work, f"{NAME}-probe"), prop):
        OPTIONAL_SETTINGS.append(prop)
    else:
        rep.skip(f"--set {prop}", "this binary does not know the property: started without it")
    log(f"seed {args.seed}; brokers {', '.join(f'{n} in {NODE_NS[n]} at {addr(n)}' for n in NODES)}; "
        + (f"soak of {FAULT_SECS:.0f}s" if SOAK else f"CI: one fault of each kind {KINDS}"))
    for b in brokers.values():
        b.spawn()
    ready = {n: b.wait_ready(30) for n, b in brokers.items()}
    if not rep.check(all(ready.values()), "3 brokers (voters + brokers), each in its own namespace, start and listen",
                     {n: common.tail(b.base + ".err") for n, b in brokers.items() if not ready[n]}):
        return
    formed = common.wait_until(lambda: all((m := view(n)) and m[0] == NODES for n in NODES), 30)
    if not rep.check(bool(formed), "every broker is registered (every broker's metadata lists 1, 2, 3)", describe()):
        return
    if not create_topic():
        return
    conf = {"bootstrap.servers": all_bootstrap(), "logger": client_log}
    producers = [common.ProducerThread(i, conf, TOPIC, args.rate, FLUSH_S, log, T0) for i in range(args.producers)]
    for p in producers:
        p.start()
    warm = common.wait_until(lambda: all(len(p.acks) >= 10 for p in producers), 30)
    rep.check(bool(warm), "every producer gets acknowledgements before the faults start",
              {p.idx: (p.sent, len(p.acks), p.errors) for p in producers})
    faults = Faults(producers)
    deadline = time.monotonic() + FAULT_SECS
    try:
        while time.monotonic() < deadline and len(faults.done) < MAX_FAULTS:
            check_unexpected_exits()
            faults.run_one(KINDS[len(faults.done) % len(KINDS)])
            common.wait_until(lambda: False, min(rng.uniform(1.0, 2.0), max(0.0, deadline - time.monotonic())))
    finally:
        for n in NODES:
            try:
                heal(n)
            except RuntimeError as e:
                rep.fail(f"healing broker {n}'s links", e)
        common.stop_producers(rep, log, producers, FLUSH_S)
    check_unexpected_exits()
    t0 = time.monotonic()
    healed = common.wait_until(isr_full_everywhere, REJOIN_S, interval=0.25)
    rep.check(bool(healed), f"every ISR is full again after the faults ({time.monotonic() - t0:.1f}s)", describe())
    reads = common.read_all(rep, log, TOPIC, NPARTS, {n: bootstrap(n) for n in NODES}, READ_S, client_log)
    for rd in reads:
        for part, pr in rd["partitions"].items():
            HIGH[int(part)] = max(HIGH.get(int(part), 0), pr["end"])
    history = {"acks": [a for p in producers for a in p.acks], "failed": [f for p in producers for f in p.failed],
               "unknown": [v for p in producers for v in p.unknown], "reads": reads, "faults": faults.done}
    min_acked = 500 if not SOAK else int(FAULT_SECS * args.producers * args.rate * 0.1)
    common.check_history(rep, log, history, os.path.join(args.work, f"{LABEL}-history.json"), min_acked)
    kinds = sorted({fr["kind"] for fr in faults.done})
    rep.check(set(kinds) == set(KINDS), f"{len(faults.done)} faults injected, every kind ({', '.join(kinds)})",
              f"kinds missing: {sorted(set(KINDS) - set(kinds))}")
    rejoined = [fr["rejoin_s"] for fr in faults.done if fr["rejoin_s"] is not None]
    by_kind = {}
    for fr in faults.done:
        if fr["rejoin_s"] is not None:
            by_kind.setdefault(fr["kind"], []).append(fr["rejoin_s"])
    missed = [(fr["kind"], fr["node"], fr["at"]) for fr in faults.done if fr["rejoin_s"] is None]
    rep.check(faults.done and not missed,
              f"every ISR full again after every fault ({len(rejoined)} of {len(faults.done)}; "
              f"{common.spread(rejoined)}; by kind " + ", ".join(f"{k} {common.spread(v)}" for k, v in
                                                                  sorted(by_kind.items())) + ")",
              f"not full within {REJOIN_S:.0f}s after (kind, broker, at s): {missed[:8]}")


def on_term(*_):
    raise SystemExit(143)


HIGH = {}

if __name__ == "__main__":
    if not args.inner:
        signal.signal(signal.SIGTERM, on_term)
        outer()
    signal.signal(signal.SIGTERM, on_term)
    interrupted = False
    try:
        rep.run(rep.name, main)
    except (KeyboardInterrupt, SystemExit) as e:
        # The brokers may have had the SIGINT too: their exit codes and logs say nothing then.
        interrupted = True
        rep.fail("the run in the hub namespace", f"interrupted ({type(e).__name__}); stopping the brokers")
    finally:
        rcs = {n: b.stop() for n, b in brokers.items() if b.proc is not None}
        if rcs and not interrupted:
            rep.check(all(rc == 0 for rc in rcs.values()), "every broker exits 0 on SIGTERM at the end", rcs)
        if HIGH and rcs and not interrupted and all(b.proc.poll() is not None for b in brokers.values()):
            try:
                cluster_nodes.compare_replica_logs(rep, args.bin, TOPIC, HIGH, {n: b.data for n, b in brokers.items()})
            except Exception as e:  # noqa: BLE001
                rep.fail("comparing the replicas' logs", f"{type(e).__name__}: {e}")
    rep.finish()
