"""`python -m bench.validators`: fastjsonschema and jsonschema-rs on the ingest request schemas.

Each library checks the same bodies (a typical valid one, one with an unknown field, one with a
field of the wrong type) against the schemas of docs/openapi.yaml as written (draft 2020-12,
`allOf` + `unevaluatedProperties: false`). Prints microseconds per check and whether each
library decides as the schema says (jsonschema, the reference implementation, is the judge).
"""

from __future__ import annotations

import timeit
from pathlib import Path
from typing import Any

import fastjsonschema
import jsonschema
import jsonschema_rs
import yaml

OPENAPI = Path(__file__).resolve().parents[2] / "docs" / "openapi.yaml"

VISITOR = {"visitorId": "v-123456", "ip": "203.0.113.7",
           "userAgent": "Mozilla/5.0 (X11; Linux x86_64) Firefox/128.0", "consent": "granted"}
BODIES: dict[str, dict[str, Any]] = {
    "PageviewIngest": {**VISITOR, "url": "https://shop.example/products/42",
                       "title": "A product", "referrer": "https://search.example/",
                       "productId": "42", "pageviewId": "pv-1"},
    "ErrorIngest": {**VISITOR, "source": "javascript", "type": "TypeError",
                    "message": "x is undefined", "url": "https://shop.example/cart",
                    "stack": "at f (app.js:10:5)\nat g (app.js:20:7)"},
    "LeadIngest": {**VISITOR, "email": "ann@example.org", "kind": "checkout",
                   "cart": {"items": [{"productId": "42", "quantity": 1, "price": 9.5}]}},
}


def _schema(document: dict[str, Any], name: str) -> dict[str, Any]:
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "$ref": f"#/components/schemas/{name}", "components": document["components"]}


def _per_check_us(check: Any, body: Any) -> float:
    timer = timeit.Timer(lambda: check(body))
    loops, _ = timer.autorange()
    return min(timer.repeat(5, loops)) / loops * 1e6


def main() -> None:
    document = yaml.safe_load(OPENAPI.read_text(encoding="utf-8"))
    print(f"{'schema / body':34} {'jsonschema':>11} {'fastjsonschema':>15} {'jsonschema-rs':>14}")
    for name, valid in BODIES.items():
        schema = _schema(document, name)
        reference = jsonschema.Draft202012Validator(schema)
        fast = fastjsonschema.compile(schema)  # draft 2020-12 is not one of its drafts
        rust = jsonschema_rs.Draft202012Validator(schema)

        def fast_valid(body: Any, fast: Any = fast) -> bool:
            try:
                fast(body)
            except fastjsonschema.JsonSchemaException:
                return False
            return True

        cases = {"valid": valid, "unknown field": {**valid, "colour": "red"},
                 "wrong type": {**valid, "visitorId": 7}}
        for case, body in cases.items():
            expected = reference.is_valid(body)
            figures = []
            for check in (reference.is_valid, fast_valid, rust.is_valid):
                right = "" if check(body) == expected else " WRONG"
                figures.append(f"{_per_check_us(check, body):.1f} µs{right}")
            print(f"{name + ' / ' + case:34} {figures[0]:>11} {figures[1]:>15} {figures[2]:>14}")


if __name__ == "__main__":
    main()
