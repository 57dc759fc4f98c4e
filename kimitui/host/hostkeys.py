"""Which SSH host keys kimitui trusts, and what it tells the operator when it does not.

Trusted: the configured known_hosts files (default ``~/.ssh/known_hosts`` and
``/etc/ssh/ssh_known_hosts``) plus kimitui's own file of keys trusted on first
use.  A key that is unknown is refused with the exact command that trusts it;
a key that CHANGED is refused even with trust-on-first-use on.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import platformdirs

from kimitui.host.quiet_asyncssh import asyncssh

DEFAULT_PORT = 22
USER_KNOWN_HOSTS = "~/.ssh/known_hosts"
GLOBAL_KNOWN_HOSTS = "/etc/ssh/ssh_known_hosts"


def default_tofu_known_hosts() -> Path:
    """kimitui's own known_hosts, where trust-on-first-use records keys."""
    return Path(platformdirs.user_data_dir("kimitui")) / "known_hosts"


class HostKeyPolicy:
    """Decides about a host key that known_hosts does not already trust."""

    def __init__(
        self,
        name: str,
        files: Sequence[Path],
        *,
        trust_on_first_use: bool = False,
        tofu_file: Path | None = None,
        on_trusted: Callable[[str], None] | None = None,
    ) -> None:
        self.name = name
        self.files = list(files)
        self.trust_on_first_use = trust_on_first_use
        self.tofu_file = tofu_file or default_tofu_known_hosts()
        self._on_trusted = on_trusted

    def known_hosts(self) -> asyncssh.SSHKnownHosts:
        """Everything trusted now: the configured files plus the TOFU file."""
        files = [str(f) for f in [*self.files, self.tofu_file] if f.is_file()]
        return asyncssh.read_known_hosts(files) if files else asyncssh.import_known_hosts("")

    def judge(self, host: str, addr: str, port: int, key: asyncssh.SSHKey) -> tuple[bool, str | None]:
        """Accept (TOFU) or refuse the key, with the message for a refusal."""
        match_port = port if port and port != DEFAULT_PORT else None
        trusted, cas, *_ = self.known_hosts().match(host, addr, match_port)
        fingerprint = key.get_fingerprint()
        bracketed = f"[{host}]:{port}" if match_port else host
        files = ", ".join(str(f) for f in [*self.files, self.tofu_file])
        if trusted or cas:
            # one line can match both the name and the address: name each fingerprint once
            old = ", ".join(dict.fromkeys(k.get_fingerprint() for k in trusted)) or "a certificate authority"
            return False, (
                f"{self.name}: the host key of {bracketed} has CHANGED: it now offers {fingerprint}, "
                f"known_hosts trusts {old}. Someone may be intercepting the connection, or the host was "
                f"reinstalled. If you know the new key is right, remove the old one with "
                f"`ssh-keygen -R '{bracketed}' -f <file>` (files: {files}) and connect again."
            )
        if self.trust_on_first_use:
            self.record(bracketed, key)
            return True, None
        keyscan = f"ssh-keyscan -p {port} {host}" if match_port else f"ssh-keyscan {host}"
        target = self.files[0] if self.files else self.tofu_file
        return False, (
            f"{self.name}: the host key of {bracketed} ({key.get_algorithm()} {fingerprint}) is not in "
            f"known_hosts ({files}); refusing to connect. If that fingerprint is right, trust it with "
            f"`{keyscan} >> {target}`, or set `trust_on_first_use = true` under "
            f"[hosts.{self.name}] in the kimitui config."
        )

    def record(self, host_pattern: str, key: asyncssh.SSHKey) -> None:
        """Append the key to the TOFU file (verified against from now on)."""
        self.tofu_file.parent.mkdir(parents=True, exist_ok=True)
        line = f"{host_pattern} {key.export_public_key().decode().splitlines()[0].strip()}\n"
        with open(self.tofu_file, "a", encoding="utf-8") as f:
            f.write(line)
        if self._on_trusted is not None:
            self._on_trusted(f"trusted on first use: {host_pattern} {key.get_fingerprint()}")
