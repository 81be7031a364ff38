#!/usr/bin/env python3
"""Turns a CustomResourceDefinition's openAPIV3Schema into a JSON Schema that check-jsonschema
validates manifests with, as strictly as `kubernetes-validate --strict` holds the built-in kinds:

    python3 deploy/schemas/crd-to-jsonschema.py CRD.yaml RELEASE SOURCE > KIND.json

RELEASE names the project and its release (`prometheus-operator v0.93.0`, `CloudNativePG
v1.30.0`), SOURCE where the CRD file came from.

- every object schema that lists its properties and does not preserve unknown fields gets
  `additionalProperties: false` (a misspelt field is an error, not silently dropped);
- `apiVersion` and `kind` must be the CRD's group/version and kind;
- `metadata` must name the object;
- a pattern with Go's `(?i)` is spelt out for ECMA-262 regexes.
Kubernetes' own extensions (`x-kubernetes-*`) are kept: JSON Schema validators ignore them.
deploy/schemas/README.md says where the vendored ones came from.
"""
import json
import sys

import yaml


def ecma_pattern(pattern):
    """A Go pattern's leading `(?i)` (which ECMA-262 regexes, those of JSON Schema, lack) spelt
    out as a class of both cases for each letter outside a class."""
    if not pattern.startswith("^(?i)"):
        return pattern
    out, in_class = "^", False
    for c in pattern[len("^(?i)"):]:
        if c == "[":
            in_class = True
        elif c == "]":
            in_class = False
        out += f"[{c.lower()}{c.upper()}]" if c.isalpha() and not in_class else c
    return out


def strict(schema):
    if isinstance(schema, dict):
        if isinstance(schema.get("pattern"), str):
            schema["pattern"] = ecma_pattern(schema["pattern"])
        for key, value in schema.items():
            if key in ("properties", "patternProperties", "definitions"):
                for child in value.values():
                    strict(child)
            elif isinstance(value, (dict, list)):
                strict(value)
        if (schema.get("type") == "object" and "properties" in schema and "additionalProperties" not in schema
                and not schema.get("x-kubernetes-preserve-unknown-fields")):
            schema["additionalProperties"] = False
    elif isinstance(schema, list):
        for item in schema:
            strict(item)
    return schema


def main(argv):
    if len(argv) != 3:
        sys.exit(__doc__)
    path, release, source = argv
    crd = yaml.safe_load(open(path))
    group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
    (version,) = [v for v in crd["spec"]["versions"] if v.get("storage")]
    schema = strict(version["schema"]["openAPIV3Schema"])
    schema["properties"]["apiVersion"] = {"type": "string", "enum": [f"{group}/{version['name']}"]}
    schema["properties"]["kind"] = {"type": "string", "enum": [kind]}
    schema["properties"]["metadata"] = {
        "type": "object", "required": ["name"],
        "properties": {"name": {"type": "string", "minLength": 1}, "namespace": {"type": "string"}},
    }
    schema["required"] = sorted(set(schema.get("required", [])) | {"apiVersion", "kind", "metadata"})
    out = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "$comment": f"{kind} {group}/{version['name']} from {release} ({source}), "
                    "made strict by deploy/schemas/crd-to-jsonschema.py",
        **schema,
    }
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(sys.argv[1:])
