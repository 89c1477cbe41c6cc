#!/bin/sh
# A SLURM node epilog (slurm.conf `Epilog=`, run as root on each node of a job when it ends): removes the rootful
# podman and docker containers the job left, with the cgroups they left in the job's.
#
# agentrepro makes a job's containers under the job's cgroup (`--cgroup-parent`). SLURM signals only the processes in
# a job step's own cgroup, so a container below it outlives a job killed before agentrepro could stop it (a batch
# script's child on scancel or at the time limit, an OOM kill of agentrepro itself): a framework's container ends on
# its own once the job's process is gone, a command-backend program's runs on. Each container whose cgroup parent
# names this job (`.HostConfig.CgroupParent` containing /job_<SLURM_JOB_ID>/) is removed, then every cgroup left
# under the job's in each hierarchy. Never a failure: a failing epilog drains the node. See docs/containers.md,
# "When a job is killed".
job="job_${SLURM_JOB_ID:-}"
[ "$job" = job_ ] && exit 0
for runtime in podman docker; do
  command -v "$runtime" >/dev/null 2>&1 || continue
  now=""  # the job is over: kill at once (podman's `rm --force` waits 10 s after SIGTERM; docker's kills)
  [ "$runtime" = podman ] && now="--time 0"
  for id in $("$runtime" ps --all --quiet --no-trunc 2>/dev/null); do
    parent=$("$runtime" container inspect --format '{{.HostConfig.CgroupParent}}' "$id" 2>/dev/null) || continue
    case "$parent/" in
      */"$job"/*) "$runtime" rm --force $now "$id" >/dev/null 2>&1 ;;
    esac
  done
done
for folder in /sys/fs/cgroup/*/slurm*/uid_*/"$job" /sys/fs/cgroup/slurm*/uid_*/"$job"; do
  [ -d "$folder" ] && find "$folder" -depth -type d -exec rmdir {} \; 2>/dev/null
done
exit 0
