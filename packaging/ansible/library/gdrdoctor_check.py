#!/usr/bin/python
# -*- coding: utf-8 -*-
# gdrdoctor_check: an Ansible module that asks gdrdoctor whether a GPU node is ready for
# GPUDirect RDMA. It only reads the node (it never reports a change) and fails the host when
# the node is not ready.
# SPDX-License-Identifier: Apache-2.0

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: gdrdoctor_check
short_description: Check that a GPU node is ready for GPUDirect RDMA with gdrdoctor
version_added: "0.1.0"
description:
  - Runs C(gdrdoctor check --format json) on the target host and returns its verdict and the
    whole JSON report (see C(docs/report-json.md) in the gdrdoctor repository).
  - >-
    The host B(fails) when the node is not ready (gdrdoctor exit code 1); the failure message is
    gdrdoctor's one-line summary, for example
    "not ready: acs (acs-redirect-on-path); 8 passed, 2 skipped". The report is returned with
    the failure, so C(ignore_errors) or C(failed_when) can collect it.
  - The host also fails when gdrdoctor could not run (exit code 2, a missing binary, output that
    is not a gdrdoctor report); the message then carries gdrdoctor's standard error.
  - It only reads the node, so it never reports C(changed) and runs in check mode too. Note that
    on a live node the C(gdr-test) check moves bytes between GPU memory and the NICs (it
    changes no configuration); set O(gdr_test=false) to leave it out.
  - Reading the PCIe ACS registers needs root (config space beyond 64 bytes); without
    C(become) the C(acs) check is reported C(unknown) and the node is ready but not verified.
author:
  - gdrdoctor authors
requirements:
  - the gdrdoctor binary on the target host (on C(PATH), or given with O(binary))
options:
  binary:
    description:
      - The gdrdoctor executable. A name is looked up on the target's C(PATH) (and
        C(/usr/local/bin), C(/usr/sbin), C(/sbin)); a value containing C(/) is used as the path.
    type: str
    default: gdrdoctor
  root:
    description:
      - Read a captured copy of a node (a capture directory or C(.tar.gz) on the target host)
        instead of the live system (C(gdrdoctor --root)).
    type: path
  config:
    description:
      - Site policy file (YAML) on the target host (C(gdrdoctor --config)). Without it, gdrdoctor
        reads C(/etc/gdrdoctor/config.yaml) when it exists.
    type: path
  deadline:
    description:
      - Stop after this many seconds and report what was found (C(gdrdoctor --deadline)); checks
        that did not finish are reported unknown.
    type: int
  select:
    description:
      - Run only these checks (IDs from C(gdrdoctor list)).
    type: list
    elements: str
  skip:
    description:
      - Do not run these checks.
    type: list
    elements: str
  strict:
    description:
      - Count warnings and unknowns as failures (C(gdrdoctor check --strict)); the host then
        fails unless the node is ready and verified.
    type: bool
    default: false
  gdr_test:
    description:
      - Run the GPUDirect RDMA write test on a live node. C(false) adds C(--no-gdr-test).
    type: bool
    default: true
  gpu_probe:
    description:
      - Ask the GPU libraries (NVML, CUDA, HIP). C(true) adds C(--gpu-probe) (also with
        O(root), for a container that sees the host at O(root)); C(false) adds
        C(--no-gpu-probe); unset leaves gdrdoctor's default (probe on a live node only).
    type: bool
notes:
  - Supports check mode (it runs the same checks; it changes nothing in either mode).
  - The command that ran, with the resolved O(binary) path, is returned in RV(cmd).
  - Every field of RV(report) is described in C(docs/report-json.md) in the gdrdoctor sources.
"""

EXAMPLES = r"""
- name: Gate - hosts that are not ready for GPUDirect RDMA fail and leave the play
  gdrdoctor_check:
    deadline: 120
  become: true

- name: Collect every node's verdict without failing any host
  gdrdoctor_check:
    gdr_test: false
  become: true
  register: gdr
  failed_when: false

- name: Show the nodes that are not ready
  ansible.builtin.debug:
    msg: "{{ inventory_hostname }}: {{ gdr.summary | default(gdr.msg) }}"
  when: not (gdr.ready | default(false))

- name: Only some checks, strict, with a site policy
  gdrdoctor_check:
    select: [acs, iommu, peer-memory]
    strict: true
    config: /etc/gdrdoctor/config.yaml
  become: true

- name: Check a capture that was copied to the host
  gdrdoctor_check:
    binary: /opt/gdrdoctor/gdrdoctor
    root: /tmp/node17.tar.gz
"""

RETURN = r"""
ready:
  description: No check failed (with O(strict), none warned or was unknown either).
  returned: when gdrdoctor produced a report
  type: bool
  sample: true
verified:
  description: No check ended unknown. A ready node that is not verified passed everything
    that could be read.
  returned: when gdrdoctor produced a report
  type: bool
  sample: true
summary:
  description: gdrdoctor's one-line verdict (also the failure message of a node that is not
    ready).
  returned: when gdrdoctor produced a report
  type: str
  sample: "not ready: acs (acs-redirect-on-path); 8 passed, 2 skipped"
blocking:
  description: The checks that make the node not ready, each with its status and finding codes.
  returned: when gdrdoctor produced a report
  type: list
  elements: dict
  sample: [{"check": "acs", "status": "fail", "codes": ["acs-redirect-on-path"]}]
report:
  description: The whole JSON report (C(schema) C(gdrdoctor.report)), with every check, finding,
    fix and the node's inventory.
  returned: when gdrdoctor produced a report
  type: dict
rc:
  description: gdrdoctor's exit code (0 ready, 1 not ready, 2 could not run).
  returned: when gdrdoctor ran
  type: int
  sample: 0
cmd:
  description: The command that was run.
  returned: when gdrdoctor ran
  type: list
  elements: str
  sample: ["/usr/bin/gdrdoctor", "check", "--format", "json"]
stderr:
  description: gdrdoctor's standard error.
  returned: when gdrdoctor ran
  type: str
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule

REPORT_SCHEMA = "gdrdoctor.report"


def find_binary(module, binary):
    """The absolute path of the gdrdoctor executable, or None."""
    if "/" in binary:
        path = os.path.abspath(os.path.expanduser(binary))
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
        return None
    return module.get_bin_path(binary, required=False, opt_dirs=["/usr/local/bin", "/usr/sbin", "/sbin"])


def build_command(path, params):
    cmd = [path]
    # Global options come before the subcommand.
    if params["root"]:
        cmd += ["--root", params["root"]]
    if params["config"]:
        cmd += ["--config", params["config"]]
    if params["deadline"] is not None:
        cmd += ["--deadline", str(params["deadline"])]
    cmd += ["check", "--format", "json"]
    if params["select"]:
        cmd += ["--select", ",".join(params["select"])]
    if params["skip"]:
        cmd += ["--skip", ",".join(params["skip"])]
    if params["strict"]:
        cmd.append("--strict")
    if not params["gdr_test"]:
        cmd.append("--no-gdr-test")
    if params["gpu_probe"] is True:
        cmd.append("--gpu-probe")
    elif params["gpu_probe"] is False:
        cmd.append("--no-gpu-probe")
    return cmd


def parse_report(stdout):
    """The report as a dict, or (None, why)."""
    text = stdout.strip()
    if not text:
        return None, "gdrdoctor printed nothing on standard output"
    try:
        report = json.loads(text)
    except ValueError as e:
        return None, "gdrdoctor's output is not JSON (%s)" % e
    if not isinstance(report, dict) or report.get("schema") != REPORT_SCHEMA:
        return None, "gdrdoctor's output is not a %s object" % REPORT_SCHEMA
    verdict = report.get("verdict")
    if not isinstance(verdict, dict) or not isinstance(verdict.get("ready"), bool):
        return None, "gdrdoctor's report has no verdict.ready"
    return report, None


def main():
    module = AnsibleModule(
        argument_spec=dict(
            binary=dict(type="str", default="gdrdoctor"),
            root=dict(type="path"),
            config=dict(type="path"),
            deadline=dict(type="int"),
            select=dict(type="list", elements="str"),
            skip=dict(type="list", elements="str"),
            strict=dict(type="bool", default=False),
            gdr_test=dict(type="bool", default=True),
            gpu_probe=dict(type="bool"),
        ),
        supports_check_mode=True,
    )
    params = module.params
    result = dict(changed=False)

    if params["deadline"] is not None and params["deadline"] <= 0:
        module.fail_json(msg="deadline must be a positive number of seconds, got %d" % params["deadline"], **result)

    path = find_binary(module, params["binary"])
    if path is None:
        if "/" in params["binary"]:
            why = "%s does not exist or is not executable" % params["binary"]
        else:
            why = "%r is not on PATH (%s) nor in /usr/local/bin, /usr/sbin, /sbin" % (
                params["binary"], os.environ.get("PATH", ""))
        module.fail_json(msg="gdrdoctor binary not found: %s; install gdrdoctor on the host or set binary=" % why,
                         **result)

    cmd = build_command(path, params)
    # NO_COLOR: JSON has no colour, but keep any message on stderr plain.
    rc, stdout, stderr = module.run_command(cmd, check_rc=False, environ_update={"NO_COLOR": "1"})
    result.update(rc=rc, cmd=cmd, stderr=stderr)

    stderr_line = " ".join(stderr.strip().splitlines()) or "(nothing on standard error)"
    if rc not in (0, 1):
        module.fail_json(msg="gdrdoctor could not run (exit %d): %s" % (rc, stderr_line), stdout=stdout, **result)

    report, why = parse_report(stdout)
    if report is None:
        module.fail_json(msg="%s (exit %d): %s" % (why, rc, stderr_line), stdout=stdout, **result)

    verdict = report["verdict"]
    summary = verdict.get("summary") or ("ready" if verdict["ready"] else "not ready")
    result.update(
        ready=verdict["ready"],
        verified=bool(verdict.get("verified", False)),
        summary=summary,
        blocking=verdict.get("blocking") or [],
        report=report,
    )

    if verdict["ready"] != (rc == 0):
        module.fail_json(msg="gdrdoctor's exit code %d disagrees with its report (ready: %s): %s"
                         % (rc, verdict["ready"], summary), **result)
    if not verdict["ready"]:
        module.fail_json(msg=summary, **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
