"""Prefill/decode (PD) disaggregation, acted out between two simulated servers (docs/pd.md).

A prefill server (``--disaggregation-mode prefill``) listens on its bootstrap port.  A request the router
sends it (with ``bootstrap_host``, ``bootstrap_port``, ``bootstrap_room``) waits in the *bootstrap queue*
until the decode server that got the same room connects, is prefilled (one token), then sits in the
*inflight queue* while its KV goes to the decode server; the prefill server's HTTP response ends when
the transfer has.  The decode server (``--disaggregation-mode decode``) holds the request in its
*prealloc queue* while it reaches the prefill server's bootstrap port, in its *transfer queue* while
the KV arrives, then decodes it (the first token is the prefill server's).

The transfer lasts ``bytes / speed``: the prompt's KV (``KV_BYTES_PER_TOKEN`` x prompt tokens) over
``[sim.tuning] kv_transfer_gb_s`` (30 GB/s, RDMA class) plus ``kv_transfer_base_ms`` (2 ms), in
simulated time.  Faults (either server may carry them; ``fault_rate`` or 0.25 of the transfers):
``slow_transfer`` makes a transfer 10-50x slower, ``transfer_fail`` fails it (the decode server
answers 500, as SGLang's ``Decode transfer failed ...`` abort does).

The bootstrap protocol is the simulator's own (one JSON line each way over TCP), not Mooncake's.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
from dataclasses import dataclass, field

from kimitui.sim.logfmt import PdDecodeCounts, PdPrefillCounts, SimLog
from kimitui.sim.perf_model import KV_BYTES_PER_TOKEN
from kimitui.sim.scheduler import Req, SimClock
from kimitui.sim.settings import ServerSettings

DEFAULT_TRANSFER_GB_S = 30.0
DEFAULT_TRANSFER_BASE_MS = 2.0
DEFAULT_FAULT_SHARE = 0.25
BOOTSTRAP_TIMEOUT_S = 300.0
"""Simulated seconds either side waits for the other (SGLang's bootstrap/waiting timeouts are minutes)."""
CONNECT_TIMEOUT_S = 5.0
"""Real seconds the decode server tries to reach a prefill server's bootstrap port."""


class TransferFailed(Exception):
    """The KV of a request never arrived; the message is what the client is told."""


@dataclass
class TransferResult:
    tokens: int
    latency_ms: float
    speed_gb_s: float


@dataclass
class _Room:
    """One bootstrap room on the prefill server."""

    decode_arrived: asyncio.Event = field(default_factory=asyncio.Event)
    prefilled: asyncio.Future[int] = field(default_factory=lambda: asyncio.get_running_loop().create_future())
    done: asyncio.Future[TransferResult | str] = field(default_factory=lambda: asyncio.get_running_loop().create_future())


@dataclass
class PdStats:
    """Queues and counters for the log lines and /metrics."""

    bootstrap: int = 0
    inflight: int = 0
    prealloc: int = 0
    transfer: int = 0
    prealloc_tokens: int = 0
    failed_total: int = 0
    transfers_total: int = 0
    last_latency_ms: float = 0.0
    last_speed_gb_s: float = 0.0
    observed: list[tuple[float, float]] = field(default_factory=list)
    """(latency ms, speed GB/s) of transfers not yet given to the metrics histograms."""


def transfer_bytes(prompt_tokens: int) -> int:
    return prompt_tokens * KV_BYTES_PER_TOKEN


class PdRole:
    """A server's PD side: the prefill server's bootstrap rooms, or the decode server's receiving queues."""

    def __init__(self, settings: ServerSettings, clock: SimClock, log: SimLog, max_total_tokens: int) -> None:
        self.s = settings
        self.mode = settings.disaggregation_mode
        self.clock = clock
        self.log = log
        self.max_total = max(1, max_total_tokens)
        self.stats = PdStats()
        self.rooms: dict[int, _Room] = {}
        self.rng = random.Random(settings.seed * 7727 + 11)
        self.gb_s = float(settings.tuning.get("kv_transfer_gb_s", DEFAULT_TRANSFER_GB_S))
        self.base_ms = float(settings.tuning.get("kv_transfer_base_ms", DEFAULT_TRANSFER_BASE_MS))
        self._server: asyncio.Server | None = None

    # ------------------------------------------------------------------ counts
    def prefill_counts(self) -> PdPrefillCounts:
        return PdPrefillCounts(bootstrap=self.stats.bootstrap, inflight=self.stats.inflight)

    def decode_counts(self) -> PdDecodeCounts:
        st = self.stats
        return PdDecodeCounts(prealloc_usage=st.prealloc_tokens / self.max_total, prealloc=st.prealloc, transfer=st.transfer)

    def draw_fault(self) -> tuple[float, bool]:
        """(slow-down factor, fail) for one transfer, from this server's ``--fault``."""
        roll, size = self.rng.random(), self.rng.random()
        share = self.s.fault_rate or DEFAULT_FAULT_SHARE
        if self.s.fault == "slow_transfer" and roll < share:
            return 10.0 + 40.0 * size, False
        if self.s.fault == "transfer_fail" and roll < share:
            return 1.0, True
        return 1.0, False

    # ------------------------------------------------------------------ prefill side
    async def start_bootstrap(self, host: str) -> None:
        """Listen on ``--disaggregation-bootstrap-port`` (the prefill server's, as SGLang's bootstrap server)."""
        self._server = await asyncio.start_server(self._on_decode, host, self.s.disaggregation_bootstrap_port)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 1.0)
        for room in self.rooms.values():
            if not room.done.done():
                room.done.set_result("prefill server shutting down")

    def _room(self, room_id: int) -> _Room:
        room = self.rooms.get(room_id)
        if room is None:
            room = self.rooms[room_id] = _Room()
        return room

    async def await_bootstrap(self, room_id: int) -> None:
        """The bootstrap queue: wait for the decode server of this room to connect."""
        room = self._room(room_id)
        self.stats.bootstrap += 1
        try:
            await asyncio.wait_for(room.decode_arrived.wait(), self.clock.real(BOOTSTRAP_TIMEOUT_S))
        except TimeoutError:
            self.rooms.pop(room_id, None)
            raise TransferFailed(f"KVTransferError(bootstrap_room={room_id}): Request timed out waiting for the decode server to bootstrap") from None
        finally:
            self.stats.bootstrap -= 1

    async def after_prefill(self, room_id: int, req: Req) -> None:
        """The inflight queue: the KV is computed; wait until the decode server has it all."""
        room = self._room(room_id)
        if not room.prefilled.done():
            room.prefilled.set_result(req.prompt_tokens)
        self.stats.inflight += 1
        try:
            result = await asyncio.wait_for(asyncio.shield(room.done), self.clock.real(BOOTSTRAP_TIMEOUT_S))
        except TimeoutError:
            result = "transfer timed out"
        finally:
            self.stats.inflight -= 1
            self.rooms.pop(room_id, None)
        if isinstance(result, str):
            msg = f"Prefill transfer failed for request rank=0 req.rid='{req.rid}' req.bootstrap_room={room_id} with exception KVTransferError(bootstrap_room={room_id}): {result}"
            self.log.line(msg, rank=0)
            raise TransferFailed(msg)

    async def _on_decode(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        room_id: int | None = None
        try:
            ask = json.loads(await reader.readline() or b"{}")
            room_id = int(ask["room"])
            room = self._room(room_id)
            room.decode_arrived.set()
            tokens = await asyncio.wait_for(asyncio.shield(room.prefilled), self.clock.real(BOOTSTRAP_TIMEOUT_S))
            outcome = await self._transfer(tokens, float(ask.get("slow", 1.0)), bool(ask.get("fail", False)))
            if not room.done.done():
                room.done.set_result(outcome)
            reply = ({"ok": True, "tokens": outcome.tokens, "latency_ms": outcome.latency_ms, "speed_gb_s": outcome.speed_gb_s}
                     if isinstance(outcome, TransferResult) else {"ok": False, "error": outcome})
            writer.write(json.dumps(reply).encode() + b"\n")
            await writer.drain()
        except (OSError, ValueError, KeyError, TimeoutError, asyncio.IncompleteReadError) as exc:
            if room_id is not None and room_id in self.rooms and not self.rooms[room_id].done.done():
                self.rooms[room_id].done.set_result(f"decode side went away ({type(exc).__name__})")
        finally:
            writer.close()

    async def _transfer(self, tokens: int, slow: float, fail: bool) -> TransferResult | str:
        """Move the KV: its bytes over the link (slower or failing under a fault); observed as SGLang does."""
        my_slow, my_fail = self.draw_fault()
        slow, fail = max(slow, my_slow), fail or my_fail
        nbytes = transfer_bytes(tokens)
        sim_s = (self.base_ms / 1000.0 + nbytes / (self.gb_s * 1024**3)) * slow
        await self.clock.sleep(sim_s * (0.3 if fail else 1.0))
        if fail:
            self.stats.failed_total += 1
            return "Failed to send kv chunk: transfer engine returned -1 (simulated)"
        latency_s = max(1e-6, sim_s)  # simulated seconds, so metrics read the same at any time-scale
        speed = nbytes / 1024**3 / latency_s
        st = self.stats
        st.transfers_total += 1
        st.last_latency_ms, st.last_speed_gb_s = latency_s * 1000.0, speed
        st.observed.append((latency_s * 1000.0, speed))
        return TransferResult(tokens=tokens, latency_ms=latency_s * 1000.0, speed_gb_s=speed)

    # ------------------------------------------------------------------ decode side
    async def receive(self, req: Req, host: str, port: int, room_id: int) -> TransferResult:
        """Prealloc, then transfer queue: pull this request's KV from the prefill server; raises
        :class:`TransferFailed` (counted in ``num_transfer_failed_reqs_total``) when it does not come."""
        st = self.stats
        st.prealloc += 1
        st.prealloc_tokens += req.prompt_tokens
        in_transfer = False
        try:
            try:
                reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), CONNECT_TIMEOUT_S)
            except (OSError, TimeoutError) as exc:
                raise TransferFailed(f"KVTransferError(bootstrap_room={room_id}): Failed to get bootstrap info from "
                                     f"prefill server {host}:{port} ({type(exc).__name__})") from None
            st.prealloc -= 1
            st.transfer += 1
            in_transfer = True
            slow, fail = self.draw_fault()
            try:
                writer.write(json.dumps({"room": room_id, "rid": req.rid, "slow": slow, "fail": fail}).encode() + b"\n")
                await writer.drain()
                line = await asyncio.wait_for(reader.readline(), self.clock.real(2 * BOOTSTRAP_TIMEOUT_S))
            except (OSError, TimeoutError) as exc:
                raise TransferFailed(f"KVTransferError(bootstrap_room={room_id}): {type(exc).__name__} while receiving KV") from None
            finally:
                writer.close()
            reply = json.loads(line or b'{"ok": false, "error": "prefill server closed the connection"}')
            if not reply.get("ok"):
                raise TransferFailed(f"KVTransferError(bootstrap_room={room_id}): {reply.get('error')}")
            return TransferResult(int(reply["tokens"]), float(reply["latency_ms"]), float(reply["speed_gb_s"]))
        except TransferFailed as exc:
            st.failed_total += 1
            self.log.line(f"Decode transfer failed for request rank=0 decode_req.req.rid='{req.rid}' "
                          f"decode_req.req.bootstrap_room={room_id} with exception {exc}", rank=0)
            raise
        finally:
            if in_transfer:
                st.transfer -= 1
            else:
                st.prealloc -= 1
            st.prealloc_tokens -= req.prompt_tokens
