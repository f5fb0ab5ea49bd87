"""nbclient conformance: every notebook of tests/conformance (real notebooks nobody here wrote, and probes, one
per behaviour of issue 14) run by a headlesnb kernel must come out as nbclient + ipykernel store it, cell by
cell (outputs, their order, execution counts; volatile bits normalised, see harness.py).

nbclient's runs are cached in tests/conformance/refs (regenerate with tests/conformance/make_refs.py); a small
sample is run through nbclient again here to check that the cache still tells the truth."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / 'conformance'))
import harness  # noqa: E402

pytestmark = pytest.mark.timeout(600)


def _kernels():
    "Each backend under test (a name in harness.FACTORIES): {notebook: {cell: why}} of the differences it is allowed"
    return {'inprocess': harness.INPROCESS_EXPECTED, 'subprocess': harness.SUBPROCESS_EXPECTED}

KERNELS = _kernels()
NOTEBOOKS = harness.notebooks()


@pytest.mark.parametrize('rel', NOTEBOOKS)
@pytest.mark.parametrize('backend', list(KERNELS))
def test_notebook_comes_out_as_nbclient_stores_it(backend, rel):
    ref = harness.load_ref(rel)
    assert ref is not None, f'{rel}: no current nbclient reference: run python tests/conformance/make_refs.py'
    allowed = KERNELS[backend]
    got = harness.run_isolated(rel, backend)
    if backend == 'subprocess': ref, got = harness.streams_apart(ref), harness.streams_apart(got)  # (in-process: order is exact)
    diffs = harness.diff(ref, got, rel)
    ref, got = harness.normalise_run(ref, rel=rel), harness.normalise_run(got, rel=rel)
    expected = allowed.get(harness._key(rel), {})
    assert set(diffs) == set(expected), (
        harness.describe({i: d for i, d in diffs.items() if i not in expected}, rel, ref, got, full=True)
        + ''.join(f'\n  cell {i} was expected to differ ({why}) but is identical' for i, why in expected.items() if i not in diffs))


def test_every_notebook_has_a_reason_to_be_excluded_or_is_run():
    every = harness.notebooks(include_excluded=True)
    assert set(harness.EXCLUDED) <= {harness._key(r) for r in every}, 'an exclusion names a notebook that is gone'
    assert len(NOTEBOOKS) + len(harness.EXCLUDED) == len(every)
    for table in (harness.INPROCESS_EXPECTED, harness.TIMEOUTS, harness.RANDOM_IMAGES, harness.VOLATILE_CELLS):
        assert set(table) <= {harness._key(r) for r in NOTEBOOKS}, 'an expectation names a notebook that is not run'


SAMPLE = ['probes/probe_order.ipynb', 'corpus/nbclient/tests/files/update-display-id.ipynb', 'probes/probe_tracebacks.ipynb']

@pytest.mark.parametrize('rel', SAMPLE)
def test_cached_reference_still_matches_nbclient(rel):
    "The cache is only as good as its agreement with nbclient and ipykernel as installed now"
    ref = harness.load_ref(rel)
    assert ref is not None
    now = harness.run_nbclient(rel)
    d = harness.diff(ref, now, rel)
    assert d == {}, harness.describe(d, rel, harness.normalise_run(ref, rel=rel), harness.normalise_run(now, rel=rel), full=True)
