"""The per-job Ray ports: derived from the job's identity, one private block each (the head itself: test_ray_job.py)."""

from __future__ import annotations

from agentrepro.backends import ray_launch


def test_job_key_and_ports_are_stable_and_distinct(tmp_path):
    """The key comes from SLURM_JOB_ID(.STEP) or the run dir; ports are a 100-port block inside 20000-59999."""
    assert ray_launch.job_key(tmp_path, {"SLURM_JOB_ID": "42", "SLURM_STEP_ID": "1"}) == "slurm-42.1"
    a, b = ray_launch.job_key(tmp_path / "a", {}), ray_launch.job_key(tmp_path / "b", {})
    assert a != b and a == ray_launch.job_key(tmp_path / "a", {})
    ports = {ray_launch.ray_ports(f"slurm-{i}").base for i in range(200)}
    assert len(ports) > 150 and all(20000 <= p and p + 99 <= 59999 for p in ports)
    flags = ray_launch.ray_ports("x").flags()
    numbers = [int(f.split("=")[1]) for f in flags]
    assert len(set(numbers)) == len(numbers) and max(numbers) - min(numbers) == 99
    assert not any("client" in f for f in ray_launch.ray_ports("x").flags(client=False))
