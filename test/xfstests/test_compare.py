#!/usr/bin/env python3
"""test/xfstests/compare on made-up results: a reason the rules know is classed, one they do not
fails the run, a rerun replaces an earlier result, and a test that runs on the view is not
listed. Run by meson test."""
import os
import subprocess
import sys
import tempfile

COMPARE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "compare")


def section(root, name, ran, notrun, failed):
    d = os.path.join(root, name)
    os.makedirs(os.path.join(d, "generic"))
    with open(os.path.join(d, "check.log"), "w") as f:
        f.write("SECTION -- old\nRan: generic/999\nNot run: generic/999\n")
        f.write("Ran: " + " ".join(ran) + "\n")
        if notrun:
            f.write("Not run: " + " ".join(notrun) + "\n")
        if failed:
            f.write("Failures: " + " ".join(failed) + "\n")
    for test, reason in notrun.items():
        with open(os.path.join(d, test + ".notrun"), "w") as f:
            f.write(reason + "\n")
    return d


def run(*args):
    p = subprocess.run([COMPARE, *args], capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def main():
    failures = 0

    def check(what, ok):
        nonlocal failures
        print(("ok   " if ok else "FAIL ") + what)
        failures += not ok

    with tempfile.TemporaryDirectory() as root:
        tests = ["generic/001", "generic/002", "generic/003", "generic/004"]
        native = section(root, "ext4", tests, {}, ["generic/004"])
        view = section(root, "acl", tests, {
            "generic/001": "fuse does not support shutdown",
            "generic/002": "xfs_io label failed (old kernel/wrong fs?)",
        }, [])
        rerun = section(root, "acl-rerun", ["generic/002"], {}, [])
        rules = os.path.join(root, "rules")
        with open(rules, "w") as f:
            f.write("# a comment\nkernel\tdoes not support shutdown\tno FS_IOC_SHUTDOWN\n")

        rc, out = run("--native", native, "--view", "acl=" + view, "--reasons", rules)
        check("an unknown reason fails the run", rc == 1)
        check("it is shown as UNEXPLAINED with its text",
              "| generic/002 | not run | UNEXPLAINED | xfs_io label failed" in out)
        check("a known reason is classed and explained",
              "| generic/001 | not run | kernel | no FS_IOC_SHUTDOWN |" in out)
        check("a test that runs on the view is not in the list", "| generic/003 |" not in out)
        check("counts: native ran 4, failed 1",
              "| ext4 (native) | 4 | 3 | 1 | 0 |" in out)
        check("a different result is reported",
              "generic/004 (acl): passed, natively failed" in out)

        rc, out = run("--native", native, "--view", f"acl={view},{rerun}", "--reasons", rules)
        check("a rerun that ran the test replaces the not-run result",
              rc == 0 and "| generic/002 |" not in out and "| acl | 3 | 3 | 0 | 1 |" in out)

        rc, out = run("--native", native, "--view", "acl=" + os.path.join(root, "nothing"))
        check("a directory without check.log is refused by name",
              rc != 0 and "nothing: no check.log" in out)

        with open(rules, "w") as f:
            f.write("whoever\tx\ty\n")
        rc, out = run("--native", native, "--view", "acl=" + view, "--reasons", rules)
        check("a rule with an unknown class is refused with its line",
              rc != 0 and "rules:1:" in out)
    print(f"{failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
