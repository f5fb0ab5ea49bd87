"""nbclient conformance: every notebook of tests/conformance (real notebooks nobody here wrote, and probes, one
per behaviour of issue 14) run by a headlesnb kernel must come out as nbclient + ipykernel run it, cell by cell
(outputs, their order, execution counts; volatile bits normalised, see harness.py).

nbclient's runs are made here, in the same environment, when the first comparison needs them (all the missing ones
at once, one per core) and cached per environment (harness.refs_dir): a second session reuses them, an upgrade of
anything installed or an edited notebook makes new ones. A small sample is run through nbclient again to check
that nbclient's runs, once normalised, do not change from one run to the next (the cache relies on it). headlesnb's
runs start together too, one per core, each in its own process, and each test compares one when it is done."""
import contextlib, os, sys, time
from concurrent.futures import ThreadPoolExecutor
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


def _selected(session) -> list:
    "(backend, notebook) of each selected comparison, in the order they run"
    return [(it.callspec.params['backend'], it.callspec.params['rel']) for it in session.items
            if it.path == Path(__file__) and it.originalname == 'test_notebook_comes_out_as_nbclient_runs_it']

def _say(request, line:str):
    "A progress line on the terminal, past pytest's capture (making the references takes minutes)"
    plugins = request.config.pluginmanager
    tr, cm = plugins.get_plugin('terminalreporter'), plugins.get_plugin('capturemanager')
    if tr is None: return
    with cm.global_and_fixture_disabled() if cm else contextlib.nullcontext(): tr.write_line(line)

@pytest.fixture(scope='session')
def reference(request):
    "`reference(rel)`: nbclient's run of a notebook; the first use makes, in parallel, those the cache lacks of every selected test"
    missing = [r for r in dict.fromkeys(rel for _, rel in _selected(request.session)) if harness.load_ref(r) is None]
    failed = {}
    if missing:
        t = time.monotonic()
        _say(request, f'conformance: running {len(missing)} notebooks through nbclient, into {harness.refs_dir()}')
        failed = harness.make_refs(missing)
        _say(request, f'conformance: nbclient references made in {time.monotonic() - t:.0f}s, {len(failed)} failed')
    def get(rel):
        if rel in failed: pytest.fail(f'{rel}: {failed[rel]}')
        if harness.load_ref(rel) is None and (err := harness.make_refs([rel]).get(rel)): pytest.fail(f'{rel}: {err}')  # not selected
        return harness.load_ref(rel)
    return get

@pytest.fixture(autouse=True)
def reap_children():
    "conftest's reaper would stop the runs started ahead for later tests; each run ends by itself (cell timeouts, its kernel closed)"
    yield

@pytest.fixture(scope='session')
def headlesnb_run(request, reference):
    """`headlesnb_run(backend, rel)`: the notebook's run by a headlesnb kernel. Every selected run starts at the first
    use, in test order, one per core (each is a process of its own), so a test mostly finds its run done"""
    with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        runs = {(b, rel): pool.submit(harness.run_isolated, rel, b) for b, rel in _selected(request.session)}
        yield lambda backend, rel: (runs.get((backend, rel)) or pool.submit(harness.run_isolated, rel, backend)).result()
        pool.shutdown(cancel_futures=True)


@pytest.mark.parametrize('rel', NOTEBOOKS)
@pytest.mark.parametrize('backend', list(KERNELS))
def test_notebook_comes_out_as_nbclient_runs_it(backend, rel, reference, headlesnb_run):
    ref, got = reference(rel), headlesnb_run(backend, rel)
    allowed = KERNELS[backend]
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
    for table in (harness.INPROCESS_EXPECTED, harness.SUBPROCESS_EXPECTED, harness.TIMEOUTS, harness.RANDOM_IMAGES,
                  harness.VOLATILE_CELLS, harness.SLOW, harness.DYING_CELLS):
        assert set(table) <= {harness._key(r) for r in NOTEBOOKS}, 'an expectation names a notebook that is not run'


def test_references_belong_to_this_environment_and_notebook(tmp_path, monkeypatch):
    "The cache is keyed by what nbclient's run depends on: another version of any installed package, or another notebook, is another file"
    monkeypatch.setenv('XDG_CACHE_HOME', str(tmp_path))
    rel = 'probes/probe_order.ipynb'
    here = harness.ref_path(rel)
    assert here.is_relative_to(tmp_path / 'headlesnb' / 'conformance')
    env = harness.environment()
    bumped = {**env, 'distributions': [d.replace('ipython==', 'ipython==0.') for d in env['distributions']]}
    assert bumped != env
    monkeypatch.setattr(harness, 'environment', lambda: bumped)
    assert harness.ref_path(rel).parent != here.parent
    monkeypatch.setattr(harness, 'environment', lambda: env)
    monkeypatch.setattr(harness, 'digest', lambda rel: 'another')
    assert harness.ref_path(rel).parent == here.parent and harness.ref_path(rel) != here


def test_a_path_cut_between_two_stream_outputs_is_still_normalised():
    "Where a stream is split depends on timing, so streams are merged before volatile text is replaced"
    cut = [{'output_type': 'stream', 'name': 'stdout', 'text': ['File "/venv/lib/python3.11/si']},
           {'output_type': 'stream', 'name': 'stdout', 'text': 'te-packages/click/core.py", line 1\n'}]
    assert harness.normalise_outputs(cut, None) == [{'output_type': 'stream', 'name': 'stdout', 'text': 'File "SITE/click/core.py", line 1\n'}]


SAMPLE = ['probes/probe_order.ipynb', 'corpus/nbclient/tests/files/update-display-id.ipynb', 'probes/probe_tracebacks.ipynb']

@pytest.mark.parametrize('rel', SAMPLE)
def test_nbclient_runs_the_same_twice(rel, reference, tmp_path, monkeypatch):
    "A cached reference is only as good as nbclient's runs are repeatable, once normalised"
    ref = reference(rel)
    monkeypatch.setenv('XDG_CACHE_HOME', str(tmp_path))  # a second run, into an empty cache
    assert harness.make_refs([rel]) == {}
    now = harness.load_ref(rel)
    assert harness.ref_path(rel).is_relative_to(tmp_path)
    d = harness.diff(ref, now, rel)
    assert d == {}, harness.describe(d, rel, harness.normalise_run(ref, rel=rel), harness.normalise_run(now, rel=rel), full=True)
