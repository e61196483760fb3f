"""node/follow.py's Tail: the decision log read incrementally, across the guard's rotation (a
rename to `.1`, then a new file), never following a symlink or blocking on a FIFO."""

from __future__ import annotations

import os

from cni_delguard.node.follow import MAX_LINE, Tail


def lines(*numbers: int) -> bytes:
    return b"".join(b'{"n": %d}\n' % n for n in numbers)


def numbers(got: list[bytes]) -> list[int]:
    return [int(line.split(b":")[1].rstrip(b"}")) for line in got]


def test_starts_at_the_end_and_reads_only_what_is_appended(tmp_path):
    log = tmp_path / "log"
    log.write_bytes(lines(1, 2))
    tail = Tail(str(log))
    assert tail.read() == []
    with log.open("ab") as f:
        f.write(lines(3) + b'{"n": 4')  # a record half written
    assert numbers(tail.read()) == [3]
    with log.open("ab") as f:
        f.write(b"}\n")
    assert numbers(tail.read()) == [4]
    assert tail.readable and tail.errors == 0


def test_a_rotation_loses_nothing_written_before_or_after_it(tmp_path):
    log = tmp_path / "log"
    log.write_bytes(lines(1))
    tail = Tail(str(log))
    with log.open("ab") as f:
        f.write(lines(2, 3))
    os.rename(log, str(log) + ".1")  # guard/log.py's rotation: rename, then a new file
    log.write_bytes(lines(4))
    assert numbers(tail.read()) == [2, 3, 4]
    with log.open("ab") as f:
        f.write(lines(5))
    assert numbers(tail.read()) == [5]


def test_a_log_created_after_the_start_is_read_from_its_beginning(tmp_path):
    log = tmp_path / "log"
    tail = Tail(str(log))
    assert tail.read() == [] and not tail.readable and tail.errors == 0  # not there yet
    log.write_bytes(lines(1, 2))
    assert numbers(tail.read()) == [1, 2]


def test_a_truncated_log_is_read_again_from_the_start(tmp_path):
    log = tmp_path / "log"
    log.write_bytes(lines(1, 2, 3))
    tail = Tail(str(log))
    log.write_bytes(lines(9))  # same inode, shorter
    assert numbers(tail.read()) == [9]


def test_each_look_is_bounded_and_the_rest_comes_next_time(tmp_path):
    log = tmp_path / "log"
    log.write_bytes(b"")
    tail = Tail(str(log), max_read=64)
    log.write_bytes(lines(*range(100)))
    seen: list[int] = []
    looks = 0
    while True:
        seen += numbers(tail.read())
        looks += 1
        if not tail.behind:
            break
    assert seen == list(range(100))
    assert looks > 10


def test_an_overlong_line_is_dropped_and_counted(tmp_path):
    log = tmp_path / "log"
    log.write_bytes(b"")
    tail = Tail(str(log))
    with log.open("ab") as f:
        f.write(b"x" * (MAX_LINE + 10) + b"\n" + lines(1))
    got = tail.read()
    while tail.behind:  # more than one look's worth
        got += tail.read()
    assert numbers(got) == [1]
    assert tail.overlong == 1


def test_a_fifo_is_refused_without_blocking_and_a_symlink_is_not_followed(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    tail = Tail(str(fifo))
    assert tail.read() == [] and tail.errors == 1 and not tail.readable
    victim = tmp_path / "victim"
    victim.write_bytes(lines(1))
    link = tmp_path / "link"
    link.symlink_to(victim)
    tail = Tail(str(link))
    with victim.open("ab") as f:
        f.write(lines(2))
    assert tail.read() == [] and tail.errors == 1
