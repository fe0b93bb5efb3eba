"""The on-disk log cap: rotation past the cap, the writer going on in append mode, reads across the parts."""

from __future__ import annotations

from pathlib import Path

from pai.nodeagent import logcap


def test_a_file_within_the_cap_is_left_alone(tmp_path: Path) -> None:
    log = tmp_path / "stdout.log"
    log.write_bytes(b"x" * 100)
    assert logcap.cap([log, tmp_path / "absent.log"], 100).rotated == []
    assert log.read_bytes() == b"x" * 100 and not logcap.previous(log).exists()


def test_rotation_keeps_the_chunk_before_and_counts_what_is_dropped(tmp_path: Path) -> None:
    log = tmp_path / "stdout.log"
    with open(log, "ab", buffering=0) as writer:  # as a task writes: append mode, one descriptor throughout
        writer.write(b"a" * 50 + b"A" * 100)
        assert logcap.cap([log], 100).rotated == [log]
        writer.write(b"B" * 120)  # goes on at the new end of the truncated file
        # the newest 100 bytes are kept as the chunk before; the 50 before them are dropped
        assert (log.read_bytes(), logcap.previous(log).read_bytes(), logcap.dropped(log)) == (
            b"B" * 120, b"A" * 100, 50)
        assert logcap.cap([log], 100).dropped == 100 + 20
        writer.write(b"C" * 10)
    assert (log.read_bytes(), logcap.previous(log).read_bytes()) == (b"C" * 10, b"B" * 100)
    assert logcap.dropped(log) == 50 + 100 + 20  # the a's, the A chunk, the first B's
    assert logcap.size(log) == 110


def test_a_tail_spans_the_previous_chunk_and_the_current_file(tmp_path: Path) -> None:
    log = tmp_path / "stdout.log"
    logcap.previous(log).write_bytes(b"0123456789")
    log.write_bytes(b"abc")
    assert logcap.tail(log, 5) == b"89abc"
    assert logcap.tail(log, 2) == b"bc"
    assert logcap.tail(log, 100) == b"0123456789abc"
    assert logcap.tail(tmp_path / "none.log", 10) == b""


def test_a_follower_reads_by_offset_in_what_was_written_across_rotations(tmp_path: Path) -> None:
    log = tmp_path / "stdout.log"
    got = b""
    with open(log, "ab", buffering=0) as writer:
        writer.write(b"0123456789" * 5)
        first = logcap.read_from(log, 0, limit=30)
        assert (first.data, first.start, first.end) == (b"0123456789" * 3, 0, 50)
        got += first.data
        assert logcap.cap([log], 40).rotated == [log]  # the first 10 bytes dropped, the next 40 the chunk before
        writer.write(b"abc")
        assert logcap.written(log) == 53
        rest = logcap.read_from(log, first.next)  # from the chunk before into the current file
        assert (rest.start, rest.end) == (30, 53)
        got += rest.data
    assert got == b"0123456789" * 5 + b"abc"


def test_a_follower_behind_what_the_cap_dropped_goes_on_from_what_is_kept(tmp_path: Path) -> None:
    log = tmp_path / "stdout.log"
    with open(log, "ab", buffering=0) as writer:
        writer.write(b"x" * 100)
        logcap.cap([log], 30)
        writer.write(b"y" * 5)
    read = logcap.read_from(log, 10)
    assert (read.data, read.start, read.end) == (b"x" * 30 + b"y" * 5, 70, 105)
    assert logcap.read_from(log, 105).data == b"" and logcap.read_from(tmp_path / "none.log", 0).end == 0
