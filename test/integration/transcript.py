"""What the integration tests' Python helpers print: one line per step a user would check, the
same on native ext4 and through a view, so that two transcripts compare as strings."""
import errno


def err(e):
    """The errno's name (EPERM), which reads the same on every machine."""
    return errno.errorcode.get(e.errno, str(e.errno))


def step(what, fn):
    """Runs fn and prints what, then ok, its result, or the error's name; returns the result."""
    try:
        r = fn()
        print(f"{what}: {'ok' if r is None else r}")
        return r
    except OSError as e:
        print(f"{what}: {err(e)}")
        return None
