"""The chat load benchmark's smoke mode against a real stack (its own ports and database)."""

import json
import math

import pytest

from bench import chat_load

pytestmark = pytest.mark.slow


def test_quick_chat_load_reports_numbers_and_no_errors(tmp_path):
    result = chat_load.main(["--quick", "--no-worker", "--out", str(tmp_path)])

    levels = result["levels"]
    assert [lv["concurrency"] for lv in levels] == [1, 4], levels
    for lv in levels:
        for target in ("product", "echo"):
            s = lv[target]
            assert s["errors"] == 0, s
            assert s["not_started"] == 0, s
            assert s["turns"] == lv["concurrency"] * 2, s
            for key in ("first_p50", "first_p95", "first_p99", "full_p50", "full_p95"):
                assert math.isfinite(s[key]), (key, s)
                assert s[key] > 0, (key, s)
            assert s["first_p50"] <= s["full_p50"], s
        assert lv["product"]["first_p50"] > lv["echo"]["first_p50"], lv
    text = (tmp_path / "chat_load.md").read_text()
    assert "| 1 | 2 | 0 |" in text, text
    assert "| 4 | 8 | 0 |" in text, text
    assert "product/echo" in text, text
    assert (tmp_path / "chat_load.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    raw = json.loads((tmp_path / "chat_load.json").read_text())
    assert len(raw["raw"]) == 4, raw["raw"]  # product + echo at each level


def test_each_simulated_customer_comes_from_a_loopback_address_of_its_own():
    import ipaddress

    from bench.chat_load import client_address

    addresses = [ipaddress.ip_address(client_address(i)) for i in range(70_000)]
    assert len(set(addresses)) == len(addresses)
    assert all(a in ipaddress.ip_network("127.0.0.0/8") for a in addresses)
    assert all(0 < a.packed[3] < 255 for a in addresses)
