"""A client someone else wrote against peregrine's WebSocket server.

Python's `websockets` library (installed by scripts/test) talks to the
test server in crates/peregrine/tests/websocket.rs: echo of text and
binary, a large message, permessage-deflate (which the library offers by
default), pings, subprotocols, and the close handshake. Exits non-zero on
the first failed check.
"""
import asyncio
import sys

import websockets
from websockets.asyncio.client import connect


async def main(base):
    async with connect(base + "/echo", compression=None) as ws:
        await ws.send("hello")
        assert await ws.recv() == "hello"
        await ws.send(b"\x00\x01\x02")
        assert await ws.recv() == b"\x00\x01\x02"
        big = "x" * (1 << 20)
        await ws.send(big)
        assert await ws.recv() == big
        # Fragmented by the library from an iterable.
        await ws.send(["frag", "men", "ted"])
        assert await ws.recv() == "fragmented"
        latency = await (await ws.ping(b"p"))
        assert latency >= 0
    assert ws.close_code == 1000, ws.close_code

    async with connect(base + "/deflate") as ws:
        extensions = [e.name for e in ws.protocol.extensions]
        assert extensions == ["permessage-deflate"], extensions
        for text in ["compressed " * 100, "short", "compressed " * 100]:
            await ws.send(text)
            assert await ws.recv() == text

    async with connect(
        base + "/private?token=s3cret",
        subprotocols=["v1.chat", "v2.chat"],
        origin="https://app.example",
    ) as ws:
        assert ws.subprotocol == "v2.chat", ws.subprotocol
        assert await ws.recv() == "origin=https://app.example protocol=v2.chat"

    try:
        async with connect(base + "/private"):
            raise AssertionError("upgrade without a token was accepted")
    except websockets.exceptions.InvalidStatus as e:
        assert e.response.status_code == 401, e.response.status_code

    async with connect(base + "/small") as ws:
        await ws.send("y" * 5000)
        try:
            await ws.recv()
            raise AssertionError("a message over the limit was echoed")
        except websockets.exceptions.ConnectionClosedError as e:
            assert e.rcvd.code == 1009, e.rcvd

    print("all checks passed")


asyncio.run(main(sys.argv[1]))
