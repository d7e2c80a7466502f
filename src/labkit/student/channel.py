"""The grading daemon's channel: a local stream socket that admits this user alone.

Where the system has Unix sockets (Linux, macOS), the daemon listens on one in the
user's private runtime folder: nobody else can enter the folder, so nobody else can
connect; the peer's credentials, where the system gives them, are checked as well.
Elsewhere (Windows' Python has no `AF_UNIX`) it listens on loopback TCP, which every
local process can reach. Its port and two random tokens are then written, for this
user's eyes only, to a file in the private folder (the endpoint): a client sends the
first token before anything else, or is dropped unheard; the daemon answers with the
second, so that a client never sends a student's files to whatever process took a dead
daemon's port. `LABKIT_DAEMON_CHANNEL=tcp` chooses TCP where Unix sockets exist too
(so that Windows' channel is tested on Linux). An endpoint's name says its kind.

Messages are framed as `labkit.sandbox.protocol` frames them, and sent and read with
the socket's own calls: on Windows a socket is no file descriptor.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import os
import secrets
import socket
import struct
import time
from pathlib import Path
from typing import Any

from labkit import platform, settings
from labkit.sandbox import protocol

UNIX, TCP = "unix", "tcp"
SUFFIXES = {UNIX: ".sock", TCP: ".port"}
_SUN_PATH_MAX = 107  # bytes of a Unix socket path (Linux)
_TOKEN_CHARS = 64  # each token: 32 random bytes, in hex
# The length that begins every message, as `protocol.pack` writes it (8 bytes, big-endian).
_LENGTH = struct.Struct(">Q")


def kind() -> str:
    """The channel this system gives: Unix sockets where they exist, unless
    `LABKIT_DAEMON_CHANNEL` is `tcp`; else loopback TCP."""
    forced = settings.get(settings.DAEMON_CHANNEL).strip().lower()
    return UNIX if platform.has_unix_sockets() and forced != TCP else TCP


def endpoint(root: Path, name: str) -> Path | None:
    """Where a daemon called `name` listens, in the private folder `root` (None if the
    system cannot have it there: a Unix socket's path is short)."""
    channel = kind()
    path = root / f"{name}{SUFFIXES[channel]}"
    if channel == UNIX and len(os.fsencode(path)) > _SUN_PATH_MAX:
        return None
    return path


def endpoints(root: Path) -> list[Path]:
    """The endpoints in `root`, of either kind (a daemon may outlive a setting)."""
    return sorted(p for suffix in SUFFIXES.values() for p in root.glob(f"*{suffix}"))


def _kind_of(path: Path) -> str:
    return TCP if path.suffix == SUFFIXES[TCP] else UNIX


# --- the daemon's end ---------------------------------------------------------------------


class Listener:
    """A daemon's listening socket at `path`, which `close` removes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._tokens: tuple[bytes, bytes] | None = None
        if _kind_of(path) == UNIX:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()  # a dead daemon's socket (the caller holds the lock)
            self.sock = platform.unix_socket()
            try:
                self.sock.bind(os.fsencode(path))
                os.chmod(path, 0o600)
                self.sock.listen(16)
            except OSError:
                self.sock.close()
                raise
            return
        self.sock = platform.loopback_listener()
        secret, proof = secrets.token_hex(32), secrets.token_hex(32)
        self._tokens = (secret.encode(), proof.encode())
        entry = {"port": self.sock.getsockname()[1], "secret": secret, "proof": proof,
                 "pid": os.getpid()}
        try:
            _write_private(path, json.dumps(entry))
        except OSError:
            self.sock.close()
            raise

    def accept(self, timeout: float, admit_s: float) -> socket.socket | None:
        """The next client, within `timeout` s (else `TimeoutError`), once admitted;
        None for one that is not (it is dropped). A client has `admit_s` s to show its
        token."""
        self.sock.settimeout(timeout)
        conn, _ = self.sock.accept()
        try:
            if self._admits(conn, time.monotonic() + admit_s):
                return conn
        except (OSError, protocol.ChannelClosed, protocol.ChannelTimeout):
            pass
        conn.close()
        return None

    def _admits(self, conn: socket.socket, deadline: float) -> bool:
        if self._tokens is None:  # the folder admits; the kernel's word, where it gives it
            creds = platform.peer_credentials(conn)
            return creds is None or creds[1] == platform.user_id()
        secret, proof = self._tokens
        if not hmac.compare_digest(_exactly(conn, len(secret), deadline), secret):
            return False
        _settimeout(conn, deadline)
        conn.sendall(proof)
        return True

    def close(self) -> None:
        self.sock.close()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


def _write_private(path: Path, text: str) -> None:
    """Write `path` for this user alone, whole or not at all (a reader never sees half)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


# --- the client's end ---------------------------------------------------------------------


def connect(path: Path, connect_s: float, deadline: float,
            peer: list[int] | None = None) -> socket.socket:
    """A socket to the daemon at `path`, connected within `connect_s` s and admitted by
    `deadline` (`OSError`, or the protocol's errors, if not).

    `peer` gets the pid of the process listening there, if it is this user's daemon,
    as soon as the connection is made: a daemon busy with another client has not
    admitted this one yet, and still it is known.
    """
    unix = _kind_of(path) == UNIX
    if unix:
        sock = platform.unix_socket()
        address: Any = os.fsencode(path)
    else:
        port, secret, proof, pid = _read_endpoint(path)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        address = ("127.0.0.1", port)
    try:
        sock.settimeout(connect_s)
        sock.connect(address)
        if unix:
            creds = platform.peer_credentials(sock)
            if peer is not None and creds is not None and creds[1] == platform.user_id():
                peer.append(creds[0])
            return sock
        if peer is not None and _is_daemon(pid, path):
            peer.append(pid)
        _settimeout(sock, deadline)
        sock.sendall(secret.encode())
        if not hmac.compare_digest(_exactly(sock, len(proof), deadline), proof.encode()):
            raise ConnectionRefusedError(f"{path}: not the daemon that wrote it")
    except BaseException:
        sock.close()
        raise
    return sock


def _read_endpoint(path: Path) -> tuple[int, str, str, int]:
    """The port, tokens and pid a TCP endpoint holds (`OSError` for anything else)."""
    try:
        entry = json.loads(path.read_text(encoding="utf-8"))
        return int(entry["port"]), str(entry["secret"]), str(entry["proof"]), int(entry["pid"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ConnectionRefusedError(f"{path}: not an endpoint ({exc!r})") from None


def _is_daemon(pid: int, path: Path) -> bool:
    """Whether process `pid` is this user's daemon for `path` (an endpoint names the
    daemon that wrote it, which may be gone, its pid taken by another process)."""
    import psutil

    try:
        return str(path) in psutil.Process(pid).cmdline()
    except (psutil.Error, OSError):
        return False


# --- messages -----------------------------------------------------------------------------


def send(sock: socket.socket, header: dict[str, Any], blobs: list[bytes] | None,
         deadline: float) -> None:
    """Send one message, all of it by `deadline` (`OSError` or `ChannelTimeout` if not)."""
    _settimeout(sock, deadline)
    sock.sendall(protocol.pack(header, blobs or []))


def receive(sock: socket.socket, limit: int, deadline: float) -> protocol.Message:
    """The next message, of at most `limit` bytes (checked before the rest is read),
    complete by `deadline`."""
    head = _exactly(sock, _LENGTH.size, deadline)
    (size,) = _LENGTH.unpack(head)
    if size > limit:
        raise protocol.ProtocolError(f"message of {size} bytes is over the limit")
    return protocol.parse(head + _exactly(sock, size, deadline), limit)


def _exactly(sock: socket.socket, size: int, deadline: float) -> bytes:
    data = bytearray(size)
    view, got = memoryview(data), 0
    while got < size:
        _settimeout(sock, deadline)
        count = sock.recv_into(view[got:])
        if not count:
            raise protocol.ChannelClosed()
        got += count
    return bytes(data)


def _settimeout(sock: socket.socket, deadline: float) -> None:
    left = deadline - time.monotonic()
    if left <= 0:
        raise protocol.ChannelTimeout()
    sock.settimeout(left)
