#!/usr/bin/env python3
"""Writes terminal notifications as other serializers send them.

A terminal notification's identity is its canonical JSON (the reference
system's json.dumps(sort_keys=True, separators=(",", ":"),
ensure_ascii=False)), so a receiver must take the same notification
serialized another way for a redelivery. Each notification here has the
reference's canonical payload, its Ack, the same payload as other
serializers write it (Python's json.dumps defaults, indentation, key
order, \\u escapes, a trailing newline), and another notification for the
same event, which the reference refuses as an idempotency collision.

Run from this directory: python3 gen.py > redeliveries.json
"""
import hashlib
import json


def canonical(value):
    return json.dumps(value, ensure_ascii=False, allow_nan=False, sort_keys=True, separators=(",", ":"))


def sha(text):
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def hexof(seed):
    return hashlib.sha256(seed.encode()).hexdigest()


def notification(event, status, lifecycle, seq):
    content = {
        "schema": "blun.cms-source-terminal-notification.v1",
        "event_id": event,
        "site_id": "site-1",
        "plan_id": "plan:42",
        "website_version": "v2026.12.02-1",
        "source_sequence": seq,
        "job_count": 3,
        "change_sha256": hexof("change-" + event),
        "lifecycle_binding_sha256": hexof("binding-" + event),
        "terminal_status": status,
        "lifecycle_sha256": lifecycle,
    }
    payload = dict(content, notification_id="terminal-" + sha(canonical(content)))
    return payload


def escaped(value):
    """Every character of every string as a \\u escape, as some encoders
    write non-ASCII and HTML characters, here applied to all of them."""
    if isinstance(value, dict):
        return "{" + ",".join(escaped(k) + ":" + escaped(v) for k, v in value.items()) + "}"
    if isinstance(value, str):
        return '"' + "".join("\\u%04x" % ord(c) for c in value) + '"'
    return json.dumps(value)


def redeliveries(payload):
    reversed_order = dict(reversed(list(payload.items())))
    return [
        {"name": "python json.dumps defaults", "body": json.dumps(payload)},
        {"name": "python sorted with spaces", "body": json.dumps(payload, sort_keys=True)},
        {"name": "python indent 2", "body": json.dumps(payload, indent=2)},
        {"name": "python tab indent sorted, trailing newline", "body": json.dumps(payload, indent="\t", sort_keys=True) + "\n"},
        {"name": "canonical with a trailing newline", "body": canonical(payload) + "\n"},
        {"name": "canonical with leading whitespace", "body": " \r\n\t" + canonical(payload)},
        {"name": "compact, keys reversed", "body": json.dumps(reversed_order, separators=(",", ":"))},
        {"name": "CRLF indent 1", "body": json.dumps(reversed_order, indent=1).replace("\n", "\r\n")},
        {"name": "every string unicode-escaped", "body": escaped(payload)},
    ]


def case(name, payload, other):
    rendered = canonical(payload)
    ack = canonical({
        "schema": "blun.cms-source-terminal-notification-ack.v1",
        "notification_id": payload["notification_id"],
        "event_id": payload["event_id"],
        "site_id": payload["site_id"],
        "status": "accepted",
        "notification_sha256": sha(rendered),
    })
    for r in redeliveries(payload):
        assert json.loads(r["body"]) == payload and r["body"] != rendered
    assert other["event_id"] == payload["event_id"] and other != payload
    return {
        "name": name,
        "notification_id": payload["notification_id"],
        "event_id": payload["event_id"],
        "payload": rendered,
        "ack": ack,
        "redeliveries": redeliveries(payload),
        "other_for_event": {"notification_id": other["notification_id"], "payload": canonical(other)},
    }


CASES = [
    case(
        "published",
        notification("evt_01HZX", "published", hexof("lifecycle"), 7),
        notification("evt_01HZX", "publication_failed", hexof("lifecycle-2"), 8),
    ),
    case(
        "cancelled, sequence beyond uint64",
        notification("evt_01J00", "cancelled", None, 2**64 + 1),
        notification("evt_01J00", "superseded", None, 2**64 + 2),
    ),
]

if __name__ == "__main__":
    print(json.dumps(CASES, indent=2, sort_keys=True))
