"""Make nbclient's (ipykernel's) runs of the conformance notebooks: the references the suite compares with.

    python tests/conformance/make_refs.py [--all] [-jN] [NOTEBOOK ...]

They are cached for this environment (see harness.refs_dir) and made by the test session itself when missing, so
this is only needed to make them ahead of time, or again (--all). -jN runs N notebooks at a time (default: one
per core). It runs outside pytest, as a user's Jupyter would."""
import sys, time
from harness import notebooks, load_ref, make_refs, refs_dir

def main(argv):
    names = [a for a in argv if not a.startswith('-')] or notebooks()
    jobs = next((int(a[2:]) for a in argv if a.startswith('-j')), None)
    todo = names if '--all' in argv else [r for r in names if load_ref(r) is None]
    print(f'{len(todo)} of {len(names)} notebooks to run through nbclient, into {refs_dir()}', flush=True)
    t = time.monotonic()
    failed = make_refs(todo, jobs, progress=lambda rel, s: print(f'{rel}: {s:.1f}s', flush=True))
    for rel, why in failed.items(): print(f'{rel}: {why}')
    print(f'{len(todo) - len(failed)} made, {len(failed)} failed, in {time.monotonic() - t:.0f}s')
    return 1 if failed else 0

if __name__ == '__main__': sys.exit(main(sys.argv[1:]))
