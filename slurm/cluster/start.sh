#!/usr/bin/env bash
# Starts a real one-node Slurm cluster (munged, slurmctld, slurmd) whose files
# all live in DIR, and waits until `sinfo` shows the node idle. Root only.
#   slurm/cluster/start.sh DIR [--owner PID]
# Then:  . DIR/env.sh   (exports SLURM_CONF)   and sbatch/srun/squeue as usual.
# Stop:  slurm/cluster/stop.sh DIR   (idempotent).
#
# A cluster started with --owner PID counts as orphaned once PID is gone; every
# start first stops orphaned test clusters and any cluster left in DIR, so a
# crashed test never leaves daemons that break the next run. Ports are chosen
# free (from MAMBAMT_SLURM_PORT, default 6817, upwards), so clusters of other
# build trees on the same machine do not collide.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ $# -lt 1 ]; then
  echo "usage: $0 DIR [--owner PID]" >&2
  exit 2
fi
mkdir -p "$1"
dir=$(cd "$1" && pwd)
owner=""
if [ "${2:-}" = "--owner" ]; then owner=${3:?--owner needs a pid}; fi
if [ "$(id -u)" != 0 ]; then
  echo "start.sh: the test cluster runs slurmd as root; run as root" >&2
  exit 1
fi
for tool in munged slurmctld slurmd sinfo; do
  command -v "$tool" >/dev/null || [ -x "/usr/sbin/$tool" ] || {
    echo "start.sh: $tool not found (Debian: apt-get install slurm-wlm munge)" >&2
    exit 1
  }
done
export PATH=$PATH:/usr/sbin

"$here/stop.sh" --orphans
"$here/stop.sh" "$dir" >/dev/null

rm -rf "${dir:?}"/{state,pid,log,spool,tmp,munge,runtime,slurm.conf,env.sh,owner,ports}
mkdir -p "$dir"/{state,pid,log}
chmod 755 "$dir"  # munged (user munge) must reach its socket directory

# Unix socket paths are limited to 108 bytes: keep munge's socket and slurmd's
# spool (step sockets) under a short directory when DIR is deep.
rt=$dir
if [ ${#dir} -gt 60 ]; then
  rt=$(mktemp -d /tmp/mslurm.XXXXXX)
  chmod 755 "$rt"
  echo "$rt" >"$dir/runtime"
fi
mkdir -p "$rt/spool" "$rt/tmp" "$rt/munge"
chown munge:munge "$rt/munge"
chmod 755 "$rt/munge"

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
port=${MAMBAMT_SLURM_PORT:-6817}
while ! port_free "$port" || ! port_free $((port + 1)); do port=$((port + 2)); done
echo "$port $((port + 1))" >"$dir/ports"

"$here/gen_conf.sh" "$dir" "$port" $((port + 1)) "$rt" >"$dir/slurm.conf"
cat >"$dir/env.sh" <<ENV
# Source this to talk to the test cluster in $dir.
export SLURM_CONF=$dir/slurm.conf
ENV
[ -n "$owner" ] && echo "$owner" >"$dir/owner"

# Every daemon carries the marker, so stop.sh finds them (and their job steps) by it.
export MAMBAMT_SLURM_CLUSTER=$dir
export SLURM_CONF=$dir/slurm.conf

runuser -u munge -- /usr/sbin/munged --socket="$rt/munge/munge.socket" \
  --pid-file="$rt/munge/munged.pid" --log-file="$rt/munge/munged.log" --seed-file="$rt/munge/munged.seed"
slurmctld -i
slurmd

fail() {
  echo "start.sh: $1" >&2
  for f in "$dir"/log/*.log "$rt/munge/munged.log"; do
    [ -f "$f" ] && { echo "--- $f" >&2; tail -n 20 "$f" >&2; }
  done
  "$here/stop.sh" "$dir" >&2 || true
  exit 1
}
state=""
for _ in $(seq 1 120); do
  state=$(sinfo -h -o '%T' 2>/dev/null || true)
  [ "$state" = idle ] && break
  sleep 0.5
done
[ "$state" = idle ] || fail "the node did not become idle within 60 s (state: '${state:-no answer}')"
echo "slurm test cluster up in $dir (slurmctld port $port); . $dir/env.sh"
