#!/usr/bin/env python3
"""Where a traced SPMD step's collectives run beside its compute (a tensorc
trace: TENSORC_TRACE, the communication stream on track 2): for the trace's
last run, each collective group's start and end relative to the run's first
kernel, the compute step running when it ends, and how long the last one
ends after the last compute step (communication not hidden by compute).

    tensorc launch --nproc 2 -- bash -c 'TENSORC_TRACE=/tmp/t$RANK.json exec tensorc run ART.tcx --bench 5'
    python3 comm_timeline.py /tmp/t0.json
"""
import json
import sys


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: comm_timeline.py TRACE.json")
    events = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("ph") == "X"]
    steps = [e for e in events if e.get("cat") == "step" and e.get("tid") == 1]
    comm = [e for e in events if e.get("cat") == "collective" and e.get("tid") == 2]
    if not steps or not comm:
        sys.exit("no GPU steps or no collectives in the trace")
    # The last run: from the last launch with the first launch's label.
    first = max(i for i, e in enumerate(steps) if e["name"] == steps[0]["name"])
    run = steps[first:]
    t0, compute_end = run[0]["ts"], run[-1]["ts"] + run[-1]["dur"]
    comm = [c for c in comm if c["ts"] >= t0 - 1]
    busy = sum(s["dur"] for s in run)
    print(f"compute: {len(run)} launches, {compute_end - t0:.1f} us from the first to the end of the last "
          f"({busy:.1f} us busy)")
    for c in comm:
        end = c["ts"] + c["dur"]
        during = next((s["name"] for s in run if s["ts"] <= end <= s["ts"] + s["dur"]), "-")
        print(f"  {c['ts'] - t0:8.1f} .. {end - t0:8.1f} us ({c['dur']:6.1f}) {c['name'][:70]}  [ends during {during}]")
    last = max(c["ts"] + c["dur"] for c in comm)
    print(f"communication after the last compute step: {max(0.0, last - compute_end):.1f} us; "
          f"collectives busy {sum(c['dur'] for c in comm):.1f} us")


if __name__ == "__main__":
    main()
