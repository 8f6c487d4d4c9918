#!/usr/bin/env python3
"""Writes terminal-profile vectors computed from the reference rules.

Each case gives the lifecycle content and what the reference system derives
from it: the notification_id ("terminal-" + SHA-256 of the canonical content
without notification_id), the canonical payload and its SHA-256, and the
canonical Ack document with its SHA-256.

Run from this directory: python3 gen.py > vectors.json
"""
import hashlib
import json


def canonical(value):
    return json.dumps(value, ensure_ascii=False, allow_nan=False, sort_keys=True, separators=(",", ":"))


def sha(text):
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def hexof(seed):
    return hashlib.sha256(seed.encode()).hexdigest()


def case(name, status, lifecycle, seq=7, jobs=3, site="site-1", event="evt_01HZX"):
    content = {
        "schema": "blun.cms-source-terminal-notification.v1",
        "event_id": event,
        "site_id": site,
        "plan_id": "plan:42",
        "website_version": "v2026.12.02-1",
        "source_sequence": seq,
        "job_count": jobs,
        "change_sha256": hexof("change-" + name),
        "lifecycle_binding_sha256": hexof("binding-" + name),
        "terminal_status": status,
        "lifecycle_sha256": lifecycle,
    }
    notification_id = "terminal-" + sha(canonical(content))
    payload = dict(content, notification_id=notification_id)
    rendered = canonical(payload)
    ack = canonical({
        "schema": "blun.cms-source-terminal-notification-ack.v1",
        "notification_id": notification_id,
        "event_id": event,
        "site_id": site,
        "status": "accepted",
        "notification_sha256": sha(rendered),
    })
    return {
        "name": name,
        "content": content,
        "notification_id": notification_id,
        "payload": rendered,
        "payload_sha256": sha(rendered),
        "ack": ack,
        "ack_sha256": sha(ack),
    }


CASES = [
    case("published", "published", hexof("lifecycle-published")),
    case("cancelled", "cancelled", None),
    case("superseded", "superseded", None, seq=1, jobs=1),
    case("deleted", "deleted", hexof("lifecycle-deleted"), seq=2**40, jobs=1000),
    case("deletion_failed", "deletion_failed", hexof("x"), site="S.1:a-b_c"),
    case("localization_failed", "localization_failed", hexof("y")),
    case("publication_blocked", "publication_blocked", hexof("z"), event="e" * 256),
    case("publication_failed", "publication_failed", hexof("w")),
    # source_sequence is any positive integer: beyond int64 and uint64.
    case("sequence_beyond_int64", "published", hexof("v"), seq=2**63),
    case("sequence_of_40_digits", "cancelled", None, seq=10**39 + 7),
    # So is job_count.
    case("job_count_beyond_uint64", "published", hexof("u"), jobs=2**64 + 1),
    case("job_count_of_40_digits", "superseded", None, seq=2**63, jobs=10**39 + 3),
]

if __name__ == "__main__":
    print(json.dumps(CASES, indent=2, sort_keys=True))
