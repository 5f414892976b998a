"""The file store's lease file: written in place, cut only when a longer table left much behind."""

from __future__ import annotations

from pathlib import Path

from nodestep.store._file.leases import LeaseFile

TTL = 30.0


def test_a_shorter_table_written_over_a_longer_one_reads_back_as_itself(tmp_path: Path) -> None:
    history = tmp_path / "h.jsonl"
    writer, reader = LeaseFile(history), LeaseFile(history)
    leases = [writer.acquire(f"t{i}", "main", "run", TTL) for i in range(5)]
    longest = writer.path.stat().st_size
    for lease in leases[1:]:
        writer.release(lease)
    # The old table's last bytes stay after the new line (no cut for a few hundred bytes),
    # and another store's read takes the first line only.
    assert writer.path.stat().st_size == longest
    assert writer.path.read_bytes().count(b"\n") >= 2
    kept = reader.acquire("t9", "main", "run", TTL)
    assert [lease.thread_id for lease in reader._read().leases.values()] == ["t0", "t9"]
    writer.release(leases[0])
    writer.release(kept)
    assert list(reader._read().leases) == []


def test_the_file_is_cut_once_a_table_left_more_than_the_slack_behind(tmp_path: Path) -> None:
    leases = LeaseFile(tmp_path / "h.jsonl")
    held = [leases.acquire(f"thread-{i}", "main", "run", TTL) for i in range(40)]
    assert leases.path.stat().st_size > 4096 + 300
    for lease in held:
        leases.release(lease)
    first_line = leases.path.read_bytes().split(b"\n", 1)[0]
    assert leases.path.stat().st_size <= len(first_line) + 1 + 4096
    assert LeaseFile(tmp_path / "h.jsonl")._read().leases == {}


def test_only_the_file_stores_table_keeps_each_leases_json(tmp_path: Path) -> None:
    # The JSON is what the lease file holds; a table in memory alone (the memory store's,
    # any store's default) does not make it.
    import orjson

    from nodestep.store._leases import LeaseTable

    kept, plain = LeaseTable(encoded=True), LeaseTable()
    for table in (kept, plain):
        lease = table.acquire("t1", "main", "run", TTL, 100.0)
        table.renew(lease, 110.0)
        table.acquire("t2", "main", "run", TTL, 100.0)
    assert plain.encoded == {}
    assert kept.encoded == {key: orjson.dumps(lease) for key, lease in kept.leases.items()}
    assert kept.encoded[("t1", "main")] == orjson.dumps(kept.leases[("t1", "main")])
    assert orjson.loads(kept.encoded[("t1", "main")])["expires"] == 110.0 + TTL
    history = tmp_path / "h.jsonl"
    LeaseFile(history).acquire("t1", "main", "run", TTL)
    assert LeaseFile(history)._read().encoded  # read back: written again with the rest
