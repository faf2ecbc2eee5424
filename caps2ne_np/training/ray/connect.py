"""Ray in this process: importing it, connecting to a cluster or starting a local
instance (an address is checked by a socket probe first, since ``ray.init`` retries
for minutes against a silent port), Ray's log level, and a standard output that
carries only the results while Ray's threads print."""

import contextlib
import logging
import os
import signal
import threading
import time
from pathlib import Path

from ...errors import InputError
from ...kernels import thread_layer


def import_ray():
    """The ``ray`` module, or an InputError saying how to install it."""
    try:
        import ray
    except ImportError:
        raise InputError("--engine ray needs Ray: pip install 'caps2ne_np[ray]'") from None
    return ray


def _package_root():
    """The folder holding this package (put on the actors' PYTHONPATH)."""
    return str(Path(__file__).resolve().parents[3])


CONNECT_TIMEOUT = 20.0
"""Seconds a ``--ray-address`` has to answer the probe (``_probe``)."""
ADDRESS_FORMS = "'auto', 'host:port' (the head's GCS port, 6379 by default) or 'ray://host:10001'"


def ray_logging_level():
    """Ray's own log level in this process: warnings, or errors only when the package
    logs only errors (``-q``)."""
    return max(logging.WARNING, logging.getLogger("caps2ne_np").getEffectiveLevel())


def ray_address_target(address):
    """(host, port) that ``address`` (``--ray-address``) must answer at, or None for
    'auto' and 'local'; InputError for anything but those, 'host:port' and
    'ray://host:port', and for 'ray://' without the Ray Client extra."""
    import importlib.util

    text = str(address).strip()
    if text in ("auto", "local"):
        return None
    client = text.startswith("ray://")
    host, sep, port = text[6:].rpartition(":") if client else text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise InputError(f"--ray-address {address}: expected {ADDRESS_FORMS}")
    if client and importlib.util.find_spec("grpc") is None:
        raise InputError(
            f"--ray-address {address}: a ray:// address needs Ray Client: "
            "pip install 'ray[client]' (or run on the head node with --ray-address auto)"
        )
    return host, int(port)


HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
"""An HTTP/2 client's first bytes (the preface and an empty SETTINGS frame)."""


def _probe(address, host, port, timeout):
    """InputError unless a gRPC server (a Ray GCS or Ray Client server) answers at
    host:port within ``timeout`` seconds: it must accept a TCP connection and answer
    an HTTP/2 preface with a SETTINGS frame.  ``ray.init`` itself retries for minutes
    in native code against a port that accepts and stays silent."""
    import socket

    def fail(why):
        return InputError(
            f"--ray-address {address}: no Ray cluster at {host}:{port} ({why}); start "
            "one (ray start --head) or check the address"
        )

    deadline = time.monotonic() + timeout
    head = b""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(HTTP2_PREFACE)
            while len(head) < 9:
                sock.settimeout(max(deadline - time.monotonic(), 1e-3))
                part = sock.recv(9 - len(head))
                if not part:
                    break
                head += part
    except TimeoutError:
        raise fail(f"no answer within {timeout:g} s") from None
    except OSError as err:
        raise fail(err.strerror or str(err)) from None
    if len(head) < 9 or head[3] != 4:
        raise fail("something answers there, but not a Ray cluster's gRPC")


@contextlib.contextmanager
def _handlers_kept():
    """The SIGTERM handler of this process as it was, after ``ray.init`` (which installs
    its own, ending the driver with exit 15 and a crash dump): the command line's,
    which removes temp files and says 'terminated (SIGTERM)' with exit code 143."""
    main = threading.current_thread() is threading.main_thread()
    before = signal.getsignal(signal.SIGTERM) if main else None
    try:
        yield
    finally:
        if before is not None:
            signal.signal(signal.SIGTERM, before)


def _connect(ray, address, **options):
    """``ray.init(address=...)``; any error of Ray's while connecting is one line."""
    try:
        with _handlers_kept():
            ray.init(address=address, **options)
    except Exception as err:  # noqa: BLE001 -- Ray's many connection errors: one line
        raise InputError(f"--ray-address {address}: could not connect ({one_line(err)})") from None


def actor_spin_env():
    """The OpenMP spin of Ray's actors: ``thread_layer.SHARED_SPIN_COUNT`` (several actors
    share the cores, where a long spin holds a core another actor needs), unless the
    user set ``OMP_WAIT_POLICY`` or ``GOMP_SPINCOUNT``, which the actors inherit."""
    if "OMP_WAIT_POLICY" in os.environ or "GOMP_SPINCOUNT" in os.environ:
        return {}
    return {"GOMP_SPINCOUNT": thread_layer.SHARED_SPIN_COUNT}


def start_ray(address=None, num_cpus=None):
    """Connect to ``address`` or start a local Ray instance sized to this machine;
    returns True when this call started it (the caller then shuts it down).  Actor
    processes get this package's parent folder on PYTHONPATH, so a source checkout
    runs the same code in every process.  An address that is malformed, or where no
    gRPC server answers within ``CONNECT_TIMEOUT`` seconds, is an InputError.  Ray logs at
    ``ray_logging_level``; with errors only (-q) the actors' output is not forwarded."""
    ray = import_ray()
    if ray.is_initialized():
        return False
    path = os.pathsep.join(p for p in (_package_root(), os.environ.get("PYTHONPATH")) if p)
    runtime_env = {"env_vars": {"PYTHONPATH": path, **actor_spin_env()}}
    level = ray_logging_level()
    options = dict(
        runtime_env=runtime_env, logging_level=level, log_to_driver=level <= logging.WARNING
    )
    if address:
        target = ray_address_target(address)
        if target is not None:
            _probe(address, *target, timeout=CONNECT_TIMEOUT)
        _connect(ray, address, **options)
    else:
        try:
            with _handlers_kept():
                cpus = num_cpus or os.cpu_count() or 1
                ray.init(num_cpus=cpus, include_dashboard=False, **options)
        except Exception as err:  # noqa: BLE001 -- a raylet that did not start: one line
            raise InputError(
                f"--engine ray: could not start a local Ray instance ({one_line(err)})"
            ) from None
    return True


class _ResultsOnlyStdout:
    """``sys.stdout`` while Ray runs in this process.  Ray's driver threads print the
    raylet's messages ('N PYTHON worker processes have been started', a killed worker)
    and the actors' output to ``sys.stdout``; here only the main thread's writes (the
    results: ``--out -``) reach standard output.  Other threads' go to stderr, or
    nowhere when ``quiet``."""

    def __init__(self, stdout, quiet):
        self._stdout, self._quiet = stdout, quiet

    def _target(self):
        import sys
        import threading

        if threading.current_thread() is threading.main_thread():
            return self._stdout
        return None if self._quiet else sys.stderr

    def write(self, text):
        target = self._target()
        return len(text) if target is None else target.write(text)

    def flush(self):
        target = self._target()
        if target is not None:
            target.flush()

    def __getattr__(self, name):
        return getattr(self._stdout, name)


def results_only_stdout(quiet):
    """A context in which standard output carries only the main thread's writes
    (``_ResultsOnlyStdout``)."""
    import contextlib
    import sys

    @contextlib.contextmanager
    def swapped():
        real = sys.stdout
        sys.stdout = _ResultsOnlyStdout(real, quiet)
        try:
            yield
        finally:
            sys.stdout = real

    return swapped()


def one_line(err):
    """``err`` as one line of at most 300 characters: its type and first line."""
    import re

    text = re.sub(r"\x1b\[[0-9;]*m", "", str(err)).strip().splitlines()  # Ray colours
    return f"{type(err).__name__}: {text[0] if text else ''}"[:300]
