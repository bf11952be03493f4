#!/usr/bin/env python3
"""Per-launch device times of one run from a tensorc trace (TENSORC_TRACE):
the steps of the trace's last run, summed by step label and launch, largest
first. On the GPU machine:

    TENSORC_TRACE=/tmp/t.json bin/tensorc run ART.tcx --bench 3 > /dev/null
    python3 trace_steps.py /tmp/t.json
"""
import collections
import json
import sys


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: trace_steps.py TRACE.json")
    events = json.load(open(sys.argv[1]))["traceEvents"]
    steps = [e for e in events if e.get("cat") == "step" and e.get("tid") == 1]  # GPU device time
    if not steps:
        steps = [e for e in events if e.get("cat") == "step"]  # CPU: host time
    if not steps:
        sys.exit("no step slices in the trace")
    # Runs repeat the same launches: the last run starts at the last launch
    # with the first launch's label (its kernel variant may differ: the
    # first run may pick another, or tune).
    start = max(i for i, e in enumerate(steps) if e["name"] == steps[0]["name"])
    last = steps[start:]
    per = collections.defaultdict(float)
    for e in last:
        per[e["name"] + " | " + e.get("args", {}).get("launch", "")] += e["dur"]
    for key, us in sorted(per.items(), key=lambda kv: -kv[1])[:30]:
        print("%9.3f ms  %s" % (us / 1e3, key))
    print("total %.3f ms over %d launches" % (sum(e["dur"] for e in last) / 1e3, len(last)))


if __name__ == "__main__":
    main()
