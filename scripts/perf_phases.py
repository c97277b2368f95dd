#!/usr/bin/env python3
"""Where the daemon's and memcached's CPU goes in each phase of the server suite's CPU probe (docs/benchmarks.md).

Takes a `perf script -F comm,tid,time,ip,sym` dump of `perf record -k mono -g -p DAEMON_PID,MEMCACHED_PID` taken while
`./hicache bench server` ran with -Dhicache.bench.server.cpuProbe=true, and the probe's log (its lines end with each
phase's times on the monotonic clock). For rounds 3-5 of each phase (set or get, 64 KiB or 1 MiB) it counts each
server's samples: on its serving thread (the daemon's event loop, memcached's worker) the kernel's socket copies, the
rest of the kernel, the JIT's stubs (where the CRC-32C intrinsic runs; any other stub counts there too) and the rest of
user space; the JIT compiler's threads; the other threads.
Standard library only.

    python3 scripts/perf_phases.py PERF_SCRIPT_TXT PROBE_LOG
"""
import collections
import re
import sys

PHASE_LINE = re.compile(
    r"cpu probe (\S+) (\d+) KiB round ([345]).*set ([\d.]+)-([\d.]+), get ([\d.]+)-([\d.]+)\]")
HEADER = re.compile(r"(.+?)\s+(\d+)\s+([\d.]+):")


def samples(path):
    """(thread name, time, stack leaf first) of each sample."""
    out, cur = [], None
    with open(path, errors="replace") as f:
        for line in f:
            if line.startswith("\t"):
                if cur is not None:
                    parts = line.strip().split(None, 1)
                    cur[2].append(parts[1] if len(parts) > 1 else "?")
            elif line.strip():
                m = HEADER.match(line)
                cur = (m.group(1).strip(), float(m.group(3)), []) if m else None
                if cur is not None:
                    out.append(cur)
    return out


def windows(path):
    """{(server, 'set 64'): [(start, end), ...]} for rounds 3-5."""
    w = collections.defaultdict(list)
    with open(path) as f:
        for line in f:
            m = PHASE_LINE.search(line)
            if m:
                server, kib = m.group(1), m.group(2)
                w[(server, "set " + kib)].append((float(m.group(4)), float(m.group(5))))
                w[(server, "get " + kib)].append((float(m.group(6)), float(m.group(7))))
    return w


def category(stack):
    if not stack:
        return "user"
    if stack[0] in ("_copy_to_iter", "_copy_from_iter"):
        return "copy"
    joined = " | ".join(stack)
    if any(k in joined for k in ("do_syscall_64", "handle_softirqs", "asm_sysvec", "exc_page_fault")):
        return "kernel"
    if stack[0].startswith("StubRoutines"):
        return "crc"
    return "user"


def main(perf_txt, probe_log):
    all_samples = samples(perf_txt)
    servers = {
        "hicache": (lambda c: not (c.startswith("mc-") or c == "memcached"), "multiThreadIoEv"),
        "memcached": (lambda c: c.startswith("mc-") or c == "memcached", "mc-worker"),
    }
    print("| phase (rounds 3-5) | daemon samples | memcached samples | ratio | socket copies | other kernel "
          "| user space (+ JIT stubs: CRC-32C) | JIT + other threads |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    w = windows(probe_log)
    for phase in ("set 64", "get 64", "set 1024", "get 1024"):
        counts = {}
        for server, (mine, loop) in servers.items():
            c = collections.Counter()
            spans = w.get((server, phase), [])
            for name, t, stack in all_samples:
                if not mine(name) or not any(a <= t <= b for a, b in spans):
                    continue
                c["total"] += 1
                if name.startswith(loop):
                    c[category(stack)] += 1
                elif name.startswith(("C1 ", "C2 ")):
                    c["jit"] += 1
                else:
                    c["other"] += 1
            counts[server] = c
        d, m = counts["hicache"], counts["memcached"]
        ratio = d["total"] / m["total"] if m["total"] else float("nan")
        print(f"| {phase} KiB | {d['total']} | {m['total']} | {ratio:.2f} | {d['copy']} / {m['copy']} "
              f"| {d['kernel']} / {m['kernel']} | {d['user']} (+ {d['crc']}) / {m['user']} "
              f"| {d['jit']} + {d['other']} / {m['jit']} + {m['other']} |")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
