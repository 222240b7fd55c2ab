"""The checks of the Python end-to-end tests (python_memory_test.py, python_hooks_test.py): each
printed as it is made, "ok  " or "FAIL", with what it checks and a detail; the script exits 1 when
any failed. Imported from the scripts' own directory (first on sys.path when they run)."""


class Checks:
    def __init__(self):
        self.failed = 0

    def check(self, ok, what, detail=""):
        print("%s  %s  %s" % ("ok  " if ok else "FAIL", what, detail), flush=True)
        if not ok:
            self.failed += 1
