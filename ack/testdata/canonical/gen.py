#!/usr/bin/env python3
"""Writes the canonical JSON corpus for ack's tests.

For each case, NAME.json is the input (deliberately not canonical: indented,
ASCII-escaped, keys unsorted) and NAME.golden is what Python's json.dumps
makes of it with the settings courier's canonical form must match.

Run from this directory: python3 gen.py
"""
import json
import pathlib

CASES = {
    "empty_object": {},
    "empty_array": [],
    "scalars": [None, True, False, 0, -1, "", "x"],
    "unsorted_keys": {"b": 1, "a": 2, "C": 3, "aa": 4, "": 5, "_": 6},
    "code_point_order": {"\u00e9": 1, "z": 2, "\U0001f600": 3, "\uffff": 4, "\u0100": 5},
    "non_ascii": {"text": "Gr\u00fc\u00dfe, \u65e5\u672c\u8a9e, \u0627\u0644\u0639\u0631\u0628\u064a\u0629, \U0001f680"},
    "line_separators": {"u2028": "a\u2028b", "u2029": "c\u2029d"},
    "html_characters": {"html": "<script>alert('x')</script> & \"quoted\" >"},
    "control_characters": {"ctl": "".join(chr(c) for c in range(0x20)) + "\x7f", "slash": "a/b\\c"},
    "nesting": {"a": [{"b": [{"c": [[[{"d": None}]]]}]}], "e": {"f": {"g": {"h": [1, [2, [3]]]}}}},
    "large_integers": [2**53, 2**53 + 1, -(2**63), 2**64, 10**30, -(10**40)],
    "floats": [0.1, 1.5, -2.25, 1e16, 1e-7, 1.0, 100.0, 1e22, 5e-324, 1.7976931348623157e308, 123456.789],
    "negative_zero": [-0.0, 0.0],
    "mixed": {"id": "terminal-1", "n": 3, "ok": True, "none": None, "list": ["\u00e9", 1, 2.5, {"k": "v"}]},
}


def main():
    here = pathlib.Path(__file__).parent
    for name, value in CASES.items():
        (here / f"{name}.json").write_text(json.dumps(value, indent=2, ensure_ascii=True) + "\n", encoding="ascii")
        back = json.loads((here / f"{name}.json").read_text(encoding="ascii"))
        golden = json.dumps(back, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        (here / f"{name}.golden").write_bytes(golden.encode("utf-8"))


if __name__ == "__main__":
    main()
