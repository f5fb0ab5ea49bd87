"""Run a notebook through nbclient (ipykernel) and through a headlesnb `Kernel`, and compare them cell by cell.

Both runs start from a copy of the notebook's folder in a fresh temporary folder (so notebooks that write
files leave the repo alone, and relative paths work). A run is stored as a list with one entry per cell:
`None` for a cell that was not executed (markdown, empty, `skip-execution`, after the kernel died), else
`{'execution_count': n, 'outputs': [...]}`; plus the error that ended the run early, if any.

Comparison normalises what changes from one run to the next (see `normalise`) and nothing else: the order
of outputs, their types, mime bundles, metadata, stream names, tracebacks (with their colour codes) and
execution counts must match.

nbclient's runs (the references) are made in the same environment as the runs they are compared with, and cached
under ~/.cache/headlesnb/conformance/FINGERPRINT/ (FINGERPRINT: Python and every installed distribution's version;
each file names its notebook's digest), so an upgrade or an edited notebook gets new ones (`make_refs`).

Usable as a script:
    python tests/conformance/harness.py [--before] [NOTEBOOK ...]   # compare (all notebooks by default)
`--backend=NAME` picks a kernel of FACTORIES (default inprocess); `--full` shows where outputs differ.
`--before` uses the in-process kernel's pre-conformance constructor arguments (for a headlesnb that lacks
`output_limit=None` and `main_thread`): that is how the "before" figure was measured against main.
"""
import contextlib, functools, hashlib, json, os, queue, re, shutil, subprocess, sys, tempfile, threading, time, traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
# One python3 kernelspec for nbclient and for headlesnb's kernel processes, whatever this machine has installed:
# an installed spec may add -Xfrozen_modules=off (for the debugger), which changes how tracebacks through the
# standard library read. jupyter_client runs "python" as this very interpreter.
os.environ['JUPYTER_PATH'] = os.pathsep.join(filter(None, [str(HERE / 'jupyter'), os.environ.get('JUPYTER_PATH')]))
CORPUS, PROBES = HERE / 'corpus', HERE / 'probes'
REF_FORMAT = 1  # raise it when run_nbclient stores its runs differently: every cached reference is then made again
CELL_TIMEOUT = 60
# Both kernels' processes get one string hash seed: set orders (in reprs, and inside IPython's traceback
# rendering, which picks the context lines it shows through sets) would otherwise vary from run to run.
HASH_SEED = '0'

# ---------------------------------------------------------------------------------------------------------
# Which notebooks, and what is known about them

# Notebooks that cannot run here at all (each one with the reason). They are neither run nor compared.
EXCLUDED = {
    'papermill/papermill/tests/notebooks/notimplemented_translator.ipynb': 'an R notebook (no R kernel here)',
    'ipython/examples/Index.ipynb': 'no code cells',
    'ipython/tools/tests/heartbeat/gilsleep.ipynb': 'holds the GIL in C for minutes to test the heartbeat',
    'nbclient/binder/run_nbclient.ipynb': 'downloads notebooks from the network',
    'ipython/examples/IPython Kernel/Background Jobs.ipynb': 'starts jobs that sleep for minutes and print into later cells at times that vary',
    'ipython/examples/IPython Kernel/Trapezoid Rule.ipynb': 'needs the `cython` package (%load_ext Cython): not installed here',
    'ipython/examples/Embedding/Index.ipynb': 'runs an IPython embedded in a Qt console (%gui qt)',
    'nbclient/tests/files/Interrupt.ipynb': 'an endless loop that nbclient\'s own tests stop by timing out the cell',
    'papermill/papermill/tests/notebooks/keyboard_interrupt.ipynb': 'runs until the cell times out (60 s): nbclient reports a timeout with a KeyboardInterrupt output and CellTimeoutError, headlesnb with an ExecutionTimeout output, by design',
    'ipython/examples/IPython Kernel/Script Magics.ipynb': 'reads from background scripts (%%script --bg) in a loop that never ends here: nbclient times out after minutes',
}

# Notebooks that plot random numbers (no seed): their images differ from run to run, so image data is
# replaced by a placeholder before comparing (everything else in them is still compared).
RANDOM_IMAGES = {
    'ipython/examples/IPython Kernel/Custom Display Logic.ipynb': 'np.random.randn histograms and scatter plots',
}

# Cells whose text shows the state of the machine, which changes between any two runs: their text is
# replaced by a placeholder (output types and stream names are still compared).
VOLATILE_CELLS = {
    'ipython/examples/IPython Kernel/Beyond Plain Python.ipynb': {48: '!df -h: disk usage'},
    'nbclient/binder/empty_notebook.ipynb': {2: 'a DataFrame of np.random.randn numbers', 3: 'the scrap of those numbers', 6: 'a plot of them'},
}

# Cells that kill their kernel, per notebook: nbclient stores the cell's count only when the kernel's execute_input
# reached it before the kernel died (one environment's reference has it, others do not), so such a cell with no
# outputs is compared as not stored.
DYING_CELLS = {'nbclient/tests/files/Autokill.ipynb': {0: 'os.kill(os.getpid(), signal.SIGTERM)'}}

# Per-notebook timeouts (seconds per cell) where the default does not fit.
TIMEOUTS = {'ipython/examples/IPython Kernel/Beyond Plain Python.ipynb': 300}  # %timeit cells: over 60 s on a loaded machine

# Notebooks whose nbclient run takes much longer than most (seconds, roughly): make_refs starts them first.
SLOW = {'ipython/examples/IPython Kernel/Beyond Plain Python.ipynb': 35, 'ipython/examples/IPython Kernel/Cell Magics.ipynb': 25,
        'ipython/examples/IPython Kernel/Animations Using clear_output.ipynb': 20, 'execnb/nbs/00_shell.ipynb': 15}

# Cells whose output an in-process kernel cannot give as Jupyter does, per notebook: {cell index: why}.
# The test checks that exactly these cells differ, so a fixed difference (or a new one) is noticed.
INPROCESS_EXPECTED = {
    # get_ipython().kernel: there is no kernel object with sockets and a session in-process
    'nbclient/tests/files/update-display-id.ipynb': {i: 'sends messages on get_ipython().kernel.iopub_socket' for i in range(1, 6)},
    # a kernel process with a connection file: consoles can connect to ipykernel, not to an in-process kernel
    'ipython/examples/IPython Kernel/Beyond Plain Python.ipynb': {
        81: '%connect_info prints the connection file (in-process: a warning that there is none)',
        83: '%qtconsole starts a console connected to the kernel (in-process: nothing to connect to)'},
    # GUI event loops are run by the kernel process's own loop
    'ipython/examples/IPython Kernel/Terminal Usage.ipynb': {7: '%gui qt: ipykernel tries to start a Qt loop and logs that Qt is missing'},
    # the kernel's process is the host's
    'nbclient/tests/files/Autokill.ipynb': {-1: 'the cell sends SIGTERM to its own process: the host stops (its outputs so far '
                                                'written, as nbclient stores the cell: nothing), not a kernel'},
}

# What a kernel process stores differently from nbclient, on purpose
SUBPROCESS_EXPECTED = {
    'ipython/examples/IPython Kernel/Beyond Plain Python.ipynb': {81: "%connect_info prints the kernel's connection info: our launcher "
                                                                      "names a jupyter_session and keeps no connection file to point at"},
    'nbclient/tests/files/Autokill.ipynb': {0: "the kernel kills itself: headlesnb gives the cell a clear 'kernel died' error "
                                               "(issue 14), where nbclient stores nothing and raises DeadKernelError"},
}

# ---------------------------------------------------------------------------------------------------------
def notebooks(include_excluded=False) -> list[str]:
    "Corpus and probe notebooks, as paths relative to tests/conformance"
    found = sorted(str(p.relative_to(HERE)) for d in (CORPUS, PROBES) for p in d.rglob('*.ipynb')
                   if '.ipynb_checkpoints' not in p.parts)
    return [n for n in found if include_excluded or _key(n) not in EXCLUDED]

def _key(rel:str) -> str:
    "The name a notebook has in the tables above: its path under corpus/ (or probes/...)"
    return rel.removeprefix('corpus/')

def digest(rel:str) -> str: return hashlib.sha256((HERE / rel).read_bytes()).hexdigest()[:16]

@functools.cache
def environment() -> dict:
    """What nbclient's runs depend on besides the notebook: the Python, and every installed distribution (IPython,
    ipykernel, jupyter_client, nbclient, pygments, pandas, matplotlib, ... and whatever a notebook imports)"""
    from importlib.metadata import distributions
    dists = {f"{d.metadata['Name']}=={d.version}".lower().replace('_', '-') for d in distributions() if d.metadata['Name']}
    return {'format': REF_FORMAT, 'python': sys.version, 'distributions': sorted(d for d in dists if not d.startswith('headlesnb=='))}

def refs_dir() -> Path:
    "The cache of nbclient's runs for this environment (its fingerprint names the folder)"
    env = environment()
    fp = hashlib.sha256(json.dumps(env, sort_keys=True).encode()).hexdigest()[:16]
    d = Path(os.environ.get('XDG_CACHE_HOME') or Path.home() / '.cache') / 'headlesnb' / 'conformance' / fp
    if not (d / 'environment.json').exists():  # says what the fingerprint stands for
        d.mkdir(parents=True, exist_ok=True)
        _write_atomic(d / 'environment.json', json.dumps(env, indent=1) + '\n')
    return d

def ref_path(rel:str) -> Path: return refs_dir() / f"{_key(rel).replace('/', '__').removesuffix('.ipynb')}-{digest(rel)}.json"

def _write_atomic(path:Path, text:str):
    "Readers (another test session, another worker) see the whole file or none"
    tmp = path.with_name(f'.{path.name}.{os.getpid()}.tmp')
    tmp.write_text(text)
    os.replace(tmp, path)

@contextlib.contextmanager
def _workdir(rel:str):
    "A temporary copy of the notebook's folder; yields (folder, notebook path in it)"
    src = HERE / rel
    with tempfile.TemporaryDirectory(prefix='hnb-conf-') as tmp:
        dst = Path(tmp) / 'nb'
        shutil.copytree(src.parent, dst, ignore=shutil.ignore_patterns('*.ipynb_checkpoints', '__pycache__'))
        yield dst, dst / src.name

def _executable(cell) -> bool:
    return cell.cell_type == 'code' and cell.source.strip() and 'skip-execution' not in cell.metadata.get('tags', [])

# ---------------------------------------------------------------------------------------------------------
# The two ways of running a notebook

def run_nbclient(rel:str, timeout:float|None=None) -> dict:
    "Execute with nbclient and the python3 kernelspec (ipykernel), every cell even after errors"
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import DeadKernelError, CellTimeoutError
    with _workdir(rel) as (wd, path):
        nb = nbformat.read(path, as_version=4)
        for c in nb.cells:
            if _executable(c): c.execution_count, c.outputs = None, []  # so cells it never reached are told apart
        client = NotebookClient(nb, timeout=timeout or TIMEOUTS.get(_key(rel), CELL_TIMEOUT), kernel_name='python3',
                                allow_errors=True, resources={'metadata': {'path': str(wd)}})
        error = None
        env = os.environ.pop('PYTEST_CURRENT_TEST', None)  # ipykernel watches fds unless it thinks it is under pytest
        seed, os.environ['PYTHONHASHSEED'] = os.environ.get('PYTHONHASHSEED'), HASH_SEED
        try: client.execute()
        except (DeadKernelError, CellTimeoutError, RuntimeError) as e: error = type(e).__name__
        finally:
            if env is not None: os.environ['PYTEST_CURRENT_TEST'] = env
            if seed is None: os.environ.pop('PYTHONHASHSEED')
            else: os.environ['PYTHONHASHSEED'] = seed
        cells = []
        for c in nb.cells:
            ran = _executable(c) and (c.execution_count is not None or bool(c.outputs))
            cells.append({'execution_count': c.execution_count, 'outputs': c.outputs} if ran else None)
        return normalise_run({'cells': cells, 'error': error}, wd)

class _Cell(dict):
    "A notebook cell read as plain JSON (nbformat is not imported where kernels run: see `_read`)"
    __getattr__ = dict.__getitem__

def _read(path) -> list:
    """The cells of a notebook, without nbformat: importing it (its fastjsonschema) changes how IPython's tracebacks
    show context lines, in the whole process; an ipykernel never imports it"""
    cells = json.loads(Path(path).read_text())['cells']
    return [_Cell(c, source=''.join(c['source']) if isinstance(c['source'], list) else c['source'], metadata=c.get('metadata', {}))
            for c in cells]

def run_kernel(rel:str, make_kernel, timeout:float|None=None, progress=None) -> dict:
    from headlesnb.base import apply_display_updates
    """Execute with a headlesnb `Kernel` made by `make_kernel(cwd)`, as `headlesnb run --allow-errors` does:
    cell by cell in order, `skip-execution` honoured; a kernel that exits (ipykernel shuts down, and nbclient
    stops with DeadKernelError) ends the run the same way"""
    with _workdir(rel) as (wd, path):
        nb_cells = _read(path)
        kernel, cells, error, exited = make_kernel(wd), [], None, False
        try:
            for c in nb_cells:
                if error or not _executable(c): cells.append(None); continue
                if exited: error = 'DeadKernelError'; cells.append(None); continue  # nbclient finds the kernel gone
                if progress: progress(normalise_run({'cells': cells + [None] * (len(nb_cells) - len(cells)), 'error': 'HostDied'}, wd))
                r = kernel.run(c.source, timeout=timeout or TIMEOUTS.get(_key(rel), CELL_TIMEOUT))
                cells.append({'execution_count': r.execution_count, 'outputs': r.outputs})
                apply_display_updates(cells, r.display_updates)  # a display of an earlier cell, updated by this one
                if r.status == 'timeout': error = 'CellTimeoutError'
                if r.status == 'dead': error = 'DeadKernelError'  # nbclient stops there too
                exited = any(p.get('source') == 'ask_exit' for p in getattr(r, 'payload', None) or [])
        finally: kernel.close()
        return normalise_run({'cells': cells, 'error': error}, wd)

# ---------------------------------------------------------------------------------------------------------
# Normalising what varies from run to run

_SUBS = [  # (pattern, replacement), applied to every string of every output, in order
    (re.compile(r'/tmp/ipykernel_\d+/'), '/tmp/ipykernel_PID/'),           # ipykernel's cell files name the pid
    (re.compile(r'(~|/)[^\s\x1b\'"]*?/site-packages/'), 'SITE/'),            # where packages are installed (a venv, ~/.pyenv, ...)
    (re.compile(r'(~|/)[^\s\x1b\'"]*?/bin/'), 'BIN/'),                      # where their commands are (a venv's bin/: references outlive the venv)
    (re.compile(r'/tmp/tmp[\w-]+'), '/tmp/TMP'),                           # tempfile names
    (re.compile(r'0x[0-9a-fA-F]{6,16}'), '0xADDR'),                        # memory addresses in reprs
    (re.compile(r'\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(\.\d+)?(\+\d\d:\d\d|Z)?'), 'DATETIME'),
    # times (µs: IPython 8's micro sign, μs: IPython 9's Greek mu)
    (re.compile(r'(CPU times: |Wall time: |user |sys: |total: )[\d.]+(?:e[+-]\d+)? ?(ns|µs|μs|us|ms|s|min)\b'), r'\1T'),
    (re.compile(r'[\d.]+(?:e[+-]\d+)? ?(ns|µs|μs|us|ms|s) ± [\d.]+(?:e[+-]\d+)? ?(ns|µs|μs|us|ms|s) per loop \(mean ± std\. dev\. of \d+ runs?, [\d,]+ loops? each\)'), 'TIMEIT'),
    (re.compile(r'kernel-[0-9a-f-]{36}\.json'), 'kernel-ID.json'),         # connection files
    (re.compile(r'"(shell|iopub|stdin|control|hb)_port": \d+'), r'"\1_port": PORT'),  # %connect_info (a kernel process's ports)
    (re.compile(r'"key": "[0-9a-f-]+"'), '"key": "KEY"'),
    (re.compile(r'[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}'), 'UUID'),  # random ids (uuid4) in HTML
    (re.compile(r'display_id=[0-9a-f]{32}'), 'display_id=ID'),            # DisplayHandle's random ids
    (re.compile(r'The slowest run took [\d.]+ times longer than the fastest\. This could mean that an intermediate result is being cached\.\n'), ''),  # %timeit, by chance
]

def _norm_str(s:str, wd) -> str:
    if wd: s = s.replace(wd, '<DIR>').replace(os.path.realpath(wd), '<DIR>')
    for rx, rep in _SUBS: s = rx.sub(rep, s)
    return s

def _norm(v, wd):
    if isinstance(v, str): return _norm_str(v, wd)
    if isinstance(v, list):
        if v and all(isinstance(x, str) for x in v): return _norm_str(''.join(v), wd)  # nbformat's lines, joined
        return [_norm(x, wd) for x in v]
    if isinstance(v, dict): return {k: _norm(x, wd) for k, x in v.items() if k != 'transient'}
    return v

def normalise_outputs(outputs:list, wd) -> list:
    """Outputs with volatile text replaced, each text joined from its lines, `traceback` kept as a list, and
    consecutive stream outputs of the same name merged (before the text is normalised, as a path may be cut in
    two): where ipykernel splits a stream depends on timing (it sends buffered text every 0.2 s), so the split
    itself varies from run to run"""
    wd, merged, res = str(wd) if wd else None, [], []
    join = lambda t: t if isinstance(t, str) else ''.join(t)
    for o in outputs:
        if o['output_type'] == 'stream' and merged and merged[-1]['output_type'] == 'stream' and merged[-1]['name'] == o['name']:
            merged[-1] = {**merged[-1], 'text': join(merged[-1]['text']) + join(o['text'])}
        else: merged.append(o)
    for o in merged:
        o = dict(o)
        tb = o.pop('traceback', None)
        o = _norm(o, wd)
        if tb is not None: o['traceback'] = [_norm_str(x, wd) for x in tb]
        res.append(o)
    return res

def streams_apart(run:dict) -> dict:
    """`fronts.run` with each run of consecutive stream outputs reordered stdout first, then stderr (for kernel processes):
    ipykernel sends stdout and stderr from separate buffers, each flushed on its own timer, so which of the two
    comes first between two other outputs depends on timing (nbclient's own runs vary so on a loaded machine)"""
    def reorder(outs):
        res, i = [], 0
        while i < len(outs):
            j = i
            while j < len(outs) and outs[j]['output_type'] == 'stream': j += 1
            if j == i: res.append(outs[i]); i += 1
            else: res += sorted(outs[i:j], key=lambda o: o['name'] != 'stdout'); i = j
        return res
    cells = [None if c is None else {**c, 'outputs': reorder(c['outputs'])} for c in run['cells']]
    return {**run, 'cells': cells}

def _no_images(o:dict) -> dict:
    if 'data' not in o: return o
    return {**o, 'data': {k: '<IMAGE>' if k.startswith('image/') else v for k, v in o['data'].items()}}

def _no_text(o:dict) -> dict:
    if o['output_type'] == 'stream': return {**o, 'text': '<VOLATILE>'}
    return {**o, 'data': {k: '<VOLATILE>' for k in o['data']}} if 'data' in o else o

def normalise_run(run:dict, wd=None, rel:str|None=None) -> dict:
    "A run with every output normalised (idempotent: stored references are normalised again when compared)"
    random_images = rel is not None and _key(rel) in RANDOM_IMAGES
    volatile = VOLATILE_CELLS.get(_key(rel), {}) if rel else {}
    def outs(i, c):
        os_ = normalise_outputs(c['outputs'], wd)
        if random_images: os_ = [_no_images(o) for o in os_]
        return [_no_text(o) for o in os_] if i in volatile else os_
    dying = DYING_CELLS.get(_key(rel), {}) if rel else {}
    cells = [None if c is None or i in dying and not c['outputs'] else {'execution_count': c['execution_count'], 'outputs': outs(i, c)}
             for i, c in enumerate(run['cells'])]
    return {'cells': cells, 'error': run['error']}

# ---------------------------------------------------------------------------------------------------------
def diff(ref:dict, got:dict, rel:str|None=None) -> dict:
    "{cell index: short description} of the cells that differ (index -1: how the run ended)"
    ref, got, d = normalise_run(ref, rel=rel), normalise_run(got, rel=rel), {}
    if ref['error'] != got['error']: d[-1] = f"run ended with {got['error']}, nbclient's with {ref['error']}"
    for i, (a, b) in enumerate(zip(ref['cells'], got['cells'])):
        if a == b: continue
        if a is None or b is None: d[i] = 'not run by ' + ('nbclient' if a is None else 'headlesnb'); continue
        if a['execution_count'] != b['execution_count']: d[i] = f"count {b['execution_count']} != {a['execution_count']}"; continue
        ta, tb = [o['output_type'] for o in a['outputs']], [o['output_type'] for o in b['outputs']]
        if ta != tb: d[i] = f'outputs {tb} != {ta}'; continue
        k = next(j for j, (x, y) in enumerate(zip(a['outputs'], b['outputs'])) if x != y)
        d[i] = f'output {k} ({ta[k]}) differs'
    return d

def load_ref(rel:str) -> dict|None:
    "nbclient's run of `rel` in this environment, if cached"
    p = ref_path(rel)
    return json.loads(p.read_text()) if p.exists() else None

def save_ref(rel:str, run:dict):
    _write_atomic(ref_path(rel), json.dumps({'notebook': _key(rel), 'digest': digest(rel), **run}, indent=1, ensure_ascii=False) + '\n')

def make_refs(rels:list, jobs:int|None=None, progress=None) -> dict:
    """Run each notebook of `rels` through nbclient and cache the runs: `jobs` worker processes (default: one per
    core) take the notebooks one at a time, slowest first. Workers are processes of their own because nbformat,
    which nbclient imports, must stay out of the processes that run in-process kernels (see `_read`); each one
    runs many notebooks, as importing nbclient costs seconds. Returns {notebook: why} for those that failed;
    calls `progress(rel, seconds)` after each."""
    todo, failed = queue.SimpleQueue(), {}
    for rel in sorted(rels, key=lambda r: -SLOW.get(_key(r), 0)): todo.put(rel)
    def work():
        p = log = None
        try:
            while True:
                try: rel = todo.get_nowait()
                except queue.Empty: return
                if p is None:
                    log = tempfile.TemporaryFile('w+')
                    p = subprocess.Popen([sys.executable, __file__, '--nbclient'], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=log, text=True, cwd=HERE)
                t = time.monotonic()
                p.stdin.write(rel + '\n'); p.stdin.flush()
                if not (reply := p.stdout.readline()):  # the worker died: the next notebook gets a new one
                    log.seek(0); failed[rel] = f'the nbclient worker died (exit {p.wait()}):\n{log.read()[-4000:]}'
                    log.close(); p = log = None
                elif reply != 'ok\n': failed[rel] = json.loads(reply)
                if progress: progress(rel, time.monotonic() - t)
        finally:
            if p is not None: p.stdin.close(); p.wait()
            if log is not None: log.close()
    workers = [threading.Thread(target=work) for _ in range(jobs or os.cpu_count() or 1)]
    for w in workers: w.start()
    for w in workers: w.join()
    return failed

def _nbclient_worker():
    "make_refs' worker: reads notebook names, one a line; caches nbclient's run of each; answers ok or the error (JSON)"
    reply = os.fdopen(os.dup(1), 'w')
    os.dup2(2, 1)  # anything else printed goes to the log
    for line in sys.stdin:
        rel = line.rstrip('\n')
        try: save_ref(rel, run_nbclient(rel)); reply.write('ok\n')
        except Exception: reply.write(json.dumps(f'nbclient failed: {traceback.format_exc()[-4000:]}') + '\n')
        reply.flush()

def inprocess_factory(before:bool=False):
    "The in-process kernel as `headlesnb run` makes it (png figures like ipykernel's default, no output cap, main thread)"
    from headlesnb.kernels.inprocess import InProcessKernel
    if before: return lambda wd: InProcessKernel(cwd=wd, mpl_format='png', output_limit=10**9)
    return lambda wd: InProcessKernel(cwd=wd, mpl_format='png', output_limit=None, main_thread=True)

def subprocess_factory():
    from headlesnb.kernels.subkernel import SubprocessKernel
    return lambda wd: SubprocessKernel(cwd=wd)

FACTORIES = {'inprocess': inprocess_factory, 'inprocess-before': lambda: inprocess_factory(before=True),
             'subprocess': subprocess_factory}

def run_isolated(rel:str, backend:str='inprocess', timeout:float|None=None) -> dict:
    """`run_kernel` in a fresh Python process, as `headlesnb run` runs one notebook per process: in-process
    kernels share their process, and what one notebook imports or sets (matplotlib changes how IPython's
    tracebacks highlight code, rcParams, logging handlers, ...) would otherwise leak into the next"""
    import subprocess
    with tempfile.TemporaryDirectory(prefix='hnb-conf-out-') as tmp:
        out = Path(tmp) / 'run.json'
        args = [sys.executable, __file__, '--run', backend, rel, str(out)] + ([f'--timeout={timeout}'] if timeout else [])
        p = subprocess.run(args, capture_output=True, text=True, cwd=tmp, timeout=1800, env={**os.environ, 'PYTHONHASHSEED': HASH_SEED})
        if not out.exists(): raise RuntimeError(f'{rel} ({backend}) failed (exit {p.returncode}):\n{p.stderr[-4000:]}{p.stdout[-2000:]}')
        return json.loads(out.read_text())  # after a cell that killed the process: the cells before it, error HostDied

def _first_difference(a, b, path='') -> str:
    "Where two normalised values first differ, with some context"
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if a.get(k) != b.get(k): return _first_difference(a.get(k), b.get(k), f'{path}.{k}')
    if isinstance(a, list) and isinstance(b, list):
        for j, (x, y) in enumerate(zip(a, b)):
            if x != y: return _first_difference(x, y, f'{path}[{j}]')
        return f'{path}: length {len(b)} != {len(a)}'
    if isinstance(a, str) and isinstance(b, str):
        j = next((j for j, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        return f'{path} at {j}: nbclient {a[max(0, j - 80):j + 120]!r}\n      headlesnb {b[max(0, j - 80):j + 120]!r}'
    return f'{path}: nbclient {str(a)[:300]!r}\n      headlesnb {str(b)[:300]!r}'

def describe(diffs:dict, rel:str, ref:dict, got:dict, full=False) -> str:
    lines = [f'{rel}:']
    for i, what in sorted(diffs.items()):
        lines.append(f'  cell {i}: {what}')
        if full and i >= 0 and ref['cells'][i] and got['cells'][i]:
            lines.append('    ' + _first_difference(ref['cells'][i], got['cells'][i]))
    return '\n'.join(lines)

def main(argv):
    if argv[:1] == ['--nbclient']: return _nbclient_worker()
    if argv[:1] == ['--run']:  # the child of run_isolated: --run BACKEND NOTEBOOK OUT [--timeout=S]
        t = next((float(a.split('=')[1]) for a in argv if a.startswith('--timeout=')), None)
        out = Path(argv[3])
        def save(run): out.write_text(json.dumps(run, ensure_ascii=False))  # as it goes: a cell may kill the process
        save(run_kernel(argv[2], FACTORIES[argv[1]](), t, progress=save))
        return
    full = '--full' in argv
    backend = 'inprocess-before' if '--before' in argv else next((a.split('=')[1] for a in argv if a.startswith('--backend=')), 'inprocess')
    names = [a for a in argv if not a.startswith('--')] or notebooks()
    if missing := [r for r in names if load_ref(r) is None]:
        print(f'making nbclient references for {len(missing)} notebooks in {refs_dir()}', flush=True)
        for rel, why in make_refs(missing).items(): print(f'{rel}: {why}')
    same, differ = [], {}
    for rel in names:
        ref = load_ref(rel)
        if ref is None: continue
        t = time.monotonic()
        got = run_isolated(rel, backend)
        d = diff(ref, got, rel)
        if d: differ[rel] = d; print(describe(d, rel, normalise_run(ref, rel=rel), normalise_run(got, rel=rel), full), f'({time.monotonic() - t:.1f}s)', flush=True)
        else: same.append(rel)
    print(f'\n{len(same)} identical, {len(differ)} different, of {len(same) + len(differ)} notebooks')

if __name__ == '__main__': main(sys.argv[1:])
