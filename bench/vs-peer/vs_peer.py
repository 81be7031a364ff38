#!/usr/bin/env python3
"""paypipe and the Python peer ($PAYPIPE_PEERS_DIR: pyzmq + uvloop + aiohttp) side by side, in one run.

Started by `bench/run --vs-peer` (bench/vs-peer/run) from the repository root. Python 3 stdlib only;
the peer runs in its own venv inside its (copied) directory. See bench/README.md, "paypipe vs the peer".
"""
import argparse
import datetime
import json
import os
import shutil
import signal
import stat
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import charts  # noqa: E402
from charts import escape  # noqa: E402

NGINX_PID_FILE = "/tmp/peers-nginx.pid"        # conf/nginx.conf's `pid`
ACCESS_LOG = "/tmp/peers-nginx-access.log"     # conf/nginx.conf's `access_log`, counted by the peer's bench.py
NGINX_BODY_DIR = "/tmp/peers-nginx-body"
COPY_ROOT = "/tmp/paypipe-vs-peer"
APT_PACKAGES = ["nginx", "libnginx-mod-http-echo", "procps"]
WORKLOADS = {  # the peer's conf/nginx.conf: W1 answers at once, W2 after 50 ms
    "W1": "http://127.0.0.1:18081",
    "W2": "http://127.0.0.1:18082",
}
W2_PROVIDER_MS = 50        # echo_sleep 0.05
ACCESS_LOG_FLUSH_S = 0.6   # nginx writes the access log every 200 ms (flush=200ms)


def log(message):
    print(f"[vs-peer {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


class Interrupted(Exception):
    pass


def on_signal(signum, _frame):
    raise Interrupted(f"signal {signum}")


# ------------------------------------------------------------------ children (only ours, by PID)

class Children:
    """Every child runs in a session of its own, so a Ctrl-C at the terminal reaches only us and we
    stop each child ourselves: SIGINT first (bench.py then stops its stages in its `finally`,
    paypipe-bench stops its pipeline), then SIGKILL to the child's own process group."""

    def __init__(self):
        self.running = []

    def run(self, argv, cwd, stdout_path, stderr_path, timeout):
        with open(stdout_path, "w") as out, open(stderr_path, "w") as err:
            child = subprocess.Popen(argv, cwd=cwd, stdout=out, stderr=err, start_new_session=True)
        self.running.append(child)
        try:
            return child.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            log(f"{os.path.basename(argv[0])} still running after {timeout:.0f} s: stopping it")
            self.stop(child)
            return None
        finally:
            if child.poll() is None:   # interrupted while waiting
                self.stop(child)
            self.running.remove(child)

    @staticmethod
    def stop(child, grace_s=20.0):
        if child.poll() is not None:
            return
        try:
            child.send_signal(signal.SIGINT)
            child.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass
        except ProcessLookupError:
            return
        try:
            os.killpg(child.pid, signal.SIGKILL)   # its own group (start_new_session): only what it started
        except ProcessLookupError:
            pass
        try:
            child.wait(timeout=5)
        except subprocess.TimeoutExpired:
            log(f"pid {child.pid} did not exit after SIGKILL")

    def stop_all(self):
        for child in list(self.running):
            self.stop(child)


# ------------------------------------------------------------------ setup: peer copy, packages, venv, nginx

def peer_directory(repo_root):
    if not os.environ.get("PAYPIPE_PEERS_DIR"):
        sys.exit("vs-peer: set PAYPIPE_PEERS_DIR to the directory of the Python peer and its nginx mock (bench.py)")
    source = os.path.abspath(os.environ["PAYPIPE_PEERS_DIR"])
    if not os.path.isfile(os.path.join(source, "bench.py")):
        sys.exit(f"vs-peer: no peer at {source} (bench.py missing); set PAYPIPE_PEERS_DIR")
    if writable(source):
        return source
    copy = os.path.join(COPY_ROOT, "peers")
    log(f"{source} is read-only: using a copy in {copy}")
    os.makedirs(COPY_ROOT, exist_ok=True)
    make_writable(copy)
    # Refreshes the peer's files on every run; the venv and earlier results in the copy are kept.
    shutil.copytree(source, copy, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".venv", "results", "__pycache__"))
    make_writable(copy)
    return copy


def writable(path):
    """Root may write anywhere, so the mode bits say whether the directory is meant to be written."""
    mode = os.stat(path).st_mode
    return (os.access(path, os.W_OK) and mode & stat.S_IWUSR != 0
            and os.statvfs(path).f_flag & os.ST_RDONLY == 0)


def make_writable(path):
    if os.path.exists(path):
        subprocess.run(["chmod", "-R", "u+w", path], check=True)


def install_packages():
    missing = [p for p in APT_PACKAGES
               if subprocess.run(["dpkg", "-s", p], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode != 0]
    if not missing:
        return
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        sys.exit(f"vs-peer: missing packages {' '.join(missing)}; install them as root "
                 f"(apt-get install {' '.join(missing)}) and run again")
    log(f"apt-get install {' '.join(missing)}")
    distro_pid_file = "/run/nginx.pid"
    existed = os.path.exists(distro_pid_file)
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run(["apt-get", "update", "-q"], check=True, stdout=subprocess.DEVNULL, timeout=600)
    subprocess.run(["apt-get", "install", "-y", "-q", *missing], check=True, stdout=subprocess.DEVNULL, env=env, timeout=1200)
    # Where no policy-rc.d blocks it, apt starts the distro's nginx: stop that one (it did not run before).
    if not existed and "nginx" in missing:
        pid = read_pid(distro_pid_file)
        if pid:
            try:
                os.kill(pid, signal.SIGQUIT)
            except ProcessLookupError:
                pass


def ensure_venv(peer):
    python = os.path.join(peer, ".venv", "bin", "python")
    if not os.access(python, os.X_OK):
        log(f"creating {peer}/.venv")
        subprocess.run([sys.executable, "-m", "venv", os.path.join(peer, ".venv")], check=True, timeout=300)
    requirements = os.path.join(peer, "requirements.txt")
    installed = os.path.join(peer, ".venv", ".installed-requirements")
    if not (os.path.exists(installed) and read_bytes(installed) == read_bytes(requirements)):
        log("pip install -r requirements.txt")
        pip = os.path.join(peer, ".venv", "bin", "pip")
        subprocess.run([pip, "install", "-q", "--upgrade", "pip"], check=True, stdout=subprocess.DEVNULL, timeout=600)
        subprocess.run([pip, "install", "-q", "-r", requirements], check=True, timeout=1800)
        shutil.copyfile(requirements, installed)
    return python


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def read_pid(path):
    try:
        with open(path) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def process_gone(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        return state == "Z"   # exited, waiting for its parent (init) to reap it
    except (OSError, IndexError):
        return True


def nginx_from(conf):
    """The pid of the running nginx started with this conf, if any (by the conf's pid file)."""
    pid = read_pid(NGINX_PID_FILE)
    if pid is None or process_gone(pid):
        return None
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read()   # nginx rewrites it: "nginx: master process nginx -c <conf>"
    except OSError:
        return None
    return pid if conf.encode() in cmdline else None


def stop_nginx(conf):
    pid = nginx_from(conf)
    if pid is None:
        return
    os.kill(pid, signal.SIGQUIT)
    for _ in range(100):   # 10 s
        if process_gone(pid):
            return
        time.sleep(0.1)
    log(f"nginx {pid} still running 10 s after SIGQUIT")


def start_nginx(conf):
    stop_nginx(conf)   # a leftover of an interrupted earlier run
    other = read_pid(NGINX_PID_FILE)
    if other is not None and not process_gone(other):
        sys.exit(f"vs-peer: {NGINX_PID_FILE} names a running process ({other}) that is not an nginx from {conf}; "
                 "stop it first (another peer run?)")
    os.makedirs(NGINX_BODY_DIR, exist_ok=True)
    truncate_access_log()
    result = subprocess.run(["nginx", "-c", conf], capture_output=True, text=True, timeout=30)
    if result.returncode != 0:
        sys.exit(f"vs-peer: nginx -c {conf} failed: {result.stderr.strip()}")
    for _ in range(50):   # 5 s
        pid = nginx_from(conf)
        if pid is not None:
            log(f"nginx (mock provider) pid {pid}: W1 {WORKLOADS['W1']}, W2 {WORKLOADS['W2']} (50 ms)")
            return
        time.sleep(0.1)
    sys.exit(f"vs-peer: nginx started from {conf} but wrote no pid to {NGINX_PID_FILE}")


def truncate_access_log():
    with open(ACCESS_LOG, "w"):
        pass


def access_log_counts():
    """(lines, lines with status 200) since the last truncation, once nginx has flushed its buffer."""
    time.sleep(ACCESS_LOG_FLUSH_S)
    try:
        with open(ACCESS_LOG, "rb") as f:
            lines = f.read().splitlines()
    except OSError:
        return 0, 0
    return len(lines), sum(1 for line in lines if line.endswith(b" 200"))


# ------------------------------------------------------------------ build

def binaries(args, repo_root):
    build_dir = os.environ.get("PAYPIPE_BUILD_DIR", ".build")
    if args.bin_dir:
        bin_dir = args.bin_dir
    elif args.skip_build:
        bin_dir = os.path.join(build_dir, "release")
    else:
        log(f"deploy/swift-release build --scratch-path {build_dir}")
        subprocess.run(["deploy/swift-release", "build", "--scratch-path", build_dir], cwd=repo_root, check=True,
                       stdout=sys.stderr)
        bin_dir = subprocess.run(["deploy/swift-release", "build", "--scratch-path", build_dir, "--show-bin-path"],
                                 cwd=repo_root, check=True, capture_output=True, text=True).stdout.strip()
    bin_dir = os.path.abspath(os.path.join(repo_root, bin_dir))
    if not os.access(os.path.join(bin_dir, "paypipe-bench"), os.X_OK):
        sys.exit(f"vs-peer: no paypipe-bench in {bin_dir} (build first, or drop --skip-build)")
    return bin_dir


FLOOR_STORES = ("none", "fsync", "sqlite")


def postgres_url(directory):
    return f"postgres://paypipe@:5432/paypipe?host={directory}"


def start_postgres(repo_root, out):
    """A private PostgreSQL server for the paypipe-pg side (.ci/postgres, the tests' own), on a Unix socket in `out`."""
    directory = os.path.join(out, "postgres")
    log(f".ci/postgres start {directory}")
    subprocess.run([".ci/postgres", "start", directory], cwd=repo_root, check=True, timeout=120, stdout=subprocess.DEVNULL)
    return directory


def stop_postgres(repo_root, directory):
    subprocess.run([".ci/postgres", "stop", directory], cwd=repo_root, timeout=120)


def build_floor(repo_root, out):
    """bench/floor/floor.c: paypipe's processes and hops with no work in any stage (see its header)."""
    binary = os.path.join(out, "floor")
    log(f"bench/floor/build {binary}")
    subprocess.run(["bench/floor/build", binary], cwd=repo_root, check=True, timeout=300)
    return binary


# ------------------------------------------------------------------ one run of each side

def run_peer(args, children, peer, python, workload, orders, round_number, run_dir):
    truncate_access_log()
    argv = [python, "bench.py", "--peer", "zmq", "--workload", workload, "--n", str(orders),
            "--submitters", str(args.submitters), "--run", str(round_number), "--deadline", str(args.deadline)]
    started = time.monotonic()
    code = children.run(argv, peer, f"{run_dir}/stdout.json", f"{run_dir}/stderr.log", timeout=args.deadline + 120)
    record = {"side": "peer", "workload": workload, "round": round_number, "orders": orders, "exit": code,
              "seconds": round(time.monotonic() - started, 1), "dir": run_dir}
    with open(f"{run_dir}/stdout.json") as f:
        lines = [line for line in f.read().splitlines() if line.strip()]
    try:
        raw = json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError):
        raw = {}
    record["raw"] = raw
    if code != 0 or "error" in raw or not raw.get("correct"):
        record["error"] = raw.get("error") or (f"incorrect: {raw.get('outcomes_unique')} unique / {raw.get('outcomes_total')} "
                                               f"outcomes, {raw.get('nginx_log_lines')} nginx lines of {orders}"
                                               if raw else f"exit {code}, no JSON result (see {run_dir}/stderr.log)")
        return record
    cores = raw.get("cores_by_role", {})
    stage_cores = sum(v for role, v in cores.items() if role.startswith(("signer", "submitter")))
    record.update({
        "orders_per_s": raw["throughput"],
        "p50_ms": raw["p50_ms"],
        "p99_ms": raw["p99_ms"],
        # The stages only: the producer and the sink play the part paypipe-bench's driver plays.
        "cpu_us_per_order": stage_cores * raw["window_s"] / orders * 1e6,
        "peak_rss_mib": raw["rss_peak_sum_kb"] / 1024,
        "other_load": f"{raw.get('foreign_cores', 0):.2f} cores",
        "nginx_200": raw.get("nginx_log_200"),
    })
    return record


def run_paypipe(args, children, bin_dir, repo_root, workload, orders, round_number, run_dir, postgres=None):
    """paypipe on its SQLite store, or with `postgres` (the private server's directory) on PostgreSQL, side paypipe-pg."""
    truncate_access_log()
    argv = [os.path.join(bin_dir, "paypipe-bench"), "--bin-dir", bin_dir, "--scenarios", "w1", "--orders", str(orders),
            "--submitters", str(args.submitters), "--concurrency", str(args.concurrency),
            "--provider-url", WORKLOADS[workload], "--warmup", str(args.warmup), "--max-seconds", str(args.deadline),
            "--worker-nice", str(args.worker_nice), "--out", run_dir]
    if postgres:
        argv += ["--postgres-url", postgres_url(postgres), "--postgres-data", os.path.join(postgres, "data")]
    started = time.monotonic()
    code = children.run(argv, repo_root, f"{run_dir}/stdout.txt", f"{run_dir}/stderr.log", timeout=args.deadline + 120)
    record = {"side": "paypipe-pg" if postgres else "paypipe", "workload": workload, "round": round_number, "orders": orders,
              "exit": code, "seconds": round(time.monotonic() - started, 1), "dir": run_dir}
    lines, ok_lines = access_log_counts()
    record["nginx_lines"], record["nginx_200"] = lines, ok_lines
    try:
        with open(f"{run_dir}/results.json") as f:
            scenario = json.load(f)["scenarios"][0]
    except (OSError, json.JSONDecodeError, KeyError, IndexError):
        record["error"] = f"exit {code}, no results.json (see {run_dir}/stderr.log)"
        return record
    record["statuses"] = scenario.get("statusCounts", {})
    if code != 0 or scenario.get("error") or scenario.get("missing", 1) > 0:
        record["error"] = f"exit {code}, missing {scenario.get('missing')}, {scenario.get('error') or ''}".rstrip(", ")
        return record
    if shortfall := nginx_shortfall(lines, ok_lines, orders + args.warmup):
        record["error"] = shortfall
        return record
    latency = scenario.get("latency") or {}
    record.update({
        "orders_per_s": scenario["ordersPerSecond"],
        "p50_ms": latency.get("p50Ms"),
        "p99_ms": latency.get("p99Ms"),
        "cpu_us_per_order": scenario["pipelineCPUSecondsPer1000Orders"] * 1000,
        "peak_rss_mib": sum(role["peakRSSMiB"] for role in scenario["roles"].values()),
        "other_load": (f"{scenario['otherLoadFraction'] * (os.cpu_count() or 1):.2f} cores"
                       if scenario.get("otherLoadFraction") is not None else "-"),
    })
    if workload == "W2" and (record["p50_ms"] or 0) < W2_PROVIDER_MS:
        record["error"] = f"p50 {record['p50_ms']} ms is below the W2 provider's {W2_PROVIDER_MS} ms: it did not reach {WORKLOADS['W2']}"
    return record


def nginx_shortfall(lines, ok_lines, expected):
    """Why a run is wrong when nginx answered fewer requests with 200 than the side sent (a wrong URL or path), else None."""
    return None if ok_lines >= expected else f"nginx answered {ok_lines} requests with 200 of {expected} sent ({lines} lines)"


def run_floor(args, children, floor, store, workload, orders, round_number, run_dir):
    truncate_access_log()
    provider = WORKLOADS[workload].removeprefix("http://")
    argv = [floor, "--provider", provider, "--orders", str(orders), "--warmup", str(args.warmup), "--store", store,
            "--submitters", str(args.submitters), "--concurrency", str(args.concurrency),
            "--worker-nice", str(args.worker_nice), "--max-seconds", str(int(args.deadline))]
    started = time.monotonic()
    code = children.run(argv, os.path.dirname(floor), f"{run_dir}/stdout.json", f"{run_dir}/stderr.log",
                        timeout=args.deadline + 60)
    record = {"side": f"floor-{store}", "workload": workload, "round": round_number, "orders": orders, "exit": code,
              "seconds": round(time.monotonic() - started, 1), "dir": run_dir}
    lines, ok_lines = access_log_counts()
    record["nginx_lines"], record["nginx_200"] = lines, ok_lines
    try:
        with open(f"{run_dir}/stdout.json") as f:
            raw = json.loads(f.read().strip().splitlines()[-1])
    except (OSError, IndexError, json.JSONDecodeError):
        record["error"] = f"exit {code}, no JSON result (see {run_dir}/stderr.log)"
        return record
    if code != 0:
        record["error"] = f"exit {code} (see {run_dir}/stderr.log)"
        return record
    if shortfall := nginx_shortfall(lines, ok_lines, orders + args.warmup):
        record["error"] = shortfall
        return record
    record.update({"orders_per_s": raw["orders_per_s"], "p50_ms": raw["p50_ms"], "p99_ms": raw["p99_ms"],
                   "cpu_us_per_order": raw["cpu_us_per_order"]["total"], "peak_rss_mib": raw["peak_rss_mib"],
                   "other_load": "-"})
    return record


# ------------------------------------------------------------------ report

FIGURES = [("orders_per_s", "orders/s", 0), ("p50_ms", "p50 ms", 1), ("p99_ms", "p99 ms", 1),
           ("cpu_us_per_order", "CPU µs/order", 0), ("peak_rss_mib", "peak RSS MiB", 0)]


def number(value, digits):
    return "-" if value is None else f"{value:,.{digits}f}"


def summarize(runs, workloads, sides):
    summary = {}
    for workload in workloads:
        summary[workload] = {}
        for side in sides:
            good = [r for r in runs if r["workload"] == workload and r["side"] == side and "error" not in r]
            entry = {"rounds": len(good), "failed": sum(1 for r in runs if r["workload"] == workload and r["side"] == side
                                                        and "error" in r)}
            for key, _, _ in FIGURES:
                values = [r[key] for r in good if r.get(key) is not None]
                entry[key] = {"median": statistics.median(values), "min": min(values), "max": max(values),
                              "values": values} if values else None
            summary[workload][side] = entry
        peer = summary[workload]["peer"]
        # Each side's median over the peer's; `ratio` stays paypipe's, as in results.json.
        summary[workload]["ratios"] = {side: {key: (summary[workload][side][key]["median"] / peer[key]["median"]
                                                    if summary[workload][side][key] and peer[key] and peer[key]["median"]
                                                    else None)
                                              for key, _, _ in FIGURES}
                                       for side in sides if side != "peer"}
        summary[workload]["ratio"] = summary[workload]["ratios"]["paypipe"]
    return summary


def table(runs, summary, args, workload_orders, sides):
    rounds = range(1, args.rounds + 1)
    head = ["workload", "side"] + [f"round {r} orders/s" for r in rounds] + [f"median {label}" for _, label, _ in FIGURES]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * 2 + "--:|" * (len(head) - 2)]
    for workload, orders in workload_orders:
        for side in sides:
            cells = [f"{workload} ({orders:,})", side]
            for r in rounds:
                match = [x for x in runs if x["workload"] == workload and x["side"] == side and x["round"] == r]
                cells.append("-" if not match else "FAILED" if "error" in match[0] else number(match[0]["orders_per_s"], 0))
            for key, _, digits in FIGURES:
                figure = summary[workload][side][key]
                cells.append(number(figure["median"] if figure else None, digits))
            lines.append("| " + " | ".join(cells) + " |")
        for side, ratio in summary[workload]["ratios"].items():
            cells = [workload, f"**{side}/peer**"] + [""] * args.rounds
            cells += [f"**{ratio[key]:.2f}×**" if key == "orders_per_s" and ratio[key] else
                      (f"{ratio[key]:.2f}×" if ratio[key] else "-") for key, _, _ in FIGURES]
            lines.append("| " + " | ".join(cells) + " |")
        if "paypipe-pg" in sides:
            # The store's own cost: paypipe on PostgreSQL over paypipe on SQLite, in the same rounds.
            ours, pg = summary[workload]["paypipe"], summary[workload]["paypipe-pg"]
            cells = [workload, "**paypipe-pg/paypipe**"] + [""] * args.rounds
            for key, _, _ in FIGURES:
                ratio = pg[key]["median"] / ours[key]["median"] if pg[key] and ours[key] and ours[key]["median"] else None
                cells.append("-" if ratio is None else (f"**{ratio:.2f}×**" if key == "orders_per_s" else f"{ratio:.2f}×"))
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


SIDE_COLORS = {"peer": "#7f7f7f", "paypipe": "#1f77b4", "paypipe-pg": "#9467bd",
               "floor-none": "#c7e9c0", "floor-fsync": "#74c476", "floor-sqlite": "#238b45"}


def throughput_svg(summary, workload_orders, subtitle, sides):
    """Per workload: each side's median orders/s, whiskers from the slowest to the fastest round."""
    legend = {side: "peer (Python)" if side == "peer" else side for side in sides}
    groups = []
    for workload, orders in workload_orders:
        ratio = summary[workload]["ratio"]["orders_per_s"]
        label = f"{workload} ({orders:,})" + (f": {ratio:.2f}×" if ratio else "")
        groups.append((label, {legend[side]: summary[workload][side]["orders_per_s"] for side in sides}))
    return charts.bar_groups("paypipe vs the Python peer, orders/s", subtitle, "orders/s (median, whiskers min–max)", groups,
                             {legend[side]: SIDE_COLORS[side] for side in sides})


def machine():
    model = "?"
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "?")
    except OSError:
        pass
    return f"nproc {os.cpu_count()}, {model}, Linux {os.uname().release}"


def git_commit(repo_root):
    result = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=repo_root, capture_output=True, text=True)
    return result.stdout.strip() if result.returncode == 0 else "?"


def report_markdown(runs, summary, args, workload_orders, context, sides):
    text = [f"# paypipe vs the Python peer, {context['startedAt']}", "",
            f"Machine: {context['machine']}. Commit {context['commit']}. Command: `{context['command']}`. "
            f"Peer: `{context['peer']}` (pyzmq + uvloop + aiohttp, `--peer zmq --submitters {args.submitters}`, 256 in flight "
            f"per submitter); paypipe: `paypipe-bench --scenarios w1 --submitters {args.submitters} --concurrency "
            f"{args.concurrency} --worker-nice {args.worker_nice} --provider-url <nginx>` ({args.warmup} warm-up orders, not "
            "measured; the signer and submitters at nice +N below the ledger, as `paypipe up` starts them). Both against the "
            "peer's nginx mock: W1 = 127.0.0.1:18081 (answers at once), W2 = 127.0.0.1:18082 (50 ms). "
            "Rounds rotate the side that goes first." + (
                " floor-STORE: `bench/floor/floor.c`, paypipe's processes, ZeroMQ hops, claim and commits with no work "
                "in any stage, its ledger committing to STORE (none; an append and fdatasync; SQLite tuned as the "
                "ledger's), the same submitters, concurrency, nice and warm-up: what no change to a stage can beat."
                if len(sides) > 2 else ""), "",
            table(runs, summary, args, workload_orders, sides), "",
            "Medians over the rounds; each ratio is that side's median / the peer's median. orders/s = orders / (last outcome − "
            "first send). CPU µs/order: the pipeline's stages only over the measured window (peer: signer + submitters; "
            "paypipe: ledger + signer + submitters), not the load generator and outcome reader (peer: producer + sink; "
            "paypipe: the driver) nor nginx. Peak RSS: the peer's `rss_peak_sum_kb` (all its processes, producer and sink "
            "included); paypipe: the sum of its roles' VmHWM (driver excluded). Absolute figures drift between runs on a "
            "shared machine: compare the ratio.", "", "![throughput](throughput.svg)", "", "## Every run", "",
            "| workload | round | side | orders/s | p50 ms | p99 ms | CPU µs/order | peak RSS MiB | other load | nginx 200s | wall s | result |",
            "|---|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|---|"]
    for r in runs:
        cells = [r["workload"], str(r["round"]), r["side"]] + [number(r.get(key), digits) for key, _, digits in FIGURES]
        statuses = ", ".join(f"{k} {v}" for k, v in sorted(r.get("statuses", {}).items()))
        result = f"FAILED: {r['error']}" if "error" in r else ("ok" + (f" ({statuses})" if statuses else ""))
        cells += [r.get("other_load", "-"), str(r.get("nginx_200", "-")), str(r["seconds"]), escape(result)]
        text.append("| " + " | ".join(cells) + " |")
    text += ["", "Other load: CPU in the run's window used by processes outside the run (another job on a shared machine; "
             "above a few tenths of a core the run was disturbed); the peer's `foreign_cores` leaves nginx out, "
             "paypipe-bench's other load includes nginx (about 0.1–0.2 cores here).", "",
             "Per-run output: `runs/<workload>-r<round>-<side>/` (the peer's JSON line and stderr; paypipe-bench's "
             "results.json, summary.md and logs). Every figure: results.json."]
    return "\n".join(text) + "\n"


# ------------------------------------------------------------------ main

def main():
    parser = argparse.ArgumentParser(prog="bench/run --vs-peer", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds per workload (default 3)")
    parser.add_argument("--w1-orders", type=int, default=20000, help="orders per W1 run, both sides (default 20000)")
    parser.add_argument("--w2-orders", type=int, default=20000, help="orders per W2 run, both sides (default 20000)")
    parser.add_argument("--submitters", type=int, default=2, help="submitter processes, both sides (default 2)")
    parser.add_argument("--concurrency", type=int, default=256,
                        help="paypipe requests in flight per submitter (default 256, the peer's fixed --inflight)")
    parser.add_argument("--warmup", type=int, default=1000, help="paypipe warm-up orders per run (default 1000)")
    parser.add_argument("--worker-nice", type=int, default=5,
                        help="paypipe's signer and submitters at this nice increment below its ledger, as `paypipe up "
                             "--worker-nice` (default 5, as there; 0: all equal)")
    parser.add_argument("--deadline", type=float, default=240.0, help="upper bound on one run in seconds (default 240)")
    parser.add_argument("--skip-build", action="store_true", help="use the release binaries already built")
    parser.add_argument("--bin-dir", help="directory with the paypipe executables (implies --skip-build)")
    parser.add_argument("--out", help="results directory (default bench/results/vs-peer-<UTC timestamp>)")
    parser.add_argument("--postgres", action="store_true",
                        help="also run paypipe with its ledger's store in PostgreSQL (side paypipe-pg; a private server, "
                             "whose processes' CPU is counted)")
    parser.add_argument("--floor", default="",
                        help="also run paypipe's floor (bench/floor/floor.c) with these ledger stores, comma-separated: "
                             "none, fsync, sqlite (default: no floor)")
    args = parser.parse_args(sys.argv[2:])
    repo_root = sys.argv[1]
    if args.rounds < 1 or args.w1_orders < 1 or args.w2_orders < 1 or args.submitters < 1 or args.concurrency < 1 \
            or args.warmup < 0 or args.deadline <= 0 or not 0 <= args.worker_nice <= 19:
        parser.error("--rounds, --w1-orders, --w2-orders, --submitters, --concurrency must be positive, "
                     "--warmup not negative, --deadline positive, --worker-nice 0 to 19")
    floor_stores = [store for store in args.floor.split(",") if store]
    if any(store not in FLOOR_STORES for store in floor_stores) or len(set(floor_stores)) != len(floor_stores):
        parser.error(f"--floor takes distinct stores among {', '.join(FLOOR_STORES)}, comma-separated")
    sides = ["peer", "paypipe"] + (["paypipe-pg"] if args.postgres else []) + [f"floor-{store}" for store in floor_stores]

    started_at = datetime.datetime.now(datetime.timezone.utc)
    out = os.path.abspath(args.out or os.path.join(repo_root, "bench", "results",
                                                   "vs-peer-" + started_at.strftime("%Y%m%d-%H%M%S")))
    os.makedirs(out, exist_ok=True)
    bin_dir = binaries(args, repo_root)
    floor = build_floor(repo_root, out) if floor_stores else None
    postgres = start_postgres(repo_root, out) if args.postgres else None
    peer = peer_directory(repo_root)
    install_packages()
    python = ensure_venv(peer)
    conf = os.path.join(peer, "conf", "nginx.conf")

    children = Children()
    runs = []
    workload_orders = [("W1", args.w1_orders), ("W2", args.w2_orders)]
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)
    interrupted = None
    try:
        start_nginx(conf)
        log(f"results in {out}; paypipe from {bin_dir}; peer in {peer}")
        for round_number in range(1, args.rounds + 1):
            for workload, orders in workload_orders:
                # Rotate who goes first, so a drift in the machine's speed favours no side.
                turn = (round_number - 1) % len(sides)
                for side in sides[turn:] + sides[:turn]:
                    run_dir = os.path.join(out, "runs", f"{workload}-r{round_number}-{side}")
                    os.makedirs(run_dir, exist_ok=True)
                    log(f"round {round_number}/{args.rounds} {workload} {side}: {orders} orders")
                    if side == "peer":
                        record = run_peer(args, children, peer, python, workload, orders, round_number, run_dir)
                    elif side == "paypipe-pg":
                        record = run_paypipe(args, children, bin_dir, repo_root, workload, orders, round_number, run_dir,
                                             postgres)
                    elif side.startswith("floor-"):
                        record = run_floor(args, children, floor, side.removeprefix("floor-"), workload, orders,
                                           round_number, run_dir)
                    else:
                        record = run_paypipe(args, children, bin_dir, repo_root, workload, orders, round_number, run_dir)
                    runs.append(record)
                    log(f"round {round_number} {workload} {side}: " + (
                        f"FAILED: {record['error']}" if "error" in record else
                        f"{record['orders_per_s']:,.0f} orders/s, p50 {number(record['p50_ms'], 1)} ms, "
                        f"p99 {number(record['p99_ms'], 1)} ms"))
    except Interrupted as e:
        interrupted = str(e)
        log(f"{interrupted}: stopping")
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        children.stop_all()
        stop_nginx(conf)
        if postgres:
            stop_postgres(repo_root, postgres)

    summary = summarize(runs, [w for w, _ in workload_orders], sides)
    context = {"startedAt": started_at.strftime("%Y-%m-%dT%H:%M:%SZ"), "machine": machine(), "commit": git_commit(repo_root),
               "command": "bench/run --vs-peer " + " ".join(sys.argv[2:]), "peer": peer, "binDirectory": bin_dir,
               "arguments": vars(args), "interrupted": interrupted}
    printed = table(runs, summary, args, workload_orders, sides)
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump({**context, "summary": summary, "runs": runs}, f, indent=2, sort_keys=True)
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write(report_markdown(runs, summary, args, workload_orders, context, sides))
    with open(os.path.join(out, "throughput.svg"), "w") as f:
        f.write(throughput_svg(summary, workload_orders,
                               f"{args.rounds} alternating round{'s' if args.rounds > 1 else ''}, {args.submitters} submitters each, {machine()}"[:90],
                               sides))
    print(f"nproc: {os.cpu_count()}")
    print(printed)
    print(f"results: {out}/ (report.md, results.json, throughput.svg, runs/)")
    failed = [r for r in runs if "error" in r]
    for r in failed:
        log(f"FAILED {r['workload']} round {r['round']} {r['side']}: {r['error']}")
    if interrupted:
        return 130
    return 1 if failed or len(runs) < len(sides) * args.rounds * len(workload_orders) else 0


if __name__ == "__main__":
    sys.exit(main())
