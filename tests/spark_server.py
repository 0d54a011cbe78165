"""Real Spark servers for the tests and benches, from the pyspark package: a Spark Connect
server (in ``local[2]``, or against a cluster), and a standalone cluster (one master, two
workers). Everything binds to 127.0.0.1 on free ports, logs to its own folder, and is
stopped by the process id it was started with.

``LIGHT_JVM`` trims what the tests' JVMs spend on themselves: the tests move a few hundred
rows, so the JIT's optimising compiler (C2) and a parallel collector only burn the 2 cores
the whole suite shares. The benches keep Java's defaults.

PostgreSQL's and MariaDB's JDBC drivers are Debian's (libpostgresql-jdbc-java,
libmariadb-java; ``.ci/run`` installs them).
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass

JARS = ["/usr/share/java/postgresql.jar", "/usr/share/java/mariadb-java-client.jar"]
START_TIMEOUT_S = 180
# C1 only (no C2 compiling hot code for a run of seconds), one collector thread. Measured
# on 2026-11-27 (load average ~16 on 2 cores, CPU of every JVM read from /proc): the
# cluster and its Connect server took 32 s of CPU to start and run one test with these
# options, 62 s with Java's defaults.
LIGHT_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:CICompilerCount=1"


def missing() -> str | None:
    """Why Spark cannot run here (None: it can)."""
    if shutil.which("java") is None:
        return "no Java on this machine"
    try:
        import pyspark  # noqa: F401
    except ImportError:
        return "pyspark is not installed (pip install -e .[test])"
    absent = [jar for jar in JARS if not os.path.exists(jar)]
    if absent:
        return f"JDBC drivers missing: {', '.join(absent)}"
    return None


def spark_home() -> str:
    import pyspark

    return os.path.dirname(pyspark.__file__)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class SparkServer:
    remote: str          # sc://127.0.0.1:port
    ui: str              # http://127.0.0.1:port of the Connect server's driver
    log_dir: str         # its logs, and (against a cluster) the cluster's and executors'
    master_ui: str | None = None   # http://127.0.0.1:port of the standalone master

    def logs(self) -> str:
        text = []
        for path in glob.glob(os.path.join(self.log_dir, "**", "*"), recursive=True):
            if os.path.isfile(path):
                with open(path, encoding="utf-8", errors="replace") as f:
                    text.append(f.read())
        return "\n".join(text)


def _env(folder: str, java_options: str | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.update(SPARK_HOME=spark_home(), SPARK_LOCAL_IP="127.0.0.1",
               SPARK_LOG_DIR=os.path.join(folder, "logs"),
               SPARK_PID_DIR=os.path.join(folder, "pid"),
               SPARK_CONF_DIR=os.path.join(folder, "conf"),
               SPARK_NO_DAEMONIZE="1")
    if java_options:  # the master's and workers' own JVMs
        env["SPARK_DAEMON_JAVA_OPTS"] = java_options
    for key in ("SPARK_LOG_DIR", "SPARK_PID_DIR", "SPARK_CONF_DIR"):
        os.makedirs(env[key], exist_ok=True)
    return env


def _spawn(args: list[str], env: dict[str, str], log: str) -> subprocess.Popen:
    with open(log, "ab") as out:
        # A process group of its own: stopping it stops the JVM and nothing else.
        return subprocess.Popen(args, env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)


def _stop(*processes: subprocess.Popen) -> None:
    """Stop the processes, all asked at once (each JVM's shutdown takes seconds)."""
    for process in processes:
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
    for process in processes:
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)


def _wait_for_port(port: int, process: subprocess.Popen, log: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            with open(log, encoding="utf-8", errors="replace") as f:
                raise RuntimeError(f"a Spark process ended at start:\n{f.read()[-3000:]}")
        with socket.socket() as sock:
            sock.settimeout(0.5)
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise RuntimeError(f"Spark did not listen on port {port} within {START_TIMEOUT_S} s")


def _wait_for_executors(ui: str, count: int) -> None:
    """Until ``count`` executors have joined the driver whose UI is ``ui``."""
    import requests

    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        with contextlib.suppress(requests.RequestException, ValueError, IndexError):
            app = requests.get(f"{ui}/api/v1/applications", timeout=10).json()[0]["id"]
            executors = requests.get(f"{ui}/api/v1/applications/{app}/executors",
                                     timeout=10).json()
            if sum(1 for e in executors if e["id"] != "driver") >= count:
                return
        time.sleep(0.5)
    raise RuntimeError(f"{count} executors did not join within {START_TIMEOUT_S} s")


def _warm_up(remote: str) -> None:
    """One small job with a shuffle, so that the first statement of a test does not pay
    for the server's first class loading and compilation (many seconds on a busy machine)."""
    from app.federation.spark import _connect_client

    session_class, _ = _connect_client()
    session = session_class.builder.remote(remote).create()
    try:
        session.sql("SELECT id % 3 AS k, count(*) FROM range(1000) GROUP BY 1").collect()
    finally:
        session.stop()


@contextlib.contextmanager
def connect_server(folder: str, master: str = "local[2]", *, executors: int = 0,
                   java_options: str | None = None, shuffle_partitions: int = 4
                   ) -> Iterator[SparkServer]:
    """A Spark Connect server with the JDBC drivers, its driver bound to 127.0.0.1; against
    a cluster (``master``), it is ready once ``executors`` executors have joined."""
    env = _env(folder)
    port, ui = free_port(), free_port()
    log = os.path.join(env["SPARK_LOG_DIR"], "connect-server.out")
    args = [os.path.join(spark_home(), "bin", "spark-submit"),
            "--class", "org.apache.spark.sql.connect.service.SparkConnectServer",
            "--name", "quarry-test-connect", "--master", master, "--jars", ",".join(JARS),
            "--driver-memory", "768m",
            "--conf", "spark.driver.host=127.0.0.1",
            "--conf", "spark.driver.bindAddress=127.0.0.1",
            "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
            "--conf", f"spark.connect.grpc.binding.port={port}",
            "--conf", f"spark.ui.port={ui}",
            "--conf", "spark.ui.showConsoleProgress=false",
            # No statement may read a path: Quarry only sends views of its legs.
            "--conf", "spark.sql.runSQLOnFiles=false",
            "--conf", f"spark.sql.shuffle.partitions={shuffle_partitions}",
            "--conf", "spark.executor.memory=512m",
            "--conf", "spark.cores.max=2"]
    if java_options:
        args += ["--driver-java-options", java_options,
                 "--conf", f"spark.executor.extraJavaOptions={java_options}"]
    process = _spawn(args + ["spark-internal"], env, log)
    try:
        _wait_for_port(port, process, log)
        if executors:
            _wait_for_executors(f"http://127.0.0.1:{ui}", executors)
        _warm_up(f"sc://127.0.0.1:{port}")
        yield SparkServer(f"sc://127.0.0.1:{port}", f"http://127.0.0.1:{ui}",
                          env["SPARK_LOG_DIR"])
    finally:
        _stop(process)


@contextlib.contextmanager
def standalone_cluster(folder: str, workers: int = 2, *, java_options: str | None = None
                       ) -> Iterator[tuple[str, str]]:
    """A standalone master and ``workers`` workers (one core, 768 MiB each): the master's
    spark:// URL and the http:// URL of its UI. The workers keep their executors' logs
    under ``folder``."""
    env = _env(folder, java_options)
    env["SPARK_DAEMON_MEMORY"] = "256m"  # the master's and workers' own JVMs
    port, ui = free_port(), free_port()
    spark_class = os.path.join(spark_home(), "bin", "spark-class")
    processes = []
    try:
        log = os.path.join(env["SPARK_LOG_DIR"], "master.out")
        processes.append(_spawn([spark_class, "org.apache.spark.deploy.master.Master",
                                 "--host", "127.0.0.1", "--port", str(port),
                                 "--webui-port", str(ui)], env, log))
        _wait_for_port(port, processes[0], log)
        master = f"spark://127.0.0.1:{port}"
        for number in range(workers):
            worker_ui = free_port()
            log = os.path.join(env["SPARK_LOG_DIR"], f"worker-{number}.out")
            processes.append(_spawn([spark_class, "org.apache.spark.deploy.worker.Worker",
                                     "--host", "127.0.0.1", "--cores", "1",
                                     "--memory", "768m", "--webui-port", str(worker_ui),
                                     "--work-dir", os.path.join(folder, f"work-{number}"),
                                     master], env, log))
        yield master, f"http://127.0.0.1:{ui}"
    finally:
        _stop(*processes)


@contextlib.contextmanager
def cluster_server(folder: str, workers: int = 2, *, java_options: str | None = None,
                   shuffle_partitions: int = 4) -> Iterator[SparkServer]:
    """A standalone cluster of ``workers`` workers and a Connect server against it, ready
    once an executor runs on each worker. Its ``logs()`` are every JVM's: the Connect
    server's, the master's, the workers' and the executors'."""
    with standalone_cluster(folder, workers, java_options=java_options) as (master, ui), \
            connect_server(os.path.join(folder, "connect"), master, executors=workers,
                           java_options=java_options,
                           shuffle_partitions=shuffle_partitions) as server:
        yield SparkServer(server.remote, server.ui, folder, master_ui=ui)
