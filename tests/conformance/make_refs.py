"""Regenerate the cached nbclient (ipykernel) runs in refs/ for notebooks whose reference is missing or stale.

    python tests/conformance/make_refs.py [--all] [NOTEBOOK ...]

Run it after changing the corpus or the probes (the test refuses a reference whose notebook digest differs),
or with --all after upgrading ipykernel/IPython. It runs outside pytest, as a user's Jupyter would."""
import sys, time
from harness import notebooks, load_ref, run_nbclient, save_ref

def main(argv):
    names = [a for a in argv if not a.startswith('--')] or notebooks()
    for rel in names:
        if '--all' not in argv and load_ref(rel) is not None: continue
        t = time.monotonic()
        run = run_nbclient(rel)
        save_ref(rel, run)
        print(f'{rel}: {sum(c is not None for c in run["cells"])} cells run, ended {run["error"] or "normally"} ({time.monotonic() - t:.1f}s)', flush=True)

if __name__ == '__main__': main(sys.argv[1:])
