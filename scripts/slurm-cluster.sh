#!/usr/bin/env bash
# A real SLURM on this machine, for the workflow test and for trying `snakemake --profile slurm`.
#
#   scripts/slurm-cluster.sh start    # munge, slurmctld, slurmd (Debian's packages); idempotent
#   scripts/slurm-cluster.sh stop     # ends the daemons this script started, by their PID files
#   scripts/slurm-cluster.sh status   # exit 0 when the controller answers and every node is up
#
# Needs root and Debian's munge, slurmctld, slurmd and slurm-client (scripts/system-deps.sh installs them).
# The slurm.conf is generated for this host: cgroups where this machine lets slurmd make them (below), no
# accounting (so the Snakemake profile must use `slurm-status-command: squeue`, see profiles/slurm/README.md),
# the host's CPUs and memory, and one fake GPU a node (GRES gpu:fakegpu:1 with File=/dev/null) so that rules asking
# `gpu=1` can be scheduled on a machine without GPUs. Two partitions over the first node: the default (no time
# limit) and `short` (10 minutes), whose limits the preflight's test reads. Recipe and pitfalls:
# profiles/slurm/README.md.
#
# A second node (SLURM_NODES=2, the default where iproute2 is installed): its slurmd (`slurmd -N <host>-n2`) runs in a
# network namespace of its own (NETNS) joined to this one by a veth pair, so that the two nodes have their own
# addresses (NODE_ADDRS) and port spaces, and partition `pair` holds both: a job of `sbatch --nodes=2` there runs a
# step on each. The second node's namespace has no default route: only the cluster's subnet, as an offline node.
# The second node shares this machine's files, kernel and CPUs (as a cluster's nodes share a file system), but for
# what a real node keeps in its own /tmp and Ray puts at the same path on every node of a job: its
# temp folder, /tmp/ray-<first 10 hex of sha256(job key)> (hooks/agentrepro_ray_head.py's temp_dir, job_key
# "slurm-<job>[.<step>]"). So that slurmd runs in a mount namespace of its own too, where its prolog (PROLOG, run
# before a job's first step on the node) mounts an empty tmpfs at that folder of the job's batch step and first steps,
# and its epilog unmounts them. The other partitions keep to the first node. With one node, everything is on loopback.
#
# A node as a cluster's nodes are set up: a user account whose jobs run as that user (JOB_USER, with subordinate user
# and group IDs for rootless podman, which useradd gives it), and /dev/mqueue mounted where this machine lacks it (a
# node's systemd mounts it; rootless podman's `--ipc host` binds it).
#
# Cgroups, as a cluster's nodes confine their jobs: where the cgroup v1 memory, cpuset and freezer hierarchies under
# /sys/fs/cgroup are writable, slurmd tracks a job's processes in cgroups (proctrack/cgroup) and confines each job to
# its CPUs and its memory (task/cgroup: ConstrainCores, ConstrainRAMSpace; a job over its --mem is killed by the
# kernel, OUT_OF_MEMORY). Devices are not confined (the fake GPUs are /dev/null). Each node's cgroups are its own
# (/sys/fs/cgroup/<controller>/slurm_<node>). Where the hierarchies are not writable (cgroup v2 only, or read-only),
# slurmd tracks processes by their parents (proctrack/linuxproc, task/none), and start says so.
#
# Settings (environment): SLURM_FAKE_GPUS (default 1; 0 for none), SLURM_PARTITION (default debug), SLURM_NODES (1, 2),
# SLURM_CGROUPS (default: where writable; 0 for none).
set -euo pipefail

CONF_DIR=/etc/slurm
PIDS=(/run/slurmd.pid /run/slurmd-second.pid /run/slurmctld.pid)
MUNGE_PID=/run/munge/munged.pid
STARTED_MUNGE=/run/agentrepro-started-munge
FAKE_GPUS=${SLURM_FAKE_GPUS:-1}
PARTITION=${SLURM_PARTITION:-debug}
GPU_TYPE=fakegpu   # the fake GPUs' GRES type, which a job may ask by model (sbatch --gpus=fakegpu:1)
if [ -z "${SLURM_NODES:-}" ]; then
  if command -v ip >/dev/null; then SLURM_NODES=2; else SLURM_NODES=1; fi
fi
NETNS=agentrepro-slurm-n2
JOB_USER=agentrepro-user   # a cluster user's jobs (tests/test_slurm.py: rootless podman as that user)
PROLOG=/etc/slurm/agentrepro-prolog.sh
EPILOG=/etc/slurm/agentrepro-epilog.sh
NODE_ADDRS=(10.231.9.1 10.231.9.2)  # the first node's end of the veth pair, the second node's

alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

cgroups_writable() {  # the cgroup v1 hierarchies task/cgroup and proctrack/cgroup need take a new group
  local controller probe
  [ "${SLURM_CGROUPS:-}" != 0 ] || return 1
  for controller in memory cpuset freezer; do
    probe="/sys/fs/cgroup/$controller/agentrepro-probe-$$"
    { mkdir "$probe" && rmdir "$probe"; } 2>/dev/null || return 1
  done
}

status() {  # the controller answers and every node is idle, mixed or allocated
  scontrol ping 2>/dev/null | grep -q UP || return 1
  local states
  states=$(sinfo -h -N -o '%N %T' 2>/dev/null | sort -u) || return 1
  [ -n "$states" ] && ! echo "$states" | grep -Evq ' (idle|mixed|allocated)$'
}

write_conf() {
  local node cpus mem gres_types node_gres proctrack=proctrack/linuxproc task=task/none confined="no cgroups"
  node=$(hostname -s)
  local second="${node}-n2" addr=127.0.0.1
  [ "$SLURM_NODES" = 2 ] && addr=${NODE_ADDRS[0]}
  cpus=$(nproc)
  # Leave 1 GiB to the host; SLURM refuses a node with less memory than configured.
  mem=$(( $(awk '/MemTotal/ {print int($2 / 1024)}' /proc/meminfo) - 1024 ))
  getent hosts "$node" >/dev/null || echo "127.0.0.1 $node" >> /etc/hosts
  if [ "$FAKE_GPUS" -gt 0 ]; then
    gres_types="GresTypes=gpu"; node_gres="Gres=gpu:${GPU_TYPE}:${FAKE_GPUS}"
    { echo "AutoDetect=off"
      for name in "$node" $([ "$SLURM_NODES" = 2 ] && echo "$second"); do
        for _ in $(seq "$FAKE_GPUS"); do echo "NodeName=$name Name=gpu Type=${GPU_TYPE} File=/dev/null"; done
      done; } > "$CONF_DIR/gres.conf"
  else
    gres_types=""; node_gres=""; rm -f "$CONF_DIR/gres.conf"
  fi
  if cgroups_writable; then
    proctrack=proctrack/cgroup; task=task/cgroup; confined="jobs confined by cgroup v1"
    printf '%s\n' CgroupPlugin=cgroup/v1 CgroupMountpoint=/sys/fs/cgroup ConstrainCores=yes ConstrainRAMSpace=yes \
      ConstrainSwapSpace=no ConstrainDevices=no > "$CONF_DIR/cgroup.conf"
  else
    rm -f "$CONF_DIR/cgroup.conf"
    echo "slurm-cluster: no writable cgroup v1 hierarchies here: jobs are not confined to their CPUs and memory" >&2
  fi
  cat > "$CONF_DIR/slurm.conf" <<EOF
# Generated by agentrepro scripts/slurm-cluster.sh for host $node ($SLURM_NODES node(s), $confined).
ClusterName=agentrepro
SlurmctldHost=${node}(${addr})
SlurmUser=slurm
SlurmdUser=root
AuthType=auth/munge
CryptoType=crypto/munge
MpiDefault=none
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd/%n
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd-%n.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd-%n.log
ReturnToService=2
ProctrackType=${proctrack}
TaskPlugin=${task}
JobAcctGatherType=jobacct_gather/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=1000
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MinJobAge=300
InactiveLimit=0
KillWait=5
${gres_types}
NodeName=${node} NodeAddr=${addr} CPUs=${cpus} Sockets=1 CoresPerSocket=${cpus} ThreadsPerCore=1 RealMemory=${mem} ${node_gres} State=UNKNOWN
PartitionName=${PARTITION} Nodes=${node} Default=YES MaxTime=INFINITE State=UP
PartitionName=short Nodes=${node} MaxTime=10 State=UP
EOF
  if [ "$SLURM_NODES" = 2 ]; then
    write_node_script "$second" "$PROLOG" 'mkdir -p "$folder" && mount -t tmpfs -o mode=1777 tmpfs "$folder"'
    write_node_script "$second" "$EPILOG" 'umount "$folder"; rmdir "$folder"'
    cat >> "$CONF_DIR/slurm.conf" <<EOF
Prolog=${PROLOG}
Epilog=${EPILOG}
NodeName=${second} NodeAddr=${NODE_ADDRS[1]} CPUs=${cpus} Sockets=1 CoresPerSocket=${cpus} ThreadsPerCore=1 RealMemory=${mem} ${node_gres} State=UNKNOWN
PartitionName=pair Nodes=${node},${second} MaxTime=INFINITE State=UP
EOF
  fi
}

# A prolog or epilog FILE of every node: on NODE only, ACTION on each Ray temp folder ($folder) of the job's batch step
# and first steps; never a failure, which would drain the node.
write_node_script() {  # write_node_script NODE FILE ACTION
  cat > "$2" <<EOF
#!/bin/sh
[ "\$SLURMD_NODENAME" = "$1" ] || exit 0
for key in "slurm-\$SLURM_JOB_ID" "slurm-\$SLURM_JOB_ID.0" "slurm-\$SLURM_JOB_ID.1" "slurm-\$SLURM_JOB_ID.2"; do
  folder="/tmp/ray-\$(printf %s "\$key" | sha256sum | cut -c1-10)"
  $3 2>/dev/null
done
exit 0
EOF
  chmod 0755 "$2"
}

# The second node's network: a namespace whose end of a veth pair has NODE_ADDRS[1], this one's NODE_ADDRS[0].
netns_up() {
  ip netns list | grep -qw "$NETNS" && return 0
  ip netns add "$NETNS"
  ip link add arslurm0 type veth peer name arslurm1
  ip link set arslurm1 netns "$NETNS"
  ip addr add "${NODE_ADDRS[0]}/24" dev arslurm0
  ip link set arslurm0 up
  ip -n "$NETNS" addr add "${NODE_ADDRS[1]}/24" dev arslurm1
  ip -n "$NETNS" link set arslurm1 up
  ip -n "$NETNS" link set lo up
}

# slurmd names its PID file after its node (%n); these links are the fixed names `stop` ends them by.
pid_links() {
  ln -sf "/run/slurmd-$(hostname -s).pid" /run/slurmd.pid
  if [ "$SLURM_NODES" = 2 ]; then ln -sf "/run/slurmd-$(hostname -s)-n2.pid" /run/slurmd-second.pid; fi
}

wait_for() {  # wait_for SECONDS COMMAND...: poll until COMMAND succeeds
  local n=$1; shift
  for _ in $(seq "$n"); do "$@" >/dev/null 2>&1 && return 0; sleep 1; done
  return 1
}

start() {
  [ "$(id -u)" = 0 ] || { echo "slurm-cluster: needs root (it writes $CONF_DIR and starts daemons)" >&2; exit 2; }
  for bin in munged slurmctld slurmd sinfo; do
    command -v "$bin" >/dev/null || [ -x "/usr/sbin/$bin" ] || { echo "slurm-cluster: $bin missing: run scripts/system-deps.sh" >&2; exit 2; }
  done
  id "$JOB_USER" >/dev/null 2>&1 || useradd --create-home --shell /bin/bash "$JOB_USER"
  if [ ! -d /dev/mqueue ]; then mkdir /dev/mqueue && mount -t mqueue mqueue /dev/mqueue; fi  # before the second slurmd
  if status; then echo "slurm-cluster: already running"; sinfo; return 0; fi
  mkdir -p /var/spool/slurmctld "/var/spool/slurmd/$(hostname -s)" "/var/spool/slurmd/$(hostname -s)-n2" \
    /var/log/slurm /run/munge "$CONF_DIR"
  chown slurm:slurm /var/spool/slurmctld /var/log/slurm
  chown munge:munge /run/munge; chmod 0755 /run/munge
  write_conf
  if [ "$SLURM_NODES" = 2 ]; then netns_up; fi
  if ! alive "$MUNGE_PID"; then
    su -s /bin/sh munge -c /usr/sbin/munged
    touch "$STARTED_MUNGE"
  fi
  wait_for 10 sh -c 'munge -n | unmunge' || { echo "slurm-cluster: munge does not answer" >&2; exit 1; }
  alive /run/slurmctld.pid || /usr/sbin/slurmctld
  wait_for 30 scontrol ping || { echo "slurm-cluster: slurmctld did not start (see /var/log/slurm/slurmctld.log)" >&2; exit 1; }
  alive /run/slurmd.pid || /usr/sbin/slurmd -N "$(hostname -s)"
  # nsenter, not `ip netns exec`, which remounts /sys and so hides the cgroup file system slurmd reads
  if [ "$SLURM_NODES" = 2 ] && ! alive /run/slurmd-second.pid; then
    nsenter --net="/run/netns/$NETNS" unshare --mount --propagation private /usr/sbin/slurmd -N "$(hostname -s)-n2"
  fi
  pid_links
  if ! wait_for 30 status; then
    scontrol update nodename="$(sinfo -h -N -o %N | sort -u | paste -sd,)" state=resume 2>/dev/null || true
    wait_for 10 status || { echo "slurm-cluster: the node did not come up (see /var/log/slurm/slurmd.log)" >&2; sinfo -R >&2; exit 1; }
  fi
  sinfo
}

stop() {
  local f
  for f in "${PIDS[@]}"; do
    if alive "$f"; then kill "$(cat "$f")"; fi
  done
  for f in "${PIDS[@]}"; do
    for _ in $(seq 20); do alive "$f" || break; sleep 0.5; done
  done
  if [ -e "$STARTED_MUNGE" ] && alive "$MUNGE_PID"; then kill "$(cat "$MUNGE_PID")"; rm -f "$STARTED_MUNGE"; fi
  if ip netns list 2>/dev/null | grep -qw "$NETNS"; then ip netns del "$NETNS"; fi
  echo "slurm-cluster: stopped"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
