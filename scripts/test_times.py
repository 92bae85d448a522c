#!/usr/bin/env python3
"""Summarises a CTest JUnit file (ctest --output-junit): every test's time,
longest first, and one line with the counts of passed, failed and skipped
tests, the tests' wall time and the build's. What CI's log shows of a run."""
import argparse
import sys
import xml.etree.ElementTree as ET


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("junit", help="the JUnit XML file ctest wrote")
    ap.add_argument("--build-seconds", type=float, default=None)
    ap.add_argument("--test-seconds", type=float, default=None)
    a = ap.parse_args()
    try:
        root = ET.parse(a.junit).getroot()
    except (OSError, ET.ParseError) as e:
        print(f"test_times: {a.junit}: {e}", file=sys.stderr)
        return 2
    rows = []
    for case in root.iter("testcase"):
        status = case.get("status", "run")
        if case.find("failure") is not None or case.find("error") is not None or status == "fail":
            state = "failed"
        elif case.find("skipped") is not None or status in ("notrun", "disabled"):
            state = "skipped"
        else:
            state = "passed"
        rows.append((float(case.get("time", "0") or 0), case.get("name", "?"), state))
    rows.sort(key=lambda r: -r[0])
    print("\ntest times (seconds, longest first):")
    for seconds, name, state in rows:
        mark = "" if state == "passed" else f"  [{state}]"
        print(f"{seconds:9.1f}  {name}{mark}")
    counts = {s: sum(1 for r in rows if r[2] == s) for s in ("passed", "failed", "skipped")}
    total = sum(r[0] for r in rows)
    parts = [f"{len(rows)} tests: {counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped",
             f"test time {total:.0f} s summed"]
    if a.test_seconds is not None:
        parts.append(f"ctest wall {a.test_seconds:.0f} s")
    if a.build_seconds is not None:
        parts.append(f"build {a.build_seconds:.0f} s")
    print("\nsummary: " + "; ".join(parts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
