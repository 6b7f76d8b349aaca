"""``gnnperf serve``: a resident process that answers ``predict``, ``advise`` and ``rank``
without paying their imports again.

A warm ``gnnperf advise`` spends most of its time before any gnnperf code runs: PyTorch,
PyTorch Geometric and the checkpoint take about 8 s to load on the project's 2-core guests,
and the answer itself about 2 s. A server loads them once. The command line then hands the
command to it over a Unix socket, with its own standard streams (passed as file
descriptors, so output, ``isatty`` and pipes behave as in a local run), working directory
and environment. Each request runs in a child the server forks, which runs the command line
as a local run would and exits: no state carries from one request to the next, and two
requests run at once. The server itself never runs a model, and loads the checkpoint on
one thread, so the child inherits no OpenMP team (one does not survive a fork); the child
then gets the thread count a fresh process would have.

The command line forwards when a server listens at :func:`socket_path` (``GNNPERF_SERVER``,
else ``serve.sock`` in the user's cache); ``GNNPERF_SERVER=off`` never forwards. A server
whose code or preloaded checkpoint changed since it started answers "stale" and stops; the
command then runs locally, as it does when nothing listens.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import signal
import socket
import struct
import sys
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gnnperf.errors import GnnperfError

#: the commands a server answers: quick, read-only predictions; the others (training,
#: measuring, benchmarks) run for minutes and measure or write the dataset
SERVED = ("predict", "advise", "rank")
#: the length of a request's JSON, sent with the standard streams' descriptors
_HEADER = struct.Struct("!Q")
_PACKAGE = Path(__file__).resolve().parent.parent


def socket_path() -> Path | None:
    """Where the server listens: ``GNNPERF_SERVER``, else ``serve.sock`` in the user's cache;
    None when ``GNNPERF_SERVER`` is ``off``."""
    chosen = os.environ.get("GNNPERF_SERVER", "")
    if chosen.lower() == "off":
        return None
    if chosen:
        return Path(chosen)
    from gnnperf.hardware.spec import cache_dir

    return cache_dir() / "serve.sock"


def code_signature(checkpoint_folder: Path | None) -> str:
    """The state of what an answer depends on beyond its request: the package's sources
    and the preloaded checkpoint's folder (size and modification time of each file)."""
    h = hashlib.sha256(str(_PACKAGE).encode())
    files = sorted(_PACKAGE.rglob("*.py"))
    if checkpoint_folder is not None and checkpoint_folder.is_dir():
        files += sorted(p for p in checkpoint_folder.iterdir() if p.is_file())
    for path in files:
        with contextlib.suppress(OSError):
            st = path.stat()
            h.update(f"{path}|{st.st_size}|{st.st_mtime_ns}".encode())
    return h.hexdigest()


def forward(command: str, argv: Sequence[str]) -> int | None:
    """Run ``gnnperf ARGV`` (a ``command`` of :data:`SERVED`) in the server, if one listens:
    its exit code, or None to run it here (no server, a server of other code, or one that
    went stale)."""
    path = socket_path()
    if path is None or not path.exists():
        return None
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(str(path))
    except OSError:  # a socket file left by a server that is gone
        conn.close()
        return None
    with conn:
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        request = json.dumps({"command": command, "argv": list(argv), "cwd": os.getcwd(),
                              "env": dict(os.environ), "package": str(_PACKAGE)}).encode()
        try:
            socket.send_fds(conn, [_HEADER.pack(len(request))], _standard_streams())
            conn.sendall(request)
        except OSError:  # the server went away between connect and send
            return None
        reader = conn.makefile("r", encoding="utf-8")
        child: int | None = None
        try:
            for line in reader:
                reply = json.loads(line)
                if "pid" in reply:
                    child = int(reply["pid"])
                elif "exit" in reply:
                    return int(reply["exit"])
                elif "refused" in reply:
                    print(f"gnnperf: {reply['refused']}; running here", file=sys.stderr)
                    return None
        except KeyboardInterrupt:
            if child is not None:
                with contextlib.suppress(OSError):
                    os.kill(child, signal.SIGINT)
            return 130
    print("gnnperf: error: the server's worker ended without an answer", file=sys.stderr)
    return 2


def _standard_streams() -> list[int]:
    """This process's stdin, stdout and stderr descriptors; the null device for one that
    is closed (the worker needs all three)."""
    fds = []
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            fd = os.open(os.devnull, os.O_RDWR)
        fds.append(fd)
    return fds


def _receive(conn: socket.socket) -> tuple[dict[str, Any], list[int]]:
    header, fds, _, _ = socket.recv_fds(conn, _HEADER.size, 3)
    if len(header) != _HEADER.size or len(fds) != 3:
        for fd in fds:
            os.close(fd)
        raise OSError("not a gnnperf request")
    (size,) = _HEADER.unpack(header)
    body = bytearray()
    while len(body) < size:
        chunk = conn.recv(min(1 << 20, size - len(body)))
        if not chunk:
            raise OSError("the request ended early")
        body += chunk
    return json.loads(body), fds


def _reply(conn: socket.socket, message: dict[str, Any]) -> None:
    conn.sendall((json.dumps(message) + "\n").encode())


def _run_request(request: dict[str, Any], fds: list[int], threads: int) -> int:
    """In the forked child: become the client's process (its streams, directory,
    environment and PyTorch's default thread count) and run its command line here."""
    import torch

    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    sys.stdin = open(0, closefd=False)  # noqa: SIM115  (the client's, kept open by it)
    sys.stdout = open(1, "w", closefd=False, buffering=1 if os.isatty(1) else -1)  # noqa: SIM115
    sys.stderr = open(2, "w", closefd=False, buffering=1)  # noqa: SIM115
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    torch.set_num_threads(threads)
    from gnnperf.cli import main

    try:
        code = main(request["argv"], forward=False)
    except SystemExit as exc:  # argparse's usage errors, --help
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    except BaseException as exc:  # noqa: BLE001  (the client must hear of it)
        print(f"gnnperf: error: the server's worker failed: {exc!r}", file=sys.stderr)
        code = 2
    sys.stdout.flush()
    sys.stderr.flush()
    return code


def _preload(checkpoint: Path | None) -> tuple[Path | None, int]:
    """Import what the served commands import and load the checkpoint, on one thread (an
    OpenMP team started here would not survive the fork): the checkpoint's folder, and the
    thread count PyTorch gives a fresh process, for the workers."""
    import torch

    import gnnperf.prediction.advise  # noqa: F401
    import gnnperf.prediction.api  # noqa: F401
    from gnnperf.estimators.gnn.predictor import load_predictor
    from gnnperf.estimators.types import default_checkpoint

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    path = checkpoint or default_checkpoint()
    if not path.exists():
        return None, threads
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        load_predictor(path)
    with contextlib.suppress(ImportError):
        import xgboost  # noqa: F401  (the kernel model's trees, loaded by the first answer)
    return path.resolve().parent, threads


def _listening(path: Path) -> bool:
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(str(path))
    except OSError:
        return False
    finally:
        probe.close()
    return True


def _reap(children: set[int]) -> None:
    for pid in list(children):
        with contextlib.suppress(ChildProcessError):
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done == 0:
                continue
        children.discard(pid)


def serve(path: Path, checkpoint: Path | None = None, idle_minutes: float = 60.0) -> None:
    """Listen at ``path`` until idle for ``idle_minutes``, a stale request, or SIGTERM."""
    if len(os.fsencode(path)) >= 104:
        raise GnnperfError(f"socket path too long for a Unix socket ({path}): set "
                           "GNNPERF_SERVER to a shorter one")
    if _listening(path):
        raise GnnperfError(f"a server already listens at {path}")
    folder, threads = _preload(checkpoint)
    signature = code_signature(folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    os.chmod(path, 0o600)
    listener.listen(16)
    listener.settimeout(1.0)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(f"gnnperf: serving {', '.join(SERVED)} at {path}", flush=True)
    children: set[int] = set()
    last = time.monotonic()
    try:
        while time.monotonic() - last < idle_minutes * 60 or children:
            _reap(children)
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            last = time.monotonic()
            with conn:
                conn.settimeout(None)
                try:
                    request, fds = _receive(conn)
                except (OSError, ValueError):
                    continue
                if request.get("package") != str(_PACKAGE):
                    _refuse(conn, fds, f"the server at {path} runs {_PACKAGE}")
                    continue
                if code_signature(folder) != signature:
                    _refuse(conn, fds, f"the server at {path} ran older code and stopped")
                    return
                sys.stdout.flush()
                sys.stderr.flush()
                pid = os.fork()
                if pid == 0:
                    listener.close()
                    try:
                        _reply(conn, {"pid": os.getpid()})
                        code = _run_request(request, fds, threads)
                        _reply(conn, {"exit": code})
                    finally:
                        os._exit(0)
                for fd in fds:
                    os.close(fd)
                children.add(pid)
                print(f"gnnperf: answering {request.get('command')} (worker {pid})", flush=True)
    finally:
        listener.close()
        with contextlib.suppress(OSError):
            if path.is_socket():
                path.unlink()


def _refuse(conn: socket.socket, fds: list[int], reason: str) -> None:
    for fd in fds:
        os.close(fd)
    with contextlib.suppress(OSError):
        _reply(conn, {"refused": reason})


def cmd_serve(args: argparse.Namespace) -> int:
    if not sys.platform.startswith("linux"):
        raise GnnperfError("gnnperf serve runs on Linux only (it forks a worker per request)")
    path = args.socket or socket_path()
    if path is None:
        raise GnnperfError("GNNPERF_SERVER is 'off': give --socket PATH to serve anyway")
    serve(path, args.checkpoint, args.idle_minutes)
    return 0


def register_serve(sub: argparse._SubParsersAction) -> None:
    """``gnnperf serve``."""
    p = sub.add_parser("serve", help="stay resident and answer predict, advise and rank "
                                     "without loading PyTorch and the checkpoint each time")
    p.add_argument("--socket", type=Path, default=None, metavar="PATH",
                   help="Unix socket to listen at (default: GNNPERF_SERVER, else serve.sock "
                        "in the cache folder); point GNNPERF_SERVER at it for the clients")
    p.add_argument("--checkpoint", type=Path, default=None,
                   help="checkpoint to preload (default: the shipped one)")
    p.add_argument("--idle-minutes", type=float, default=60.0, metavar="M",
                   help="stop after M minutes without a request")
    p.set_defaults(func=cmd_serve)

