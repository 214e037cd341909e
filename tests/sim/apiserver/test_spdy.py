"""The SPDY/3.1 server half that port-forward tunnels, driven with frames as the moby/spdystream client writes
them (header blocks compressed with the SPDY/3 dictionary, one zlib context for the connection)."""

from __future__ import annotations

import struct
import zlib

from controller_manager.sim.apiserver.streaming.spdy import (
    DICTIONARY,
    SpdySession,
    SpdyStream,
    header_block,
    parse_header_block,
)


class Client:
    def __init__(self) -> None:
        self.deflate = zlib.compressobj(9, zlib.DEFLATED, 15, 8, zlib.Z_DEFAULT_STRATEGY, DICTIONARY)
        self.inflate = zlib.decompressobj(zdict=DICTIONARY)
        self.sent: list[bytes] = []
        self.streams: list[SpdyStream] = []

        async def send(frame: bytes) -> None:
            self.sent.append(frame)

        self.session = SpdySession(send, self.streams.append)

    def syn_stream(self, stream_id: int, headers: dict[str, str], fin: bool = False) -> bytes:
        block = self.deflate.compress(header_block(headers)) + self.deflate.flush(zlib.Z_SYNC_FLUSH)
        payload = struct.pack(">IIH", stream_id, 0, 0) + block
        return struct.pack(">HHI", 0x8003, 1, (int(fin) << 24) | len(payload)) + payload

    def frames(self) -> list[tuple[bool, int, int, bytes]]:
        """(control, type or stream id, flags, payload) of what the server sent."""
        out = []
        for frame in self.sent:
            word, flags_length = struct.unpack_from(">II", frame)
            control = bool(word & 0x80000000)
            out.append((control, word & 0xFFFF if control else word, flags_length >> 24, frame[8:]))
        return out


def test_the_dictionary_is_the_spdy3_one() -> None:
    assert len(DICTIONARY) == 1423
    assert zlib.adler32(DICTIONARY) == 0xE3C6A7C2


async def test_streams_are_accepted_and_carry_data_both_ways() -> None:
    c = Client()
    wire = c.syn_stream(1, {"streamtype": "error", "port": "80", "requestid": "0"}) + \
        c.syn_stream(3, {"streamtype": "data", "port": "80", "requestid": "0"})
    await c.session.feed(wire[:11])  # frames may arrive split anywhere
    await c.session.feed(wire[11:])
    assert [s.headers for s in c.streams] == [{"streamtype": "error", "port": "80", "requestid": "0"},
                                              {"streamtype": "data", "port": "80", "requestid": "0"}]
    replies = c.frames()
    assert [(r[0], r[1]) for r in replies] == [(True, 2), (True, 2)]
    for _, _, _, payload in replies:  # the SYN_REPLYs' (empty) header blocks read back with the dictionary
        assert parse_header_block(c.inflate.decompress(payload[4:])) == {}
    data = c.streams[1]
    await c.session.feed(struct.pack(">II", 3, 5) + b"hello" + struct.pack(">II", 3, 1 << 24))
    assert await data.read() == b"hello"
    assert await data.read() == b""
    c.sent.clear()
    await data.write(b"answer")
    await data.close()
    assert c.frames() == [(False, 3, 0, b"answer"), (False, 3, 1, b"")]


async def test_pings_are_echoed_and_resets_end_streams() -> None:
    c = Client()
    await c.session.feed(c.syn_stream(1, {"streamtype": "data"}))
    c.sent.clear()
    await c.session.feed(struct.pack(">HHII", 0x8003, 6, 4, 7))
    assert c.frames() == [(True, 6, 0, struct.pack(">I", 7))]
    await c.session.feed(struct.pack(">HHIII", 0x8003, 3, 8, 1, 5))
    assert await c.streams[0].read() == b""
