#!/usr/bin/env bash
# Stops the test cluster in DIR: cancels its jobs, stops slurmd, slurmctld and
# munged, and ends what is left of its job steps. Idempotent: a DIR with no
# cluster (or no DIR at all) is fine.
#   slurm/cluster/stop.sh DIR
#   slurm/cluster/stop.sh --orphans   stops every test cluster whose DIR is gone
#                                     or whose --owner process has exited
# Processes are found by their pid files and by the MAMBAMT_SLURM_CLUSTER /
# SLURM_CONF values that start.sh put in the daemons' environment (job steps
# inherit them); this script, its callers and unrelated processes are never hit.
set -uo pipefail
export PATH=$PATH:/usr/sbin

# Pids of this shell and its ancestors.
protected=" $$ "
p=$$
while [ "$p" -gt 1 ] 2>/dev/null; do
  p=$(awk '/^PPid:/ {print $2}' "/proc/$p/status" 2>/dev/null || echo 1)
  protected+="$p "
done

# Pids whose initial environment names the cluster in $1 (grep -z: NUL-separated lines).
marked_pids() {
  local d=$1 f pid
  for f in $(grep -lzxF -e "MAMBAMT_SLURM_CLUSTER=$d" -e "SLURM_CONF=$d/slurm.conf" /proc/[0-9]*/environ 2>/dev/null); do
    pid=${f#/proc/}
    pid=${pid%/environ}
    case "$protected" in *" $pid "*) continue ;; esac
    echo "$pid"
  done
}

alive() { [ -d "/proc/$1" ] && ! grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null; }

# TERM, wait up to $2 s, then KILL.
end_pids() {
  local pids=$1 wait_s=$2 pid
  [ -z "$pids" ] && return 0
  for pid in $pids; do kill -TERM "$pid" 2>/dev/null; done
  for _ in $(seq 1 $((wait_s * 10))); do
    local any=""
    for pid in $pids; do alive "$pid" && any=1; done
    [ -z "$any" ] && return 0
    sleep 0.1
  done
  for pid in $pids; do alive "$pid" && kill -KILL "$pid" 2>/dev/null; done
  return 0
}

pid_of() { [ -f "$1" ] && cat "$1" 2>/dev/null; }

stop_dir() {
  local dir=$1 rt=$1
  [ -f "$dir/runtime" ] && rt=$(cat "$dir/runtime")
  if [ -f "$dir/slurm.conf" ] && [ -n "$(pid_of "$dir/pid/slurmctld.pid")" ] && alive "$(pid_of "$dir/pid/slurmctld.pid")"; then
    SLURM_CONF=$dir/slurm.conf timeout 10 scancel --quiet --full --signal=KILL --user=root 2>/dev/null
    SLURM_CONF=$dir/slurm.conf timeout 10 scancel --quiet --user=root 2>/dev/null
  fi
  local daemons=""
  for f in "$dir/pid/slurmd.pid" "$dir/pid/slurmctld.pid"; do
    local pid
    pid=$(pid_of "$f")
    [ -n "$pid" ] && alive "$pid" && daemons+="$pid "
  done
  end_pids "$daemons" 10
  # Job steps and their tasks outlive slurmd; anything still marked goes now.
  end_pids "$(marked_pids "$dir" | tr '\n' ' ')" 5
  local munged
  munged=$(pid_of "$rt/munge/munged.pid")
  [ -n "$munged" ] && alive "$munged" && end_pids "$munged" 5
  rm -f "$dir/pid/"*.pid "$rt/munge/munged.pid"
  if [ "$rt" != "$dir" ]; then rm -rf "$rt" "$dir/runtime"; fi
}

if [ "${1:-}" = "--orphans" ]; then
  grep -ahzo '^MAMBAMT_SLURM_CLUSTER=.*' /proc/[0-9]*/environ 2>/dev/null | tr '\0' '\n' | sort -u |
    while IFS= read -r line; do
      d=${line#MAMBAMT_SLURM_CLUSTER=}
      orphan=""
      [ -f "$d/slurm.conf" ] || orphan="directory gone"
      if [ -z "$orphan" ] && [ -f "$d/owner" ] && ! alive "$(cat "$d/owner")"; then orphan="owner $(cat "$d/owner") exited"; fi
      if [ -n "$orphan" ]; then
        echo "stop.sh: stopping orphaned test cluster $d ($orphan)" >&2
        stop_dir "$d"
      fi
    done
  exit 0
fi

if [ $# -lt 1 ]; then
  echo "usage: $0 DIR | --orphans" >&2
  exit 2
fi
[ -d "$1" ] || exit 0
stop_dir "$(cd "$1" && pwd)"
echo "slurm test cluster in $1 stopped"
