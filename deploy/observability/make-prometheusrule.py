#!/usr/bin/env python3
"""Writes deploy/k8s/monitoring/prometheusrule.yaml, the PrometheusRule that carries alerts.yaml's
rule groups unchanged, so that the compose fleet's Prometheus and the Prometheus Operator's
evaluate the same rules from one source:

    python3 deploy/observability/make-prometheusrule.py           # writes prometheusrule.yaml
    python3 deploy/observability/make-prometheusrule.py --check   # exit 1 if it differs

deploy/check runs --check; edit alerts.yaml, never prometheusrule.yaml.
"""
import os
import sys

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ALERTS = os.path.join(HERE, "alerts.yaml")
RULE = os.path.join(HERE, "..", "k8s", "monitoring", "prometheusrule.yaml")

HEADER = """\
# Generated from deploy/observability/alerts.yaml by deploy/observability/make-prometheusrule.py:
# edit alerts.yaml and run it again (deploy/check fails while the two differ). The rules, their
# tests and what to do about each: alerts.yaml, alerts.test.yaml, docs/operations.md.
"""


class Dumper(yaml.SafeDumper):
    """Writes as alerts.yaml does, within yamllint's rules: sequences indented under their key,
    multi-line strings (the expressions) as literal blocks, long ones folded."""

    def increase_indent(self, flow=False, indentless=False):
        return super().increase_indent(flow, False)


def _string(dumper, value):
    style = "|" if "\n" in value else ">" if len(value) > 90 else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


Dumper.add_representer(str, _string)


def render():
    groups = yaml.safe_load(open(ALERTS))["groups"]
    rule = {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {
            "name": "paypipe",
            "namespace": "paypipe",
            "labels": {"app.kubernetes.io/name": "paypipe", "app.kubernetes.io/part-of": "paypipe"},
        },
        "spec": {"groups": groups},
    }
    return HEADER + yaml.dump(rule, Dumper=Dumper, sort_keys=False, width=100, allow_unicode=True)


def main(argv):
    if argv not in ([], ["--check"]):
        sys.exit(__doc__)
    text = render()
    if argv == ["--check"]:
        current = open(RULE).read() if os.path.exists(RULE) else ""
        if current != text:
            print("deploy/k8s/monitoring/prometheusrule.yaml is not what make-prometheusrule.py generates from alerts.yaml;"
                  " run: python3 deploy/observability/make-prometheusrule.py", file=sys.stderr)
            sys.exit(1)
        return
    with open(RULE, "w") as out:
        out.write(text)


if __name__ == "__main__":
    main(sys.argv[1:])
