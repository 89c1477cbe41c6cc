"""A job's Ray cluster over two nodes: the head launcher on one, a worker node (`--join`) on the other, each on a block
of its own node's ports, with real Ray; and the same started as a job does under SLURM, across the two nodes of a
real allocation (backends/ray_nodes.py: the job's nodes, their addresses, the `srun` of the worker node).

The two "nodes" are network namespaces of this machine joined by a veth pair, each with its own address (the local
SLURM's second node is one: scripts/slurm-cluster.sh), and the worker node with its own Ray temp folder (a tmpfs over
that path in a mount namespace of its own) and its own port reservations, as a second host has: what it cannot show
is a real interconnect (bandwidth, NCCL across hosts) and separate kernels. Needs root (namespaces), iproute2 and Ray.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from helpers import require, require_ray

from agentrepro.backends import ray_nodes
from agentrepro.errors import Failure
from agentrepro.hooks import agentrepro_ray_head as ray_head

pytestmark = pytest.mark.slow
SCRIPT = Path(ray_head.__file__)
HEAD_IP, WORKER_IP = "10.231.7.1", "10.231.7.2"

DRIVER = """
import json, sys, time, ray
ray.init()
deadline = time.monotonic() + 180
while sum(n["Alive"] for n in ray.nodes()) < 2:
    assert time.monotonic() < deadline, "the worker node never joined"
    time.sleep(0.5)

@ray.remote(num_cpus=1)
class Where:
    def ports(self):
        import psutil, socket
        listening = {c.laddr.port for c in psutil.Process().net_connections(kind="tcp") if c.status == "LISTEN"}
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:  # a UDP connect looks up a route, sends nothing
            try:
                s.connect(("198.51.100.1", 9))
                routed = True
            except OSError:
                routed = False
        return ray.util.get_node_ip_address(), sorted(listening), routed

actors = [Where.options(resources={f"node:{ip}": 0.01}).remote() for ip in sys.argv[1:]]
placed = ray.get([a.ports.remote() for a in actors], timeout=180)
nodes = {n["NodeManagerAddress"]: [n["NodeManagerPort"], n["ObjectManagerPort"]] for n in ray.nodes() if n["Alive"]}
print("RESULT " + json.dumps({"actors": placed, "nodes": nodes}))
"""


@contextlib.contextmanager
def two_nodes():
    """Two network namespaces joined by a veth pair: (head namespace, worker namespace)."""
    require("ray", os.geteuid() == 0 and shutil.which("ip") is not None, "network namespaces need root and iproute2")
    tag = f"{os.getpid() % 100000}"
    head, worker = f"arh{tag}", f"arw{tag}"
    steps = [
        ["ip", "netns", "add", head],
        ["ip", "netns", "add", worker],
        ["ip", "link", "add", f"vh{tag}", "type", "veth", "peer", "name", f"vw{tag}"],
        ["ip", "link", "set", f"vh{tag}", "netns", head],
        ["ip", "link", "set", f"vw{tag}", "netns", worker],
        ["ip", "-n", head, "addr", "add", f"{HEAD_IP}/24", "dev", f"vh{tag}"],
        ["ip", "-n", worker, "addr", "add", f"{WORKER_IP}/24", "dev", f"vw{tag}"],
    ]
    for ns, dev in ((head, f"vh{tag}"), (worker, f"vw{tag}")):
        steps += [["ip", "-n", ns, "link", "set", "lo", "up"], ["ip", "-n", ns, "link", "set", dev, "up"]]
    try:
        for step in steps:
            subprocess.run(step, check=True, capture_output=True, text=True)
        yield head, worker
    finally:
        for ns in (head, worker):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def _block(stderr: str, what: str) -> range:
    found = re.search(rf"Ray {what} .* on ports (\d+)-(\d+)", stderr)
    assert found, stderr[-3000:]
    return range(int(found[1]), int(found[2]) + 1)


def _own_temp_folder(key: str) -> list[str]:
    """Words that run the rest in a mount namespace with a tmpfs over the Ray temp folder of the job `key`: Ray gives a
    worker node the head's temp folder path, which on another host is a folder of its own."""
    own_temp = 'mkdir -p "$1" && mount -t tmpfs tmpfs "$1" && shift && exec "$@"'
    return ["unshare", "--mount", "sh", "-c", own_temp, "sh", ray_head.temp_dir(key)]


def _each_node_on_its_own_ports(driver_out: str, head_err: str, worker_err: str, head_ip: str, worker_ip: str) -> dict:
    """The driver's actors ran on both nodes, each listening only inside its node's block, as do both raylets; the
    driver's result: `actors` [address, ports, whether that node has a route off the cluster's subnet], `nodes`."""
    result = json.loads(next(x for x in driver_out.splitlines() if x.startswith("RESULT "))[len("RESULT ") :])
    blocks = {head_ip: _block(head_err, "head"), worker_ip: _block(worker_err, "worker node")}
    assert f"at {worker_ip} on ports" in worker_err and f"joining {head_ip}:" in worker_err
    assert {ip for ip, _, _ in result["actors"]} == {head_ip, worker_ip}, result
    for ip, ports, _ in result["actors"]:
        assert ports and all(port in blocks[ip] for port in ports), (ip, ports, blocks[ip])
    assert set(result["nodes"]) == {head_ip, worker_ip}
    for ip, raylet_ports in result["nodes"].items():
        assert all(port in blocks[ip] for port in raylet_ports), (ip, raylet_ports, blocks[ip])
    return result


def test_a_worker_node_joins_the_jobs_head_and_each_node_keeps_to_its_own_ports(tmp_path):
    """The head binds its node's address and writes it for the worker node, which reserves a block of its own node's
    ports and joins from its address on the route to the head; an actor placed on each node listens only inside that
    node's block, as do both raylets."""
    ray, python = require_ray()
    shared = tmp_path  # what both nodes see: the head's address, the driver, the worker node's log
    address = shared / "ray-head.address"
    common = ["--key", "two-nodes", "--ray", ray, "--num-cpus", "1", "--memory-mb", "1000", "--worker-ports", "20"]
    driver = shared / "driver.py"
    driver.write_text(DRIVER)
    worker_err = shared / "worker.err"
    with two_nodes() as (head_ns, worker_ns):
        join = [python, str(SCRIPT), *common, "--join", str(address)]  # its address: the one toward the head
        with open(worker_err, "w") as err:
            worker = subprocess.Popen(
                ["ip", "netns", "exec", worker_ns, *_own_temp_folder("two-nodes"), *join],
                stdout=subprocess.DEVNULL,
                stderr=err,
                env={**os.environ, ray_head.PORTS_ENV: str(shared / "worker-node-ports")},  # its node's own
            )
        try:
            launch = [python, str(SCRIPT), *common, "--node-ip", HEAD_IP, "--address-file", str(address)]
            head = subprocess.run(
                ["ip", "netns", "exec", head_ns, *launch, "--", python, str(driver), HEAD_IP, WORKER_IP],
                capture_output=True,
                text=True,
                timeout=420,
            )
        finally:
            worker.send_signal(signal.SIGTERM)
            worker_code = worker.wait(timeout=120)
    assert head.returncode == 0, head.stderr[-4000:] + worker_err.read_text()[-2000:]
    _each_node_on_its_own_ports(head.stdout, head.stderr, worker_err.read_text(), HEAD_IP, WORKER_IP)
    assert not address.exists(), "the head removes its address when it stops"
    assert worker_code in (0, 143), worker_err.read_text()[-2000:]


BATCH = """
import json, subprocess, sys
from pathlib import Path
from agentrepro.backends import ray_head, ray_nodes
from agentrepro.errors import Failure

python, ray, run_dir = sys.argv[1:]
run_dir = Path(run_dir)
nodes = ray_nodes.allocation()
head_ip, worker_ip = ray_nodes.head_address(nodes), ray_nodes.node_address(nodes.others[0])
options = dict(ray=ray, num_cpus=1, worker_ports=20, memory_mb=1000)
launch = [python, *ray_head.words(run_dir, node_ip=head_ip, **options)[1:]]  # the venv's python for the image's
key = launch[launch.index("--key") + 1]
ports = f"AGENTREPRO_RAY_PORTS_DIR={run_dir / 'worker-node-ports'}"  # the other node's own reservations
join = ["env", ports, python, *ray_head.join_words(run_dir, key, **options)[1:]]
driver = [python, str(run_dir / "driver.py"), head_ip, worker_ip]
failed = None
try:
    with ray_nodes.worker_nodes(
        nodes, join, address=ray_head.address_file(run_dir), cpus=1, log_dir=run_dir / "logs", label="ray-nodes"
    ):
        head = subprocess.run([*launch, *driver], capture_output=True, text=True, timeout=300)
except Failure as exc:
    failed = str(exc)
out = {"nodes": nodes.nodes, "here": nodes.here, "head_ip": head_ip, "worker_ip": worker_ip, "head": head.returncode,
       "stdout": head.stdout, "stderr": head.stderr, "failed": failed, "launch": launch, "join": join}
(run_dir / "result.json").write_text(json.dumps(out))
"""


@pytest.mark.slurm
def test_a_job_of_two_slurm_nodes_runs_its_head_on_the_first_and_a_worker_node_on_the_other(slurm_cluster, tmp_path):
    """Under the local SLURM's two nodes (partition `pair`), a batch job of `--nodes=2` starts its Ray cluster as a job
    over several nodes does (backends/ray_head.py, ray_nodes.py): reads its nodes and their addresses from SLURM, runs
    the head bound to the first node's address on the route to the other, and the worker node there through `srun`
    (`worker_nodes`, which first removes an earlier attempt's head address). The driver's actors run on both nodes,
    each on its node's ports; the worker node's address is the second node's, which only that node's network namespace
    has (and Ray's temp folder its own, as the local SLURM's prolog gives it); once the head has gone the worker node
    stops by itself, so its step ends with exit 0. The second node has no route off the cluster's subnet (a node
    without network): its worker node and actors run there all the same."""
    ray, python = require_ray()
    pair = subprocess.run(["sinfo", "-h", "-p", "pair", "-o", "%D"], capture_output=True, text=True).stdout.strip()
    require("slurm", pair == "2", "the local SLURM has no partition `pair` of two nodes (scripts/slurm-cluster.sh)")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "driver.py").write_text(DRIVER)
    (run_dir / "ray_head.address").write_text("10.231.9.9:1\n")  # an earlier attempt's, whose head is gone
    batch = tmp_path / "batch.py"
    batch.write_text(f"#!{python}\n{BATCH}")
    submit = ["sbatch", "--parsable", "-p", "pair", "--nodes=2", "--cpus-per-task=1", "--mem=3000", "-t", "10"]
    submit += ["-o", str(tmp_path / "batch.out"), str(batch), python, ray, str(run_dir)]
    job = subprocess.run(submit, capture_output=True, text=True, check=True)
    deadline = time.monotonic() + 420
    while subprocess.run(["squeue", "-h", "-j", job.stdout.strip()], capture_output=True, text=True).stdout.strip():
        assert time.monotonic() < deadline, "the two-node job did not end"
        time.sleep(2)
    result_file = run_dir / "result.json"
    assert result_file.exists(), (tmp_path / "batch.out").read_text()[-3000:]
    result = json.loads(result_file.read_text())
    worker_err = (run_dir / "logs" / "ray-nodes.stderr.log").read_text()
    assert result["head"] == 0, result["stderr"][-4000:] + worker_err[-2000:]
    assert len(result["nodes"]) == 2 and result["here"] == result["nodes"][0]
    assert result["head_ip"] != "127.0.0.1" and result["worker_ip"] != result["head_ip"]
    assert result["launch"][result["launch"].index("--node-ip") + 1] == result["head_ip"], result["launch"]
    driver = _each_node_on_its_own_ports(
        result["stdout"], result["stderr"], worker_err, result["head_ip"], result["worker_ip"]
    )
    assert {ip: routed for ip, _, routed in driver["actors"]}[result["worker_ip"]] is False, driver["actors"]
    assert result["failed"] is None and "has stopped; so does this worker node" in worker_err, worker_err[-2000:]
    assert not (run_dir / "ray_head.address").exists()


def test_outside_a_slurm_job_there_is_no_allocation_and_a_node_name_is_checked_before_scontrol_sees_it():
    assert ray_nodes.allocation({"SLURM_JOB_NODELIST": "", "SLURMD_NODENAME": ""}) is None
    with pytest.raises(Failure, match="is not a node name"):
        ray_nodes.node_address("n1;reboot")
    with pytest.raises(Failure, match="needs a job of several nodes"):
        ray_nodes.worker_step(ray_nodes.Allocation(("n1",), "n1"), ["true"], cpus=1)


def test_a_worker_node_without_a_head_address_or_with_garbage_in_it_says_so_in_one_line(tmp_path):
    """Bad input to --join and --node-ip: one line, no Ray started."""
    garbage = tmp_path / "address"
    garbage.write_text("$(reboot):6379\n")
    code = ray_head.join(garbage, key="k", node_ip=WORKER_IP, address_wait_s=0)
    assert code == 1
    with pytest.raises(ray_head.HeadFailed, match="not a Ray head address"):
        ray_head.read_address(garbage, 0)
    with pytest.raises(ray_head.HeadFailed, match=r"no Ray head address in .* after 0 s"):
        ray_head.read_address(tmp_path / "missing", 0)
    bad_ip = subprocess.run(
        ["python3", str(SCRIPT), "--key", "k", "--node-ip", "node1;ls", "--join", str(garbage)],
        capture_output=True,
        text=True,
    )
    assert bad_ip.returncode == 2 and bad_ip.stderr.strip().splitlines() == [
        "agentrepro_ray_head.py: --node-ip 'node1;ls' is not an IPv4 address"
    ]
