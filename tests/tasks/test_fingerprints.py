"""The fingerprint groups one fault across occurrences and keeps different faults apart."""

from __future__ import annotations

import pytest

from tasks.errors import error_job, fingerprint, normalise_message, top_frames


@pytest.mark.parametrize(("message", "expected"), [
    ("Order 12345 not found", "Order <n> not found"),
    ("User 3f2a1c9e-1b2c-4d5e-8f90-1234567890ab missing",
     "User <uuid> missing"),
    ("No account for ann@example.com", "No account for <email>"),
    ("Fetch https://api.example/v1/items?id=9 failed", "Fetch <url> failed"),
    ("Connection from 203.0.113.7 refused", "Connection from <ip> refused"),
    ("Peer 2001:db8::1 reset", "Peer <ip> reset"),
    ("Object 0xDEADBEEF freed", "Object <hex> freed"),
    ("Document 5f1d7c2a9b3e4d0012ab34cd missing", "Document <hex> missing"),
    ("Call to undefined method App\\Cart::total()", "Call to undefined method App\\Cart::total()"),
])
def test_messages_lose_what_varies_between_occurrences(message: str, expected: str):
    assert normalise_message(message) == expected


def test_v8_spidermonkey_and_php_stacks_give_basename_and_function_without_lines():
    v8 = "Error\n    at renderCart (https://shop.example/a/cart.js?v=3:120:15)\n    at x.js:1:1"
    firefox = "renderCart@https://shop.example/a/cart.js:120:15\n@https://shop.example/app.js:1:1"
    php = "#0 /var/www/wp-content/plugins/shop/cart.php(12): Cart->total()\n#1 {main}"
    assert top_frames(None, v8) == ["cart.js:renderCart", "x.js:"]
    assert top_frames(None, firefox) == ["cart.js:renderCart", "app.js:"]
    assert top_frames(None, php) == ["cart.php:Cart->total"]


def test_the_same_fault_on_other_lines_and_with_other_ids_has_one_fingerprint():
    first = fingerprint("TypeError", "Item 42 has no price", None,
                        "    at renderCart (https://shop.example/cart.js:120:15)")
    second = fingerprint("TypeError", "Item 977 has no price", None,
                         "    at renderCart (https://shop.example/cart.js:131:2)")
    assert first == second


def test_other_types_other_functions_and_deeper_frames_beyond_three_are_told_apart():
    frames = [{"file": "a.js", "function": f"f{n}"} for n in range(5)]
    base = fingerprint("TypeError", "boom", frames, None)
    assert fingerprint("RangeError", "boom", frames, None) != base
    assert fingerprint("TypeError", "boom", [{"file": "a.js", "function": "g"}, *frames[1:]],
                       None) != base
    assert fingerprint("TypeError", "boom", [*frames[:3], {"file": "z.js", "function": "q"}],
                       None) == base


def test_parsed_frames_take_precedence_over_the_stack_text():
    frames = [{"file": "https://shop.example/cart.js", "line": 3, "function": "renderCart"}]
    assert top_frames(frames, "    at other (https://x/y.js:1:1)") == ["cart.js:renderCart"]


def test_a_job_carries_its_own_id_and_no_full_ip_address_anywhere():
    job = error_job("site-1", {
        "ip": "198.51.100.123", "type": "Error", "message": "from 198.51.100.123",
        "source": "php", "context": {"server": {"REMOTE_ADDR": "198.51.100.123",
                                                "HTTP_X_FORWARDED_FOR": "203.0.113.9"}},
    })
    assert len(job["jobId"]) == 36 and job["siteId"] == "site-1"
    assert job["ipAddress"] == "198.51.100.0"
    assert "ip" not in job["error"]
    assert "198.51.100.123" not in repr(job) and "203.0.113.9" not in repr(job)
    assert job["error"]["context"]["server"]["HTTP_X_FORWARDED_FOR"] == "203.0.113.0"
    assert error_job("site-1", {"type": "E", "message": "m", "source": "php"})["jobId"] != \
        job["jobId"]


@pytest.mark.parametrize(("text", "scrubbed"), [
    ("Mozilla/5.0 (X11; rv:128.0) Firefox/128.0 via 10.20.30.40",
     "Mozilla/5.0 (X11; rv:128.0) Firefox/128.0 via 10.20.30.0"),
    ("connect 192.0.2.55:8080 failed at app.js:10:5",
     "connect 192.0.2.0:8080 failed at app.js:10:5"),
    ("peers [10.0.0.7,10.0.0.8]", "peers [10.0.0.0,10.0.0.0]"),
    # Four groups inside a longer dotted run are taken for an address too: over-cautious.
    ("version 1.2.3.4.5 and 1.2.3 stay", "version 1.2.3.0.5 and 1.2.3 stay"),
    ("no address: 999.1.1.1 or 01.2.3.4", "no address: 999.1.1.1 or 01.2.3.4"),
    ("own address 2001:DB8::1 and 2001:0db8:0000:0000:0000:0000:0000:0001",
     "own address 2001:db8:: and 2001:db8::"),
    # Other people's IPv6 addresses, however written, are cut to their /48 as well.
    ("upstream 2a01:4f8:c17:b8f::2 and [2001:db8:abcd:12:3456:789a:bcde:f012]:443 and ::1",
     "upstream 2a01:4f8:c17:: and [2001:db8:abcd::]:443 and ::"),
    ("mapped ::ffff:203.0.113.77 then fe80::1%eth0", "mapped 203.0.113.0 then fe80::"),
    # What only looks like hex and colons stays: times, MACs, code, URLs.
    ("at 10:00:01.123 on 00:1a:2b:3c:4d:5e in Cache::add() std::vector https://a.example:8443/",
     "at 10:00:01.123 on 00:1a:2b:3c:4d:5e in Cache::add() std::vector https://a.example:8443/"),
])
def test_every_address_in_the_error_text_is_anonymised(text: str, scrubbed: str):
    job = error_job("site-1", {"ip": "2001:DB8::1", "type": "Error", "message": text,
                               "source": "javascript", "userAgent": text})
    assert job["error"]["message"] == scrubbed
    assert job["error"]["userAgent"] == scrubbed
