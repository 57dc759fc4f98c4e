"""``kimitui sweep`` without ``--model`` asks ``/v1/models``; when that fails the message says what happened.

Real servers on 127.0.0.1 in a thread (the CLI runs its own event loop): one
that accepts and never answers, one that answers with a canned response, and a
closed port.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from kimitui.loadgen import sweep as bench_sweep
from kimitui.cli import main

pytestmark = pytest.mark.timeout(30)


def _serve(answer: bytes | None) -> Iterator[str]:
    """Accepts connections; sends ``answer`` (None: nothing, ever) after reading the request head."""
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(8)
    held: list[socket.socket] = []

    def loop() -> None:
        while True:
            try:
                conn, _ = lsock.accept()
            except OSError:
                return
            held.append(conn)
            if answer is not None:
                buf = b""
                while b"\r\n\r\n" not in buf and (piece := conn.recv(4096)):
                    buf += piece
                conn.sendall(answer)
                conn.close()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{lsock.getsockname()[1]}"
    finally:
        lsock.shutdown(socket.SHUT_RDWR)  # wakes the accept(): a close alone left the thread blocked in it
        lsock.close()
        thread.join(5)
        for conn in held:
            conn.close()


@pytest.fixture
def silent() -> Iterator[str]:
    yield from _serve(None)


def _sweep(url: str, capsys: pytest.CaptureFixture[str]) -> str:
    rc = main(["sweep", "--url", url, "--levels", "1", "--requests", "1", "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert "Traceback" not in err and err.count("\n") == 1, err
    return err


def test_a_server_that_never_answers_is_named_with_the_timeout(silent: str, capsys, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setattr(bench_sweep, "MODEL_LOOKUP_TIMEOUT_S", 0.5)
    err = _sweep(silent, capsys)
    assert err.strip() == (f"kimitui sweep: cannot ask for the model: {silent}/v1/models: connected, "
                           "but no answer within 0.5 s; pass --model")


def test_a_refused_connection_is_named(capsys) -> None:  # noqa: ANN001
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    err = _sweep(f"http://127.0.0.1:{port}", capsys)
    assert f"127.0.0.1:{port}/v1/models: cannot connect: connection refused; pass --model" in err, err


@pytest.mark.parametrize(("answer", "said"), [
    (b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 13\r\n\r\nwarming up...", "HTTP 503: warming up..."),
    (b'HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n["a","b"]', "the answer lists no model: '[\"a\",\"b\"]'"),
    (b'HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n{"data":"x"}', "the answer lists no model"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", "the answer is not JSON: 'hello'"),
])
def test_an_answer_without_a_model_says_what_came(answer: bytes, said: str, capsys) -> None:  # noqa: ANN001
    for url in _serve(answer):
        err = _sweep(url, capsys)
        assert f"{url}/v1/models: {said}" in err, err
