#!/usr/bin/env python3
"""podinit's benchmarks side by side with runc. Run through scripts/bench.

Every row: podinit and, where there is one, its anchor, measured in the same run on the
same busybox bundle. Writes BENCHMARKS.md-ready tables to stdout and to bench/latest.md,
and the raw figures to bench/latest.json.
"""

import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# PODINIT_BIN: a release binary built elsewhere (a CARGO_TARGET_DIR of its own).
BIN = os.environ.get("PODINIT_BIN") or os.path.join(ROOT, "target/x86_64-unknown-linux-gnu/release/podinit")
# examples/floor.rs: the kernel work of a pod alone, without podinit (the floor rows).
FLOOR = os.path.join(ROOT, "target/x86_64-unknown-linux-gnu/release/examples/floor")
BUNDLES = os.path.join(ROOT, "oci-bundles")
WORK = tempfile.mkdtemp(prefix="podinit-bench.")
# State on tmpfs for both, as /run is on a standard Debian (podinit's default state dir is
# under /run/podinit, runc's under /run/runc); the disk here is ext4 with `discard`, where
# each unlink costs up to a millisecond.
if subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=0700", "podinit-bench", WORK]).returncode:
    os.rmdir(WORK)
    raise SystemExit("bench: cannot mount a tmpfs for the state directories")
RUNC_BIN = shutil.which("runc") or "/usr/sbin/runc"
RUNC = [RUNC_BIN, "--root", f"{WORK}/runc"]
rows = []
ANALYSIS = "## Where the time and memory go"


def q(xs, p):
    xs = sorted(xs)
    k = min(len(xs) - 1, max(0, round(p * (len(xs) - 1))))
    return xs[k]


def row(what, unit, podinit, anchor=None, anchor_name="", goal=""):
    """podinit/anchor: lists of samples (or one number)."""
    def stats(v):
        if v is None:
            return None
        v = v if isinstance(v, list) else [v]
        return {"median": statistics.median(v), "p90": q(v, 0.9), "n": len(v)}
    r = {"what": what, "unit": unit, "podinit": stats(podinit), "anchor": stats(anchor),
         "anchor_name": anchor_name, "goal": goal}
    if r["anchor"] and r["anchor"]["median"]:
        r["ratio"] = r["podinit"]["median"] / r["anchor"]["median"]
    rows.append(r)
    a = r["anchor"]
    print(f"  {what}: podinit {r['podinit']['median']:.3f} {unit} (p90 {r['podinit']['p90']:.3f})"
          + (f", {anchor_name} {a['median']:.3f} (p90 {a['p90']:.3f}), ratio {r['ratio']:.2f}" if a else "")
          + (f"  [goal {goal}]" if goal else ""), flush=True)


def pod_yaml(name, containers, share=False, extra=""):
    lines = ["apiVersion: v1", "kind: Pod", f"metadata: {{name: {name}}}", "spec:",
             "  restartPolicy: Never", "  terminationGracePeriodSeconds: 5"]
    if share:
        lines.append("  shareProcessNamespace: true")
    lines.append("  containers:")
    for c in containers:
        lines.append("  - " + c)
    return "\n".join(lines) + "\n" + extra


def write(name, text):
    p = os.path.join(WORK, name)
    with open(p, "w") as f:
        f.write(text)
    return p


def hyperfine(cmds, runs=30, per_round=3, prepare=None):
    """Wall times (ms) of each command, `runs` each, measured by hyperfine in rounds of
    `per_round` runs that alternate between the commands (their order turning each round):
    this VM's speed drifts by ±15 % over minutes, and one block of runs per command made
    the ratios depend on when each block ran. `prepare` runs before each run."""
    out = os.path.join(WORK, "hf.json")
    times = [[] for _ in cmds]
    for r in range(-(-runs // per_round)):
        order = [(r + k) % len(cmds) for k in range(len(cmds))]
        subprocess.run(["hyperfine", "-N", "--warmup", "3" if r == 0 else "1", "--runs", str(per_round),
                        "--export-json", out, "--style", "none"]
                       + (["--prepare", prepare] if prepare else []) + [cmds[k] for k in order],
                       check=True, stdout=subprocess.DEVNULL)
        with open(out) as f:
            for k, res in zip(order, json.load(f)["results"]):
                times[k].extend(t * 1000 for t in res["times"])
    return [t[:runs] for t in times]


def runc_bundle(args):
    d = tempfile.mkdtemp(prefix="runc-bundle.", dir=WORK)
    with open(os.path.join(BUNDLES, "busybox/config.json")) as f:
        cfg = json.load(f)
    cfg["process"]["args"] = args
    cfg["root"]["path"] = os.path.join(BUNDLES, "busybox/rootfs")
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f)
    return d


def run_cmd(manifest, state):
    return f"{BIN} run {manifest} --bundles {BUNDLES} --state-dir {state}"


def floor_cmd(n):
    os.makedirs(os.path.join(WORK, "floor"), exist_ok=True)
    return f"{FLOOR} {BUNDLES}/busybox/rootfs {WORK}/floor {n}"


def start_pod(manifest, state, *extra):
    return subprocess.Popen([BIN, "run", manifest, "--bundles", BUNDLES, "--state-dir", state, *extra],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def wait_for(pred, limit=60):
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.005)
    raise SystemExit("bench: timed out waiting")


def status(state):
    try:
        with open(os.path.join(state, "status.json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def all_running(state, n):
    cs = status(state).get("status", {}).get("containerStatuses", [])
    return len(cs) == n and all("running" in c.get("state", {}) for c in cs)


def supervisor_pid(outer):
    with open(f"/proc/{outer}/task/{outer}/children") as f:
        return int(f.read().split()[0])


def proc_kib(pid, name, key):
    """A `Key: N kB` line of /proc/PID/NAME (status, smaps_rollup)."""
    with open(f"/proc/{pid}/{name}") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def rss_kib(pid):
    return proc_kib(pid, "status", "VmRSS")


def memory_split(pid):
    """Where a process's memory is, from /proc/PID/smaps: {kind: [Rss, Pss, Private] kB}
    for the binary's code, its read-only data (constants and relocation-read-only
    pointers), its writable data, the heap (brk and the .bss beside it), the main stack,
    other anonymous maps (threads' stacks, malloc's mmaps) and the rest (vDSO, other
    files); with the page tables (VmPTE) and the thread count beside them."""
    split, kind = {}, None
    exe = os.path.realpath(f"/proc/{pid}/exe")
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            head = line.split()
            if "-" in head[0] and not head[0].endswith(":"):
                perms, name = head[1], (head[5] if len(head) > 5 else "")
                if name == "[heap]" or (not name and kind in ("data", "heap")):
                    kind = "heap"
                elif name == "[stack]":
                    kind = "stack"
                elif not name:
                    kind = "anonymous"
                elif name.startswith("/") and (name == exe or os.path.basename(name) == os.path.basename(exe)):
                    kind = "code" if "x" in perms else ("data" if "w" in perms else "read-only data")
                else:
                    kind = "other"
                split.setdefault(kind, [0, 0, 0])
            elif head[0] in ("Rss:", "Pss:", "Private_Clean:", "Private_Dirty:"):
                k = {"Rss:": 0, "Pss:": 1}.get(head[0], 2)
                split[kind][k] += int(head[1])
    split["page tables"] = [proc_kib(pid, "status", "VmPTE"), 0, 0]
    split["threads"] = [proc_kib(pid, "status", "Threads"), 0, 0]
    return split


def print_split(label, pid):
    s = memory_split(pid)
    total = [sum(v[i] for k, v in s.items() if k not in ("page tables", "threads")) for i in range(3)]
    parts = ", ".join(f"{k} {v[0]}/{v[1]}/{v[2]}" for k, v in s.items()
                      if k not in ("page tables", "threads"))
    print(f"    {label} (pid {pid}) kB Rss/Pss/private: {total[0]}/{total[1]}/{total[2]} = {parts}; "
          f"page tables {s['page tables'][0]} kB, {s['threads'][0]} thread(s)", flush=True)
    return total


FLOOR_MEM = os.path.join(ROOT, "target/x86_64-unknown-linux-gnu/release/examples/memory_floor")


def memory_floor(binary=FLOOR_MEM, prefix=()):
    """examples/memory_floor: a static do-nothing Rust process pair, an outer process and
    PID 1 of a new pid namespace, with podinit's build settings (run as another user
    through `prefix`, in a user namespace of its own). Prints each one's split and returns
    their summed [Rss, Pss, private] kB, or None without the example."""
    if not os.path.exists(binary):
        print(f"  memory floor: {binary} is missing (cargo build --release --example memory_floor)", flush=True)
        return None
    pr = subprocess.Popen(list(prefix) + [binary] + (["--rootless"] if prefix else []),
                          stdout=subprocess.PIPE, text=True)
    try:
        outer, pid1 = map(int, pr.stdout.readline().split())
        time.sleep(1)
        a = print_split("floor: outer", outer)
        b = print_split("floor: PID 1", pid1)
        return [x + y for x, y in zip(a, b)]
    finally:
        for q in (pr.pid,):
            try:
                kids = open(f"/proc/{q}/task/{q}/children").read().split()
            except OSError:
                kids = []
            for k in kids:
                try:
                    os.kill(int(k), signal.SIGKILL)
                except OSError:
                    pass
        pr.wait()


def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return int(parts[11]) + int(parts[12])


def http_get(sock_path, path, conn=None):
    s = conn or socket.socket(socket.AF_UNIX)
    if conn is None:
        s.connect(sock_path)
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: pod\r\n\r\n".encode())
    buf = b""
    while b"\r\n\r\n" not in buf:
        buf += s.recv(65536)
    head, body = buf.split(b"\r\n\r\n", 1)
    n = int([l.split(b":")[1] for l in head.split(b"\r\n") if l.lower().startswith(b"content-length")][0])
    while len(body) < n:
        body += s.recv(65536)
    return s, body


def shim_rss_mib():
    """RSS of what podinit replaces at a pod's rest: one containerd-shim-runc-v2 and the
    pause process it runs (busybox `sleep` stands for pause, which Debian does not ship).
    None when containerd is not installed."""
    if not shutil.which("containerd") or not shutil.which("ctr"):
        return None
    d = os.path.join(WORK, "containerd")
    os.makedirs(d)
    with open(os.path.join(d, "config.toml"), "w") as f:
        f.write(f'version = 2\nroot = "{d}/root"\nstate = "{d}/state"\n'
                f'[grpc]\n  address = "{d}/c.sock"\n[ttrpc]\n  address = "{d}/c.sock.ttrpc"\n')
    daemon = subprocess.Popen(["containerd", "--config", os.path.join(d, "config.toml")],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ctr = ["ctr", "--address", os.path.join(d, "c.sock")]
    try:
        wait_for(lambda: subprocess.run(ctr + ["version"], capture_output=True).returncode == 0)
        subprocess.run(ctr + ["run", "-d", "--rootfs", os.path.join(BUNDLES, "busybox/rootfs"),
                              "bench-pause", "/bin/sleep", "1000"], check=True, capture_output=True)
        time.sleep(2)
        pause = int(subprocess.run(ctr + ["task", "ls"], capture_output=True, text=True,
                                   check=True).stdout.split("\n")[1].split()[1])
        with open(f"/proc/{pause}/stat") as f:
            shim = int(f.read().rsplit(")", 1)[1].split()[1])
        return (rss_kib(shim) + rss_kib(pause)) / 1024
    finally:
        subprocess.run(ctr + ["task", "kill", "-s", "KILL", "bench-pause"], capture_output=True)
        time.sleep(0.5)
        subprocess.run(ctr + ["task", "delete", "bench-pause"], capture_output=True)
        subprocess.run(ctr + ["container", "delete", "bench-pause"], capture_output=True)
        daemon.terminate()
        daemon.wait()


PHASES = [
    ("outer", "podinit starts, admits the pod, makes the pod's cgroups and state dir"),
    ("sandbox", "clone3 of the sandbox: new pid, net, ipc, uts and mount namespaces"),
    ("supervisor", "supervisor: sandbox mounts, /etc files, socket; the container's overlay, cgroups, log"),
    ("container", "container process: mounts, pivot_root, credentials, exec"),
    ("run", "busybox `true` starts and exits"),
    ("teardown", "supervisor: reap, final status, its end announced to the outer process"),
    ("cleanup", "outer (from the supervisor's exit on): the cgroups and state removed while the kernel ends the supervisor's namespaces"),
]


def timeline(manifest, state, runs=15):
    """Where the wall time of `podinit run` goes, phase by phase (PHASES), from the
    kernel's tracepoints on exec, clone3 and exit of the three processes (perf record on
    the command only, a dozen events a run). None when perf cannot record them."""
    perf = shutil.which("perf")
    if not perf:
        return None
    data = os.path.join(WORK, "timeline.data")
    events = ["sched:sched_process_exec", "sched:sched_process_exit",
              "syscalls:sys_enter_clone3", "syscalls:sys_exit_clone3"]
    samples = {k: [] for k, _ in PHASES}
    for i in range(runs + 1):
        cmd = [perf, "record", "-q", "-o", data] + sum((["-e", e] for e in events), []) + \
              ["--", BIN, "run", manifest, "--bundles", BUNDLES, "--state-dir", state]
        if subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode:
            return None
        out = subprocess.run([perf, "script", "-i", data, "-F", "pid,time,event,trace"],
                             capture_output=True, text=True).stdout
        ev = []
        for line in out.splitlines():
            f = line.split()
            if len(f) >= 3:
                ev.append((int(f[0]), float(f[1].rstrip(":")) * 1000, f[2].rstrip(":"), line))
        try:
            outer = next(p for p, _, e, _ in ev if e == "sched:sched_process_exec")
            t = lambda pred: next(tm for p, tm, e, l in ev if pred(p, e, l))
            born = [p for p, _, e, l in ev if e == "syscalls:sys_exit_clone3" and l.endswith("0x0")]
            sup, ctr = born[0], born[1]
            marks = [
                t(lambda p, e, l: p == outer and e == "sched:sched_process_exec"),
                t(lambda p, e, l: p == outer and e == "syscalls:sys_enter_clone3"),
                t(lambda p, e, l: p == outer and e == "syscalls:sys_exit_clone3"),
                t(lambda p, e, l: p == sup and e == "syscalls:sys_enter_clone3"),
                t(lambda p, e, l: p == ctr and e == "sched:sched_process_exec"),
                t(lambda p, e, l: p == ctr and e == "sched:sched_process_exit"),
                t(lambda p, e, l: p == sup and e == "sched:sched_process_exit"),
                t(lambda p, e, l: p == outer and e == "sched:sched_process_exit"),
            ]
        except (StopIteration, IndexError, ValueError):
            return None
        # The first run warms the caches.
        for (k, _), a, b in zip(PHASES, marks, marks[1:]):
            if i:
                samples[k].append(b - a)
    return samples


def cgroup_mode():
    if os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
        return "v2"
    return "hybrid" if os.path.exists("/sys/fs/cgroup/unified") else "v1"


def runc_front_end():
    """`podinit runc` against `runc` on one bundle: run of `true`, create + start + delete,
    and exec of `true` into a running container."""
    prunc = [BIN, "runc", "--root", f"{WORK}/prunc"]
    b = runc_bundle(["true"])
    cmd = lambda rt, *a: " ".join(rt + list(a))
    p, r = hyperfine([cmd(prunc, "run", "--bundle", b, "bench-prun"),
                      cmd(RUNC, "run", "--bundle", b, "bench-rrun")], runs=40)
    row("runc front-end: `run` of `true`", "ms", p, r, "runc run", "≤ 0.4 × runc")
    lifecycle = []
    for name, rt in (("p", prunc), ("r", RUNC)):
        script = write(f"lifecycle-{name}.sh", "set -e\n"
                       + cmd(rt, "create", "--bundle", b, f"bench-lc-{name}") + " </dev/null >/dev/null\n"
                       + cmd(rt, "start", f"bench-lc-{name}") + "\n"
                       + cmd(rt, "delete", "--force", f"bench-lc-{name}") + "\n")
        lifecycle.append(f"/bin/sh {script}")
    p, r = hyperfine(lifecycle, runs=40)
    row("runc front-end: `create` + `start` + `delete`", "ms", p, r, "runc's", "≤ 0.4 × runc")
    sb = runc_bundle(["sleep", "1000"])
    for rt, id_ in ((prunc, "bench-exec-p"), (RUNC, "bench-exec-r")):
        subprocess.run(rt + ["run", "-d", "--bundle", sb, id_], check=True, stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        p, r = hyperfine([cmd(prunc, "exec", "bench-exec-p", "true"),
                          cmd(RUNC, "exec", "bench-exec-r", "true")], runs=40)
        row("runc front-end: `exec` of `true` into a running container", "ms", p, r, "runc exec", "≤ 0.3 × runc")
    finally:
        for rt, id_ in ((prunc, "bench-exec-p"), (RUNC, "bench-exec-r")):
            subprocess.run(rt + ["delete", "--force", id_], stderr=subprocess.DEVNULL)


def image_unpack():
    """`podinit images import` of a ~100 MB (uncompressed) one-layer gzip image against
    `tar -xzf` of the same layer, each into a fresh directory on the same disk."""
    import gzip, hashlib, io, tarfile
    d = tempfile.mkdtemp(prefix="podinit-bench-img.", dir="/var/tmp")
    try:
        raw = io.BytesIO()
        total = 0
        with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as t:
            for top in ("/usr/lib", "/usr/share", "/usr/bin"):
                for dirpath, dirs, files in os.walk(top):
                    dirs.sort()
                    for name in sorted(files):
                        p = os.path.join(dirpath, name)
                        if total > 100_000_000 or not os.path.isfile(p) or os.path.islink(p):
                            continue
                        total += os.path.getsize(p)
                        t.add(p, arcname=p.lstrip("/"), recursive=False)
        plain = raw.getvalue()
        layer = gzip.compress(plain, compresslevel=6)
        with open(os.path.join(d, "layer.tar.gz"), "wb") as f:
            f.write(layer)
        sha = lambda b: "sha256:" + hashlib.sha256(b).hexdigest()
        blobs = {}
        def blob(b):
            blobs[sha(b)] = b
            return {"digest": sha(b), "size": len(b)}
        m = "application/vnd.oci.image."
        cfg = json.dumps({"architecture": "amd64", "os": "linux", "config": {},
                          "rootfs": {"type": "layers", "diff_ids": [sha(plain)]}}).encode()
        man = json.dumps({"schemaVersion": 2, "mediaType": m + "manifest.v1+json",
                          "config": {"mediaType": m + "config.v1+json", **blob(cfg)},
                          "layers": [{"mediaType": m + "layer.v1.tar+gzip", **blob(layer)}]}).encode()
        idx = json.dumps({"schemaVersion": 2, "manifests": [{"mediaType": m + "manifest.v1+json", **blob(man),
                          "annotations": {"org.opencontainers.image.ref.name": "bench.test/big:1"}}]}).encode()
        with tarfile.open(os.path.join(d, "image.tar"), "w") as t:
            for name, data in [("oci-layout", b'{"imageLayoutVersion":"1.0.0"}'), ("index.json", idx)] + \
                    [("blobs/sha256/" + k[7:], v) for k, v in blobs.items()]:
                info = tarfile.TarInfo(name)
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))
        del raw, plain, layer, blobs
        store, out = os.path.join(d, "store"), os.path.join(d, "out")
        p, r = hyperfine([f"{BIN} images --images {store} import {d}/image.tar",
                          f"/bin/sh -c 'mkdir {out} && tar -xzf {d}/layer.tar.gz -C {out}'"],
                         runs=6, per_round=1, prepare=f"rm -rf {store} {out}")
        row(f"unpacking a {total / 1e6:.0f} MB one-layer gzip image: `images import`", "ms", p, r,
            "tar -xzf of its layer", "≤ 1.2 × tar")
    finally:
        shutil.rmtree(d, ignore_errors=True)


def rootless():
    """Without root (docs/interface.md §Without root): a one-container pod of `true` run by
    an unprivileged user with `podinit run` from its own image store, against rootless
    `podman run --rm` of the same busybox image; then the memory each keeps beside a
    running container (PSS of every process of the user but the container's: podinit's
    outer process and supervisor; podman's conmon, its pause process and its network
    helper). podman runs with `--network none`, as podinit's pod has loopback only."""
    import pwd
    if not shutil.which("podman") or not shutil.which("newuidmap"):
        print("  rootless: podman or newuidmap (uidmap) is missing: skipped", flush=True)
        return
    user = f"pibench{os.getpid() % 100000}"
    subprocess.run(["useradd", "-m", "-s", "/bin/sh", user], check=True)
    pw = pwd.getpwnam(user)
    home, uid = pw.pw_dir, pw.pw_uid
    xdg = f"/tmp/pibench-xdg-{uid}"

    def user_pids():
        out = []
        for d in os.listdir("/proc"):
            try:
                with open(f"/proc/{d}/status") as f:
                    if any(l.startswith("Uid:") and l.split()[1] == str(uid) for l in f):
                        out.append(int(d))
            except (OSError, ValueError):
                pass
        return out

    try:
        os.makedirs(xdg, mode=0o700)
        ubin = os.path.join(home, "podinit")
        shutil.copy(BIN, ubin)
        archive = os.path.join(home, "busybox.tar")
        subprocess.run([os.path.join(ROOT, "scripts/make-oci-image"), archive, "podinit.test/busybox:1"],
                       check=True, stdout=subprocess.DEVNULL)
        pod = os.path.join(home, "one.yaml")
        with open(pod, "w") as f:
            f.write(pod_yaml("bench-rootless", ['{name: c, image: podinit.test/busybox:1, imagePullPolicy: Never, command: ["true"]}']))
        sleeper = os.path.join(home, "sleep.yaml")
        with open(sleeper, "w") as f:
            f.write(pod_yaml("bench-rootless-rss", ['{name: c, image: podinit.test/busybox:1, imagePullPolicy: Never, command: ["sleep", "1000"]}']))
        subprocess.run(["chown", "-R", f"{uid}:{pw.pw_gid}", home, xdg], check=True)
        as_user = (f"setpriv --reuid={uid} --regid={pw.pw_gid} --clear-groups env -i HOME={home} USER={user} "
                   f"LOGNAME={user} PATH=/usr/bin:/bin:/usr/sbin:/sbin XDG_RUNTIME_DIR={xdg} ")
        sh = lambda cmd, **kw: subprocess.run((as_user + cmd).split(), cwd=home, check=True,
                                              stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL, **kw)
        sh(f"{ubin} images import {archive}")
        sh(f"podman load -q -i {archive}")
        podman = "podman run --rm --network none --pull never podinit.test/busybox:1 true"
        p, r = hyperfine([as_user + f"{ubin} run {pod}", as_user + podman], runs=15)
        row("rootless: one-container pod, `true`: wall time", "ms", p, r,
            "rootless podman run --rm", "≤ 0.2 × podman")

        def comm(q):
            try:
                with open(f"/proc/{q}/comm") as f:
                    return f.read().strip()
            except OSError:
                return ""

        def beside(start, counted):
            """PSS (kB) of the user's processes that `counted(name)` picks once the
            container's `sleep` runs (the podman command line, gone with `-d`, is not
            counted)."""
            pr = subprocess.Popen((as_user + start).split(), cwd=home, stdin=subprocess.DEVNULL,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            wait_for(lambda: any(comm(q) == "sleep" for q in user_pids()))
            time.sleep(2)
            total, seen = 0, []
            for q in user_pids():
                name = comm(q)
                if not counted(name) or (q == pr.pid and " -d " in start):
                    continue
                try:
                    kib = proc_kib(q, "smaps_rollup", "Pss")
                except OSError:
                    continue
                total += kib
                seen.append(f"{name} {kib} kB")
                if name == "podinit":
                    print_split("podinit", q)
            print(f"    beside the container: {', '.join(seen)}", flush=True)
            return pr, total
        # podman's pause process outlives its commands: podinit's own processes alone.
        pr, ours = beside(f"{ubin} run {sleeper}", lambda name: name == "podinit")
        pr.send_signal(signal.SIGTERM)
        pr.wait()
        # What two static processes that do nothing cost (the outer and PID 1 of a pid
        # namespace, in a user namespace of the user's): the floor under podinit's figure.
        if os.path.exists(FLOOR_MEM):
            ufloor = os.path.join(home, "memory_floor")
            shutil.copy(FLOOR_MEM, ufloor)
            floor = memory_floor(ufloor, as_user.split())
            if floor:
                row("rootless: the floor of it: two static do-nothing processes (examples/memory_floor, PSS)",
                    "MiB", floor[1] / 1024)
        # podman's default network, as the issue counts it: its helper (slirp4netns with
        # podman 4.3) gives the container a network beside loopback.
        helper = "" if shutil.which("slirp4netns") or shutil.which("pasta") else " --network none"
        pr, theirs = beside(f"podman run -d --rm{helper} --pull never podinit.test/busybox:1 sleep 1000",
                            lambda name: name not in ("sleep", ""))
        row("rootless: memory beside a running container (PSS of the user's other processes)", "MiB",
            ours / 1024, theirs / 1024,
            "podman's conmon + pause" + (" (no network helper installed)" if helper else " + network helper"),
            "≤ 0.1 × podman")
        pr.wait()
    finally:
        for _ in range(50):
            left = user_pids()
            if not left:
                break
            for q in left:
                try:
                    os.kill(q, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.1)
        subprocess.run(["userdel", "-r", user], stderr=subprocess.DEVNULL)
        shutil.rmtree(xdg, ignore_errors=True)
        shutil.rmtree(home, ignore_errors=True)


def supervisor_memory(run10, anchor=None):
    """The supervisor's and the outer process's memory with 10 running containers, each
    split by kind of mapping (`memory_split`), and the floor beside them."""
    st = os.path.join(WORK, "s-rss")
    pr = start_pod(run10, st)
    wait_for(lambda: all_running(st, 10))
    # At rest: podinit gives back its start-up code pages a second after the starts.
    time.sleep(2)
    sup = supervisor_pid(pr.pid)
    row("supervisor RSS, 10 running containers", "MiB", rss_kib(sup) / 1024, anchor,
        "containerd-shim-runc-v2 + pause", "≤ 1.5 MiB")
    row("supervisor anonymous (private) memory, the rest of its RSS being the binary's shared pages",
        "MiB", proc_kib(sup, "smaps_rollup", "Anonymous") / 1024)
    row("outer `podinit run` process RSS", "MiB", rss_kib(pr.pid) / 1024)
    print_split("supervisor", sup)
    print_split("outer", pr.pid)
    floor = memory_floor()
    if floor:
        row("the floor of it: two static do-nothing processes, outer and PID 1 (examples/memory_floor, RSS)",
            "MiB", floor[0] / 1024)
    pr.send_signal(signal.SIGTERM)
    pr.wait()


def one_pod(floor):
    """A one-container pod of `true` (restartPolicy Never) against `runc run` of the same
    bundle, and the floor beside them when `floor`: the manifest and runc's samples."""
    one = write("one.yaml", pod_yaml("bench-one", ['{name: c, image: busybox, command: ["true"]}']))
    b = runc_bundle(["true"])
    p, r, *f1 = hyperfine([run_cmd(one, os.path.join(WORK, "s-one")), " ".join(RUNC + ["run", "--bundle", b, "bench-one"])]
                          + ([floor_cmd(1)] if floor else []), runs=60)
    row("one-container pod, `true`: wall time", "ms", p, r, "runc run", "≤ 0.2 × runc")
    if floor:
        row("the floor of it: the kernel work alone (examples/floor)", "ms", f1[0], r, "runc run")
    return one, r


def load():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def main():
    if sys.argv[1:] == ["latency"]:
        # `scripts/bench.py latency`: the start and exec rows alone (the one-container pod
        # and the runc front-end, each paired with runc), printed with the load average
        # before and after; BENCHMARKS.md untouched.
        print(f"load average (1, 5, 15 min) before: {load()}", flush=True)
        one_pod(False)
        runc_front_end()
        print(f"load average (1, 5, 15 min) after: {load()}", flush=True)
        return
    if sys.argv[1:] == ["rootless"]:
        # `scripts/bench.py rootless`: that section alone, printed, BENCHMARKS.md untouched.
        rootless()
        return
    if sys.argv[1:] == ["memory"]:
        # `scripts/bench.py memory`: the supervisor's memory rows alone, printed.
        supervisor_memory(write("run10.yaml", pod_yaml("bench-rss", [
            f'{{name: c{i}, image: busybox, command: ["sleep", "1000"]}}' for i in range(10)])))
        return

    print(f"machine: {os.cpu_count()} cores, kernel {os.uname().release}", flush=True)

    # 1. One container, `true`, Never: podinit run vs runc run.
    # examples/floor runs on v1 and hybrid cgroups (on v2 containers are born in their
    # cgroup, which it does not do).
    floor = cgroup_mode() != "v2"
    one, r = one_pod(floor)

    # 1b. Where the one-container pod's time goes.
    phases = timeline(one, os.path.join(WORK, "s-timeline"))
    if phases is None:
        print("  timeline: perf cannot record the tracepoints here: skipped", flush=True)

    # 2. Each extra container: slope between 1 and 10 containers.
    ten = write("ten.yaml", pod_yaml("bench-ten", [f'{{name: c{i}, image: busybox, command: ["true"]}}' for i in range(10)]))
    t1, t10, *f = hyperfine([run_cmd(one, os.path.join(WORK, "s-one")), run_cmd(ten, os.path.join(WORK, "s-ten"))]
                            + ([floor_cmd(1), floor_cmd(10)] if floor else []), runs=40)
    per = [(b10 - b1) / 9 for b1, b10 in zip(sorted(t1), sorted(t10))]
    row("each extra container in the pod", "ms", per, r, "runc run per container", "≤ 1.5 ms")
    if floor:
        per = [(b10 - b1) / 9 for b1, b10 in zip(sorted(f[0]), sorted(f[1]))]
        row("the floor of it: the kernel work alone (examples/floor)", "ms", per, r, "runc run per container")

    # 3. SIGTERM → exit, 10 containers that exit on TERM.
    stop = write("stop.yaml", pod_yaml("bench-stop", [f'{{name: c{i}, image: busybox, command: ["sh", "-c", "trap \'exit 0\' TERM; sleep 1000 & wait"]}}' for i in range(10)]))
    samples = []
    for k in range(10):
        st = os.path.join(WORK, f"s-stop{k}")
        pr = start_pod(stop, st)
        wait_for(lambda: all_running(st, 10))
        time.sleep(0.2)
        t0 = time.monotonic()
        pr.send_signal(signal.SIGTERM)
        pr.wait()
        samples.append((time.monotonic() - t0) * 1000)
    anchor = []
    tb = runc_bundle(["sh", "-c", "trap 'exit 0' TERM; sleep 1000 & wait"])
    for k in range(5):
        ids = [f"bench-stop-{k}-{i}" for i in range(10)]
        for i in ids:
            subprocess.run(RUNC + ["run", "-d", "--bundle", tb, i], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        time.sleep(0.2)
        t0 = time.monotonic()
        for i in ids:
            subprocess.run(RUNC + ["kill", i, "TERM"], check=True)
        for i in ids:
            while subprocess.run(RUNC + ["delete", i], stderr=subprocess.DEVNULL).returncode != 0:
                time.sleep(0.001)
        anchor.append((time.monotonic() - t0) * 1000)
    row("SIGTERM → exit, 10 containers exiting on TERM", "ms", samples, anchor, "10 × runc kill + delete", "≤ 20 ms")

    # 4. Supervisor memory with 10 running containers; 5. binary size.
    run10 = write("run10.yaml", pod_yaml("bench-rss", [f'{{name: c{i}, image: busybox, command: ["sleep", "1000"]}}' for i in range(10)]))
    supervisor_memory(run10, shim_rss_mib())
    row("stripped static binary", "MiB", os.path.getsize(BIN) / 2**20, os.path.getsize(RUNC_BIN) / 2**20,
        "runc binary", "≤ 5 MiB")

    # 6. 10,000 short-lived orphans in a shared pid namespace.
    orph = write("orphans.yaml", pod_yaml("bench-orphans", [
        '{name: c, image: busybox, command: ["sh", "-c", "i=0; while [ $i -lt 10000 ]; do (sleep 0 &); i=$((i+1)); done; echo done; exec sleep 1000"]}'],
        share=True))
    st = os.path.join(WORK, "s-orph")
    pr = start_pod(orph, st)
    sock = os.path.join(st, "pod.sock")
    log = os.path.join(st, "logs/c/0.log")
    wait_for(lambda: os.path.exists(log) and b"done" in open(log, "rb").read(), limit=300)
    t_done = time.monotonic()

    def reaped():
        _, body = http_get(sock, "/metrics")
        for line in body.decode().splitlines():
            if line.startswith("podinit_reaped_processes_total "):
                return int(line.split()[1])
        return 0
    wait_for(lambda: reaped() >= 10000, limit=60)
    lag = (time.monotonic() - t_done) * 1000
    row("10,000 orphans: all reaped after the last one exits", "ms", lag, None, "", "≤ 1000 ms")
    pr.send_signal(signal.SIGTERM)
    pr.wait()

    # 7. Exec probe cost: 50 containers, 1 s exec probes.
    probes = write("probes.yaml", pod_yaml("bench-probes", [
        f'{{name: c{i}, image: busybox, command: ["sleep", "1000"], readinessProbe: {{exec: {{command: ["true"]}}, periodSeconds: 1}}}}'
        for i in range(50)]))
    st = os.path.join(WORK, "s-probes")
    pr = start_pod(probes, st)
    wait_for(lambda: all_running(st, 50), limit=120)
    time.sleep(2)
    sup = supervisor_pid(pr.pid)
    c0, t0 = cpu_ticks(sup), time.monotonic()
    time.sleep(10)
    c1, t1 = cpu_ticks(sup), time.monotonic()
    hz = os.sysconf("SC_CLK_TCK")
    row("exec probes, 50 containers at 1 s: supervisor CPU", "% of a core",
        100 * (c1 - c0) / hz / (t1 - t0), None, "", "≤ 5 %")
    pr.send_signal(signal.SIGTERM)
    pr.wait()

    # 8. GET /v1/pod, sequential.
    st = os.path.join(WORK, "s-api")
    pr = start_pod(run10, st)
    wait_for(lambda: all_running(st, 10))
    sock = os.path.join(st, "pod.sock")
    rates = []
    for _ in range(3):
        conn, _ = http_get(sock, "/v1/pod")
        n, t0 = 0, time.monotonic()
        while time.monotonic() - t0 < 2:
            http_get(sock, "/v1/pod", conn)
            n += 1
        rates.append(n / (time.monotonic() - t0))
        conn.close()
    row("GET /v1/pod, sequential (one connection)", "requests/s", rates, None, "", "≥ 5,000/s")
    rates = []
    for _ in range(3):
        n, t0 = 0, time.monotonic()
        while time.monotonic() - t0 < 2:
            c, _ = http_get(sock, "/v1/pod")
            c.close()
            n += 1
        rates.append(n / (time.monotonic() - t0))
    row("GET /v1/pod, sequential (a connection each)", "requests/s", rates)
    pr.send_signal(signal.SIGTERM)
    pr.wait()

    # 9. The runc front-end (`podinit runc`) against runc itself, same bundle.
    runc_front_end()

    # 10. Unpacking an image against tar.
    image_unpack()

    # 11. Without root, against rootless podman.
    rootless()

    os.makedirs(os.path.join(ROOT, "bench"), exist_ok=True)
    with open(os.path.join(ROOT, "bench/latest.json"), "w") as f:
        json.dump({"machine": {"cores": os.cpu_count(), "kernel": os.uname().release},
                   "rows": rows, "timeline_ms": phases}, f, indent=2)
    md = ["| what | podinit median (p90) | anchor median (p90) | podinit/anchor | goal |",
          "| --- | --- | --- | --- | --- |"]
    for r in rows:
        p, a = r["podinit"], r["anchor"]
        fmt = lambda s: f"{s['median']:.2f} ({s['p90']:.2f}) {r['unit']}"
        md.append(f"| {r['what']} | {fmt(p)} | "
                  + (f"{r['anchor_name']}: {fmt(a)}" if a else "—") + " | "
                  + (f"{r['ratio']:.2f}" if "ratio" in r else "—") + f" | {r['goal'] or '—'} |")
    text = "\n".join(md) + "\n"
    if phases:
        med = {k: statistics.median(v) for k, v in phases.items()}
        text += ("\nWhere the wall time of the one-container pod goes: the kernel's exec, clone3 "
                 "and exit events of podinit, its supervisor and the container (`perf record` on "
                 f"the command; its own cost makes the sum ≈ 1 ms more than the wall time above), median "
                 f"of {len(phases['outer'])} runs.\n\n"
                 "| phase | ms |\n| --- | --- |\n"
                 + "".join(f"| {what} | {med[k]:.2f} |\n" for k, what in PHASES)
                 + f"| all | {sum(med.values()):.2f} |\n")

    with open(os.path.join(ROOT, "bench/latest.md"), "w") as f:
        f.write(text)
    rev = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                         capture_output=True, text=True).stdout.strip()
    # The hand-written analysis below the table (from ANALYSIS on) is kept.
    bm = os.path.join(ROOT, "BENCHMARKS.md")
    analysis = ""
    if os.path.exists(bm):
        with open(bm) as f:
            old = f.read()
        if ANALYSIS in old:
            analysis = "\n" + old[old.index(ANALYSIS):]
    with open(bm, "w") as f:
        f.write("# Benchmarks\n\n"
                f"`scripts/bench` (as root), commit {rev}, on {os.cpu_count()} cores, kernel "
                f"{os.uname().release}, {cgroup_mode()} cgroups; podinit and its anchor in the same run, "
                "on the same busybox bundle. Median and p90 of the samples; the ratio is "
                "podinit/anchor. Raw figures: `bench/latest.json`.\n\n" + text + analysis)
    print()
    print(text)


if __name__ == "__main__":
    try:
        main()
    finally:
        subprocess.run(["umount", "-l", WORK])
        shutil.rmtree(WORK, ignore_errors=True)
