#!/usr/bin/env python3
"""Writes golden_v3.1.json, golden_v3.2.json, golden_v4.json and golden_v4.1.json: chat requests
with the prompts golden_oracle.py renders for them (or "error": true where the reference raises).
Run from anywhere: python3 tests/data/encoding/make_dsml_goldens.py"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import golden_cases as c  # noqa: E402
import golden_oracle as oracle  # noqa: E402


def build(fmt, cases):
    out = []
    for name, request in cases.items():
        try:
            out.append({"name": name, "request": request, "expected": oracle.render(fmt, request)})
        except (oracle.EncodeError, KeyError, TypeError, ValueError):
            out.append({"name": name, "request": request, "error": True})
    return out


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    formats = {
        "v3.1": {**c.V31, **c.V31_ERRORS},
        "v3.2": {**c.DSML_COMMON, **c.V32_ONLY, **c.ERRORS},
        "v4": {**c.DSML_COMMON, **c.V4_ONLY, **c.V4_LENIENT, **c.ERRORS},
        "v4.1": {**c.DSML_COMMON, **c.V4_ONLY, **c.V41_ONLY, **c.ERRORS, **c.V41_ERRORS},
    }
    for fmt, cases in formats.items():
        data = {"format": fmt, "cases": build(fmt, cases)}
        with open(os.path.join(here, f"golden_{fmt}.json"), "w", encoding="utf-8") as f:
            json.dump(data, f, ensure_ascii=False, indent=1)
            f.write("\n")
        print(fmt, len(data["cases"]), "cases,", sum("error" in x for x in data["cases"]), "errors")


if __name__ == "__main__":
    main()
