#!/usr/bin/env bash
# A single-node SLURM cluster on this machine, from Debian's packages, for trying (and
# testing) the `slurm` profile without a real cluster:
#   tools/slurm-local.sh start     # munged, slurmctld, slurmd; waits until the node is idle
#   tools/slurm-local.sh status
#   tools/slurm-local.sh jobs      # id|name|state|oversubscribe|cpus of every job squeue still shows
#   tools/slurm-local.sh stop      # stops all three by PID, removes the config link and state
# Needs root. State (config, logs, spool, PID files) lives in $SLURM_LOCAL_DIR
# (default /tmp/tcpeval-slurm-local).
#
# What this machine taught us (Debian 12, Slurm 22.05, executor plugin 2.8):
# - no systemd: the daemons are started by hand and stopped by PID;
# - the plugin's job step clears every SLURM_* variable, SLURM_CONF included, so the
#   config must be found at /etc/slurm/slurm.conf: we link ours there (and refuse to
#   replace a real one);
# - without accounting (no slurmdbd) the plugin must ask squeue for job states, which
#   only sees a finished job for MinJobAge seconds: MinJobAge=300 here, and the profile
#   passes `slurm-status-command: squeue` (else a failed job goes unnoticed and
#   Snakemake waits forever);
# - account guessing fails without accounting: the profile names the account.
set -euo pipefail

STATE=${SLURM_LOCAL_DIR:-/tmp/tcpeval-slurm-local}
CONF_LINK=/etc/slurm/slurm.conf
PACKAGES=(munge slurmctld slurmd slurm-client)
# shellcheck source=tools/own-packages.sh
source "$(dirname "$0")/own-packages.sh"

die() { echo "slurm-local: $*" >&2; exit 1; }

pid_alive() { [[ -f "$1" ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

write_config() {
  local host cpus mem_mb
  host=$(hostname -s)
  cpus=$(nproc)
  mem_mb=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 * 9 / 10 ))
  mkdir -p "$STATE/ctld" "$STATE/spool" "$STATE/jobs"
  printf '%s\n' > "$STATE/slurm.conf" \
    "# written by tools/slurm-local.sh: one node, no accounting, no cgroups" \
    "ClusterName=tcpeval-local" \
    "SlurmctldHost=$host" \
    "SlurmUser=root" \
    "SlurmdUser=root" \
    "AuthType=auth/munge" \
    "CredType=cred/munge" \
    "StateSaveLocation=$STATE/ctld" \
    "SlurmdSpoolDir=$STATE/spool" \
    "SlurmctldPidFile=$STATE/slurmctld.pid" \
    "SlurmdPidFile=$STATE/slurmd.pid" \
    "SlurmctldLogFile=$STATE/slurmctld.log" \
    "SlurmdLogFile=$STATE/slurmd.log" \
    "ProctrackType=proctrack/linuxproc" \
    "TaskPlugin=task/none" \
    "MpiDefault=none" \
    "SchedulerType=sched/backfill" \
    "SelectType=select/cons_tres" \
    "SelectTypeParameters=CR_Core_Memory" \
    "ReturnToService=2" \
    "MinJobAge=300" \
    "JobCompType=jobcomp/none" \
    "AccountingStorageType=accounting_storage/none" \
    "JobAcctGatherType=jobacct_gather/none" \
    "NodeName=$host CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN" \
    "PartitionName=tcpeval Nodes=$host Default=YES MaxTime=INFINITE State=UP"
}

link_config() {
  if [[ -e "$CONF_LINK" || -L "$CONF_LINK" ]]; then
    [[ "$(readlink -f "$CONF_LINK")" == "$STATE/slurm.conf" ]] && return 0
    die "$CONF_LINK exists and is not ours; refusing to replace a real cluster's config"
  fi
  mkdir -p "$(dirname "$CONF_LINK")"
  ln -s "$STATE/slurm.conf" "$CONF_LINK"
}

start() {
  [[ $(id -u) -eq 0 ]] || die "needs root (daemons, /etc/slurm/slurm.conf)"
  install_own_packages
  write_config
  link_config
  if ! pid_alive "$STATE/munged.pid"; then
    # munged runs as its own user with Debian's paths (it refuses files it does not own:
    # log /var/log/munge/munged.log, PID /run/munge/munged.pid); keep a copy of the PID
    install -d -o munge -g munge -m 0755 /run/munge
    rm -f /run/munge/munged.pid
    runuser -u munge -- /usr/sbin/munged 2>"$STATE/munged.err" || die "munged did not start ($STATE/munged.err, /var/log/munge/munged.log)"
    for _ in $(seq 50); do [[ -s /run/munge/munged.pid ]] && break; sleep 0.1; done
    cp /run/munge/munged.pid "$STATE/munged.pid"
  fi
  pid_alive "$STATE/slurmctld.pid" || slurmctld -f "$STATE/slurm.conf" || die "slurmctld did not start ($STATE/slurmctld.log)"
  pid_alive "$STATE/slurmd.pid" || slurmd -f "$STATE/slurm.conf" || die "slurmd did not start ($STATE/slurmd.log)"
  for _ in $(seq 60); do
    if sinfo -h -o "%t" 2>/dev/null | grep -qx "idle"; then
      echo "slurm-local: node $(hostname -s) idle in partition tcpeval (state in $STATE)"
      return 0
    fi
    sleep 1
  done
  die "the node did not become idle in 60 s; see $STATE/*.log"
}

# PIDs of processes named $1 (from /proc: no procps needed)
pids_named() {
  local comm d
  for comm in /proc/[0-9]*/comm; do
    [[ "$(cat "$comm" 2>/dev/null)" == "$1" ]] && { d=${comm%/comm}; echo "${d#/proc/}"; }
  done
  return 0
}

stop() {
  local name pid jobs_left
  # cancel every job first: a job's step daemon (slurmstepd) and what it runs outlive slurmd
  if pid_alive "$STATE/slurmctld.pid"; then
    jobs_left=$(squeue -h -o %i 2>/dev/null || true)
    if [[ -n "$jobs_left" ]]; then
      # shellcheck disable=SC2086
      scancel $jobs_left 2>/dev/null || true
      for _ in $(seq 60); do
        [[ -z "$(squeue -h -t PENDING,RUNNING,COMPLETING -o %i 2>/dev/null)" ]] && break
        sleep 1
      done
    fi
  fi
  for pid in $(pids_named slurmstepd); do kill "$pid" 2>/dev/null || true; done
  for name in slurmd slurmctld munged; do
    if pid_alive "$STATE/$name.pid"; then
      pid=$(cat "$STATE/$name.pid")
      kill "$pid"
      for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
    fi
  done
  if [[ -L "$CONF_LINK" && "$(readlink -f "$CONF_LINK")" == "$STATE/slurm.conf" ]]; then
    rm -f "$CONF_LINK"
  fi
  for pid in $(pids_named slurmstepd); do kill -9 "$pid" 2>/dev/null || true; done
  rm -rf "$STATE"
  echo "slurm-local: stopped"
}

status() {
  local name
  for name in munged slurmctld slurmd; do
    if pid_alive "$STATE/$name.pid"; then echo "$name: running (pid $(cat "$STATE/$name.pid"))"
    else echo "$name: not running"; fi
  done
  sinfo 2>/dev/null || true
}

jobs() { squeue --states=all -h -o '%i|%j|%T|%h|%C'; }

case "${1:-}" in
  start) start ;;
  jobs) jobs ;;
  stop) stop ;;
  status) status ;;
  *) die "usage: $0 start|stop|status|jobs" ;;
esac
