"""The READ-based systems (rdmalab-kv --system pilaf|farm|farm-var|drtm|drtm-write|hydradb)
end to end on softnic: values right, exactly the specified verbs and sizes at the server's
device (softnic's counters), and bad input: no server, wrong port, a server that dies, a
full FaRM circular buffer, DrTM lock contention. The full stores (--store full): Pilaf's
cuckoo table and FaRM's hopscotch table, their checksums, misses, displacements and a
full table."""

from __future__ import annotations

import subprocess
import uuid

import pytest

from kvrun import KV, benchrun, documents, server_alone, single_error, softnic, standalone

SV = 32
SMALL = ["--keys", "20000", "--value-size", str(SV)]
SYSTEMS = ["pilaf", "farm", "farm-var", "drtm", "drtm-write", "hydradb"]


def counted_run(system: str, args: list[str]) -> tuple[dict, dict, dict]:
    """A run in its own fabric: (server document, client document, the server device's counters)."""
    fabric = f"kv-{uuid.uuid4().hex[:10]}"
    try:
        server, client = documents(standalone(system, args, fabric=fabric))
        counters = softnic("counters", "--fabric", fabric, "--device", "softnic0", "--json")["devices"][0]["counters"]
    finally:
        benchrun.remove_fabric(fabric)
    return server, client, counters


@pytest.mark.parametrize("system", SYSTEMS)
def test_gets_return_what_puts_stored(system):
    server, client = documents(standalone(system, [*SMALL, "--put-fraction", "0.3", "--clients", "4", "-n", "20000",
                                                   "--validate"]))
    row = client["results"][0]
    v = client["validation"]
    assert v["ok"] and v["checked"] > 40_000, v
    assert row["unanswered"] == 0 and row["get_misses"] == 0
    assert row["puts"] > 15_000
    assert server["results"][0]["ops"] == row["ops"]
    assert server["results"][0]["verbs"]["per_get"] == row["verbs"]["per_get"]
    assert row["verbs"]["pcie_modeled_bytes_per_op"]["server_nic"]["bytes"] > 0


def test_pilaf_reads_2_6_times_per_get_at_the_servers_device():
    server, client, counters = counted_run("pilaf", [*SMALL, "--put-fraction", "0", "--clients", "2", "-n", "50000"])
    row = client["results"][0]
    gets = row["completed_all"]
    assert gets >= 100_000
    reads = counters["rx_packets"]
    print("Pilaf-em-OPT READs per GET at softnic0:", reads / gets, "client count:", row["verbs"]["per_get"])
    assert reads / gets == pytest.approx(2.6, rel=0.02)
    assert row["verbs"]["per_get"]["client"]["RC READ"] == pytest.approx(2.6, rel=0.02)
    bucket_reads = reads - gets
    assert counters["rx_bytes"] == bucket_reads * 32 + gets * SV, counters
    assert counters["work_requests"] == 0  # the server's CPU posts nothing for a GET


@pytest.mark.parametrize("system,reads_per_get,bytes_per_get", [
    ("farm", 1, 6 * (16 + SV)),
    ("farm-var", 2, 6 * (16 + 8) + SV),
    ("drtm", 1, SV),
    ("hydradb", 1, SV + 8),
])
def test_one_sided_gets_read_exactly_the_specified_bytes(system, reads_per_get, bytes_per_get):
    server, client, counters = counted_run(system, [*SMALL, "--put-fraction", "0", "--clients", "2", "-n", "20000"])
    row = client["results"][0]
    gets = row["completed_all"]
    assert counters["rx_packets"] == reads_per_get * gets, counters
    assert counters["rx_bytes"] == bytes_per_get * gets, counters
    assert counters["work_requests"] == 0
    assert row["verbs"]["per_get"]["client"]["RC READ"] == pytest.approx(reads_per_get)


@pytest.mark.parametrize("system,client_verbs,message_bytes", [
    ("pilaf", {"UC SEND": 1}, 32 + SV),
    ("farm", {"UC WRITE": 1}, 72),
    ("hydradb", {"RC WRITE": 1}, 72),
])
def test_message_puts_take_one_message_and_one_answer(system, client_verbs, message_bytes):
    server, client, counters = counted_run(system, [*SMALL, "--put-fraction", "1", "--clients", "2", "-n", "20000"])
    row = client["results"][0]
    puts = row["completed_all"]
    assert counters["rx_packets"] == puts and counters["rx_bytes"] == puts * message_bytes, counters
    assert counters["tx_packets"] == puts and counters["work_requests"] == puts, counters  # one answer each
    assert row["verbs"]["per_put"]["client"] == pytest.approx(client_verbs)
    assert server["server"]["workers"][0]["puts"] == puts


@pytest.mark.parametrize("system,atomics_per_put,writes_per_put", [("drtm", 2, 0), ("drtm-write", 2, 1)])
def test_drtm_puts_are_two_atomics(system, atomics_per_put, writes_per_put):
    server, client, counters = counted_run(system, [*SMALL, "--put-fraction", "1", "--clients", "2", "-n", "20000"])
    row = client["results"][0]
    puts = row["completed_all"]
    retries = row["lock_retries"]
    assert row["lock_failures"] == 0
    assert counters["rx_packets"] == (atomics_per_put + writes_per_put) * puts + retries, counters
    assert counters["rx_bytes"] == 8 * (atomics_per_put * puts + retries) + SV * writes_per_put * puts, counters
    assert row["verbs"]["per_put"]["client"]["RC CAS"] == pytest.approx(2 + retries / puts)


def test_hydradb_miss_path_asks_the_server_once_per_key_and_client():
    keys = 500
    server, client = documents(standalone("hydradb", ["--keys", str(keys), "--put-fraction", "0", "--clients", "2",
                                                      "-n", "20000", "--hydradb-miss-path", "--validate"]))
    row = client["results"][0]
    lookups = sum(w["lookups"] for w in server["server"]["workers"])
    # Once per key and client, but for GETs of one key in flight together before its answer.
    assert 2 * keys * 0.9 < lookups <= 2 * keys * 1.1, lookups
    assert row["verbs"]["per_get"]["client"]["RC WRITE"] == pytest.approx(lookups / row["verbs"]["gets"])
    assert client["validation"]["ok"] and row["verbs"]["per_get"]["client"]["RC READ"] == pytest.approx(1.0)


def test_full_farm_buffer_holds_puts_back_and_loses_none():
    # 8 PUTs in flight per client and a 1-slot circular buffer: every PUT but one waits.
    server, client = documents(standalone("farm", [*SMALL, "--put-fraction", "0.7", "--clients", "2", "--window", "8",
                                                   "--farm-buffer-slots", "1", "-n", "10000", "--validate"]))
    row = client["results"][0]
    assert row["backpressure_waits"] > 1000, row
    assert row["unanswered"] == 0 and row["puts_refused"] == 0
    assert sum(w["puts"] for w in server["server"]["workers"]) == row["verbs"]["puts"]
    assert client["validation"]["ok"]
    assert any("waited for a free slot" in n for n in client["notes"])


def test_drtm_lock_contention_is_retried_a_bounded_number_of_times_and_counted():
    # 4 clients x W=4 PUTting 2 keys: locks are taken all the time; at most 2 retries each.
    server, client = documents(standalone("drtm", ["--keys", "2", "--put-fraction", "1", "--clients", "4", "-n",
                                                   "5000", "--lock-retries", "2"]))
    row = client["results"][0]
    assert row["lock_retries"] > 0 and row["lock_failures"] > 0, row
    assert 0 < row["puts_refused"] <= row["lock_failures"]  # measured ones among all
    assert row["unanswered"] == 0
    assert any("--lock-retries 2" in n for n in client["notes"])
    cas_per_put = row["verbs"]["per_put"]["client"]["RC CAS"]
    assert cas_per_put <= 2 + 2, "a PUT makes at most 1 + --lock-retries lock CASes and 1 unlock"


def lone_client(system: str, port: int, timeout_s: int = 1) -> benchrun.Role:
    fabric = f"kv-alone-{uuid.uuid4().hex[:10]}"
    argv = [str(KV), "client", "--system", system, "-p", str(port), "-d", "softnic1", "--timeout", str(timeout_s),
            "127.0.0.1"]
    try:
        return benchrun.run_processes([argv], benchrun.softnic_env(fabric, 2, "ib"), timeout_s + 20).server
    finally:
        benchrun.remove_fabric(fabric)


@pytest.mark.parametrize("system", ["pilaf", "farm", "drtm", "hydradb"])
def test_no_server_or_wrong_port_is_one_line_within_the_timeout(system):
    line = single_error(lone_client(system, benchrun.free_port()))
    assert "cannot reach the rendezvous/server at 127.0.0.1:" in line


def test_server_that_dies_mid_run_fails_the_client_with_one_line():
    port_args = [*SMALL, "--put-fraction", "0.1", "-D", "30", "--timeout", "60"]
    fabric = f"kv-{uuid.uuid4().hex[:10]}"
    port = benchrun.free_port()
    argvs = [[str(KV), "server", "--system", "pilaf", *port_args, "-p", str(port), "-d", "softnic0", "--cpus", "0"],
             [str(KV), "client", "--system", "pilaf", *port_args, "-p", str(port), "-d", "softnic1", "--cpus", "1",
              "127.0.0.1"]]
    try:
        run = benchrun.run_processes(argvs, benchrun.softnic_env(fabric, 2, "ib"), 60, kill_after={0: 3.0})
    finally:
        benchrun.remove_fabric(fabric)
    assert run.elapsed_s < 45, run.describe()
    line = single_error(run.clients[0])
    assert "server" in line or "peer" in line, line


@pytest.mark.parametrize("argv,expected", [
    (["--system", "pilaf", "--window", "17"], "exceeds 16"),
    (["--system", "farm", "--key-size", "32"], "16-byte keyhashes"),
    (["--system", "drtm", "--lock-placement", "nearby"], "same-bits"),
    (["--system", "farm", "--hydradb-miss-path"], "HydraDB's"),
    (["--system", "drtm", "--store", "full"], "built for pilaf, farm and farm-var"),
    (["--system", "farm", "--store", "full", "--workers", "2"], "one writer"),
    (["--system", "farm", "--farm-load-factor", "0.5"], "sizes FaRM full's hopscotch table"),
    (["--system", "pilaf", "--preload=false"], "always loads every key"),
])
def test_bad_flag_values_name_the_value_and_what_is_valid(argv, expected):
    r = subprocess.run([str(KV), "server", *argv], capture_output=True, text=True, timeout=30)
    assert r.returncode == 1, r
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("rdmalab-kv: error:")]
    assert len(lines) == 1 and expected in lines[0], r.stderr


def million_mixed_operations_on_the_full_store(system: str) -> tuple[dict, dict]:
    """4 clients x 250000 operations, half PUTs, every GET checked: (server document, client row)."""
    server, client = documents(standalone(system, [*SMALL, "--store", "full", "--put-fraction", "0.5", "--clients",
                                                   "4", "-n", "250000", "--validate", "--warmup", "0"]))
    row = client["results"][0]
    assert row["ops"] >= 1_000_000
    v = client["validation"]
    assert v["ok"] and v["checked"] >= 400_000, v
    assert row["checksum_failures"] == 0 and row["get_misses"] == 0 and row["unanswered"] == 0, row
    return server, row


def test_pilaf_full_returns_what_puts_stored_over_a_million_mixed_operations():
    server, row = million_mixed_operations_on_the_full_store("pilaf")
    # Each GET READs 1 to 3 buckets of the 3-1 table, then the extent.
    assert 2.0 < row["verbs"]["per_get"]["client"]["RC READ"] < 4.0


def test_pilaf_full_reads_its_buckets_and_crc_sealed_extents_at_the_servers_device():
    server, client, counters = counted_run("pilaf", [*SMALL, "--store", "full", "--put-fraction", "0", "--clients", "2",
                                                     "-n", "20000"])
    row = client["results"][0]
    gets = row["completed_all"]
    bucket_reads = counters["rx_packets"] - gets
    assert counters["rx_bytes"] == bucket_reads * 32 + gets * (SV + 8), counters
    assert row["verbs"]["per_get"]["client"]["RC READ"] == pytest.approx(counters["rx_packets"] / gets)


def test_pilaf_full_detects_a_flipped_byte_in_server_memory():
    # The server flips a byte of 10 keys' extents (even keys) or buckets (odd keys) of 1000. A GET
    # of a corrupt key READs for 250 ms before it gives up: few GETs keep the test short.
    server, client = documents(standalone("pilaf", ["--keys", "1000", "--store", "full", "--put-fraction", "0",
                                                    "--clients", "2", "-n", "1000", "--validate"],
                                          server_args=["--corrupt", "10"]))
    row = client["results"][0]
    assert row["checksum_failures"] > 0, row
    assert row["get_misses"] > 0  # the corrupt keys are answered as misses, never with their bytes
    assert client["validation"]["ok"] and client["validation"]["corrupt"] == 0
    assert any("failing its CRC64" in n for n in client["notes"])
    clean = documents(standalone("pilaf", ["--keys", "1000", "--store", "full", "--put-fraction", "0", "--clients",
                                           "2", "-n", "20000", "--validate"]))[1]["results"][0]
    assert clean["checksum_failures"] == 0 and clean["get_misses"] == 0


FARM_FULL_BUCKET = {"farm": 16 + SV + 16, "farm-var": 16 + 8 + 16}  # key, value or pointer, version, CRC64


@pytest.mark.parametrize("system", ["farm", "farm-var"])
def test_farm_full_returns_what_puts_stored_over_a_million_mixed_operations(system):
    server, row = million_mixed_operations_on_the_full_store(system)
    assert row["table_full"] == 0 and row["puts_refused"] == 0
    table = server["server"]["hopscotch"]
    assert table["keys"] == 20000 and table["neighbourhood"] == 6 and table["bucket_bytes"] == FARM_FULL_BUCKET[system]
    # One neighbourhood READ per GET (FaRM-VAR: and the value's), and the few made again after a torn one.
    reads = {"farm": 1, "farm-var": 2}[system]
    assert row["verbs"]["per_get"]["client"]["RC READ"] == pytest.approx(reads, rel=0.01)
    assert row["torn_rereads"] < 0.01 * row["verbs"]["gets"]


@pytest.mark.parametrize("system,reads_per_get,bytes_per_get", [
    ("farm", 1, 6 * FARM_FULL_BUCKET["farm"]),
    ("farm-var", 2, 6 * FARM_FULL_BUCKET["farm-var"] + SV + 8),
])
def test_farm_full_reads_the_keys_neighbourhood_at_the_servers_device(system, reads_per_get, bytes_per_get):
    server, client, counters = counted_run(system, [*SMALL, "--store", "full", "--put-fraction", "0", "--clients", "2",
                                                    "-n", "20000"])
    row = client["results"][0]
    gets = row["completed_all"]
    assert row["torn_rereads"] == 0 and row["get_misses"] == 0  # no PUT races with a READ
    assert counters["rx_packets"] == reads_per_get * gets, counters
    assert counters["rx_bytes"] == bytes_per_get * gets, counters
    assert counters["work_requests"] == 0  # the server's CPU takes no part in a GET


@pytest.mark.parametrize("system", ["farm", "farm-var"])
def test_farm_full_answers_a_key_absent_from_the_table_as_a_miss_after_confirming_reads(system):
    # --preload=false: the table is empty and no PUT comes, so every GET is of an absent key.
    server, client, counters = counted_run(system, [*SMALL, "--store", "full", "--preload=false", "--put-fraction", "0",
                                                    "--clients", "2", "-n", "5000"])
    row = client["results"][0]
    gets = row["completed_all"]
    assert row["get_hits"] == 0 and row["get_misses"] == row["gets"] > 0, row
    # A miss rests on a second READ of the neighbourhood with the home's version the same before
    # (the first READ's) and after (a READ of the home bucket): a move could hide a key from one READ.
    bucket = FARM_FULL_BUCKET[system]
    assert counters["rx_packets"] == 3 * gets and counters["rx_bytes"] == gets * (2 * 6 * bucket + bucket), counters
    assert row["verbs"]["per_get"]["client"]["RC READ"] == pytest.approx(3)
    assert row["checksum_failures"] == 0 and server["server"]["hopscotch"]["keys"] == 0


@pytest.mark.parametrize("system", ["farm", "farm-var"])
def test_farm_full_finds_entries_that_inserts_displaced(system):
    # 2000 keys at load 0.5: inserts moved entries within their neighbourhoods; 40000 GETs read every key.
    server, client = documents(standalone(system, ["--keys", "2000", "--value-size", str(SV), "--store", "full",
                                                   "--farm-load-factor", "0.5", "--put-fraction", "0", "--clients", "2",
                                                   "-n", "20000", "--validate"]))
    table = server["server"]["hopscotch"]
    assert table["displacements"] > 10 and table["away_from_home"] > 200, table
    row = client["results"][0]
    assert row["get_misses"] == 0 and row["checksum_failures"] == 0, row
    assert client["validation"]["ok"] and client["validation"]["checked"] >= 40_000


@pytest.mark.parametrize("system", ["farm", "farm-var"])
def test_farm_full_inserts_racing_with_gets_never_return_a_wrong_value(system):
    # An empty table filled by the run's PUTs: inserts and displacements while 4 clients READ.
    server, client = documents(standalone(system, ["--keys", "2000", "--value-size", str(SV), "--store", "full",
                                                   "--farm-load-factor", "0.5", "--preload=false", "--put-fraction",
                                                   "0.5", "--clients", "4", "-n", "20000", "--validate",
                                                   "--warmup", "0"]))
    table = server["server"]["hopscotch"]
    row = client["results"][0]
    assert table["keys"] > 1900 and table["displacements"] > 0, table
    v = client["validation"]
    assert v["ok"] and v["wrong_key"] == 0 and v["corrupt"] == 0 and v["checked"] > 30_000, v
    assert row["get_misses"] > 0 and row["get_hits"] > 30_000  # absent until their first PUT
    assert row["unanswered"] == 0 and row["checksum_failures"] == 0
    assert row["table_full"] == table["puts_refused_full"]


def test_farm_full_table_without_room_refuses_puts_with_a_full_status():
    # 2000 keys, 1000 home buckets (1005 buckets): at most 1005 keys fit; the others' PUTs are refused.
    server, client = documents(standalone("farm", ["--keys", "2000", "--value-size", str(SV), "--store", "full",
                                                   "--farm-load-factor", "2", "--preload=false", "--put-fraction",
                                                   "0.7", "--clients", "2", "-n", "10000", "--validate"]))
    table = server["server"]["hopscotch"]
    row = client["results"][0]
    assert 500 < table["keys"] <= 1005 and table["puts_refused_full"] > 1000, table
    assert row["table_full"] == table["puts_refused_full"] and row["puts_refused"] > 0, row
    assert row["unanswered"] == 0 and client["validation"]["ok"]
    assert any("table full" in n for n in client["notes"]) and sum("table full" in n for n in server["notes"]) == 1


def test_farm_full_preload_that_does_not_fit_fails_with_one_line():
    line = single_error(server_alone("farm", ["--keys", "20000", "--store", "full", "--farm-load-factor", "3"]))
    assert "has no place for key" in line and "lower --farm-load-factor" in line, line


@pytest.mark.parametrize("system", ["farm", "farm-var"])
def test_farm_full_detects_a_flipped_byte_in_server_memory(system):
    # The server flips a byte of 10 keys' values (even keys) or keys (odd keys) of 1000.
    server, client = documents(standalone(system, ["--keys", "1000", "--store", "full", "--put-fraction", "0",
                                                   "--clients", "2", "-n", "1000", "--validate"],
                                          server_args=["--corrupt", "10"]))
    row = client["results"][0]
    assert row["checksum_failures"] > 0 and row["get_misses"] > 0, row
    assert client["validation"]["ok"] and client["validation"]["corrupt"] == 0
    assert any("failing its CRC64" in n for n in client["notes"])


@pytest.mark.parametrize("system", ["pilaf", "farm", "farm-var"])
def test_full_store_reads_racing_with_a_hot_keys_updates_are_made_again_not_taken_as_corrupt(system):
    # Zipf keys, half PUTs: the hottest keys are rewritten all the time, also while the server
    # shares a core with 2 busy client processes and is preempted in the middle of an update.
    server, client, other = documents(standalone(system, [*SMALL, "--store", "full", "--distribution", "zipf",
                                                          "--put-fraction", "0.5", "--clients", "4", "-n", "25000",
                                                          "--validate"], client_processes=2))
    for doc in (client, other):
        row = doc["results"][0]
        assert doc["validation"]["ok"] and doc["validation"]["checked"] > 40_000, doc["validation"]
        assert row["checksum_failures"] == 0 and row["get_misses"] == 0 and row["unanswered"] == 0, row
    assert server["results"][0]["torn_rereads"] > 0  # the races happened
