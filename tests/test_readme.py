"""README.md as a tested document: every snippet runs exactly as written, every link resolves, every file it names exists.

README.md is made from nbs/index.ipynb (tools/make_readme.py). Its fenced blocks run in order, in one fresh empty
folder, each according to its language and to an optional mark: an HTML comment on the line before the fence.

| block | mark | how it runs |
|---|---|---|
| ```python | none | in one Python session (a subprocess with one namespace, so later blocks see earlier names; top-level `await` allowed, as in Jupyter and IPython), cwd the folder |
| ```python | `<!-- run: dialoghelper -->` | as a script in the real dialoghelper client's Python 3.12 venv (tests/dh_venv.py), cwd the folder, `PORT` = the port of the server started last |
| ```bash | none | `bash -e`, cwd the folder; must exit 0 |
| ```bash | `<!-- run: repo -->` | the same, cwd the repository (the main-job line needs the checkout) |
| ```bash | `<!-- run: server -->` | in the background, cwd the folder, with `PORT` a free port and `SECRET` a random token; it must answer (a check per command, see `ANSWER_CHECKS`); stopped by its process group at the end |
| any | `<!-- run: no, REASON -->` | not run (the reason is required) |
| ```json | none | must parse |
| ```toml | none | must parse |

Any other block fails the test, so a new kind of snippet has to say how it runs. Every subprocess gets this
environment's bin folder first on PATH, so `headlesnb` and `pip` are the ones under test.

Links: relative links must name files of the repository (anchors into Markdown files must exist there), `#anchor`
links a heading of the README. External links cannot be checked offline: their form is checked (http(s) with a
host) and nothing else. Files named in prose or inline code (`name.ext`) must be in the repository, be made by the
snippets, or be in `NOT_OURS` with the reason.
"""
import json, os, re, secrets, signal, subprocess, sys, time, tomllib
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

import httpx, pytest

sys.path.insert(0, str(Path(__file__).parent))
import dh_venv  # noqa: E402
from conftest import free_port  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / 'README.md'
BIN = str(Path(sys.executable).parent)

# Files the README names that are neither in the repository nor made by its snippets
NOT_OURS = {'claude_desktop_config.json': "Claude Desktop's settings file, on the reader's machine",
            'agents.toml': "the agents' configuration, which the reader writes (~/.config/headlesnb/ or ROOT/.scope/)"}

_FENCE = re.compile(r'^(```|~~~)\s*([\w+-]*)\s*$')
_MARK = re.compile(r'^<!--\s*run:\s*(.*?)\s*-->$')


@dataclass
class Block:
    n: int            # 1-based, in README order
    line: int         # line of the opening fence
    lang: str
    code: str
    mark: str = ''    # what follows `run:` in the comment before the fence, if any

    @property
    def first(self) -> str: return next((l for l in self.code.splitlines() if l.strip()), '')

    def where(self) -> str: return f'README block {self.n} (line {self.line}, {self.lang or "no language"}, first line {self.first!r})'


def parse_blocks(text: str) -> list:
    "The fenced blocks of `text`, with the run mark on the line before each"
    lines, blocks, i = text.split('\n'), [], 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m: i += 1; continue
        j = i + 1
        while j < len(lines) and lines[j].strip() != m[1]: j += 1
        if j == len(lines): raise AssertionError(f'README line {i + 1}: fence {lines[i]!r} is never closed')
        prev = next((l.strip() for l in reversed(lines[:i]) if l.strip()), '')
        mk = _MARK.match(prev)
        blocks.append(Block(len(blocks) + 1, i + 1, m[2].lower(), '\n'.join(lines[i + 1:j]), mk[1] if mk else ''))
        i = j + 1
    return blocks


def prose(text: str) -> str:
    "`text` without its fenced blocks and HTML comments"
    out, fenced = [], None
    for l in text.split('\n'):
        m = _FENCE.match(l)
        if m and fenced is None: fenced = m[1]; continue
        if fenced is not None:
            if l.strip() == fenced: fenced = None
            continue
        out.append(l)
    return re.sub(r'<!--.*?-->', '', '\n'.join(out), flags=re.S)


# ---- the Python session: one subprocess, one namespace, blocks sent one at a time

_WORKER = r'''
import ast, asyncio, inspect, json, os, sys, traceback
res = os.fdopen(int(os.environ.pop('README_RESULT_FD')), 'w')
ns, loop = {'__name__': '__main__'}, asyncio.new_event_loop()
for line in sys.stdin:
    req = json.loads(line)
    try:
        r = eval(compile(req['code'], req['name'], 'exec', flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT), ns)
        if inspect.iscoroutine(r): loop.run_until_complete(r)
        out = {'ok': True}
    except BaseException:
        out = {'ok': False, 'error': traceback.format_exc()}
    sys.stdout.flush(); sys.stderr.flush()
    res.write(json.dumps(out) + '\n'); res.flush()
'''


class PySession:
    "A Python subprocess that runs blocks in one namespace, in order"
    def __init__(self, cwd: Path, env: dict, log: Path):
        r, w = os.pipe()
        self.log = log
        self.proc = subprocess.Popen([sys.executable, '-c', _WORKER], cwd=cwd, env={**env, 'README_RESULT_FD': str(w)},
                                     stdin=subprocess.PIPE, stdout=open(log, 'w'), stderr=subprocess.STDOUT,
                                     pass_fds=(w,), text=True)
        os.close(w)
        self.results = os.fdopen(r)

    def run(self, b: Block) -> str | None:
        "None when the block ran, else the error"
        self.proc.stdin.write(json.dumps({'code': b.code, 'name': f'<README block {b.n}>'}) + '\n')
        self.proc.stdin.flush()
        line = self.results.readline()
        if not line: return f'the Python session died (exit {self.proc.wait(10)})'
        out = json.loads(line)
        return None if out['ok'] else out['error']

    def close(self):
        try: self.proc.stdin.close()
        except OSError: pass
        try: self.proc.wait(60)
        except subprocess.TimeoutExpired: self.proc.kill()


# ---- servers: started in the background, checked to answer, stopped by process group

def _serve_answers(port: int, secret: str) -> str | None:
    r = httpx.get(f'http://127.0.0.1:{port}/health', timeout=5)
    if r.status_code != 200 or r.json() != {'ok': True}: return f'/health answered {r.status_code} {r.text[:200]!r}'

def _mcp_http_answers(port: int, secret: str) -> str | None:
    init = {'jsonrpc': '2.0', 'id': 1, 'method': 'initialize',
            'params': {'protocolVersion': '2025-06-18', 'capabilities': {}, 'clientInfo': {'name': 'test_readme', 'version': '1'}}}
    hdrs = {'Accept': 'application/json, text/event-stream'}
    r = httpx.post(f'http://127.0.0.1:{port}/mcp', json=init, headers=hdrs, timeout=5)
    if r.status_code != 401: return f'POST /mcp without the token answered {r.status_code}, not 401'
    r = httpx.post(f'http://127.0.0.1:{port}/mcp', json=init, headers={**hdrs, 'Authorization': f'Bearer {secret}'}, timeout=5)
    if r.status_code != 200 or 'serverInfo' not in r.text: return f'POST /mcp with the token answered {r.status_code} {r.text[:200]!r}'

# (pattern in the block, check): the check says None when the server answers as the README says
ANSWER_CHECKS = [(re.compile(r'\bheadlesnb serve\b'), _serve_answers),
                 (re.compile(r'\bheadlesnb mcp\b.*--transport http'), _mcp_http_answers)]


@dataclass
class Server:
    block: Block
    proc: subprocess.Popen
    port: int
    log: Path

    def stop(self):
        "SIGTERM to the server's process group (bash and what it started), then SIGKILL"
        for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
            try: os.killpg(self.proc.pid, sig)
            except ProcessLookupError: return
            try: self.proc.wait(wait); return
            except subprocess.TimeoutExpired: pass


def start_server(b: Block, cwd: Path, env: dict, logs: Path) -> tuple:
    "(Server, None) once it answers, or (Server or None, error)"
    check = next((c for pat, c in ANSWER_CHECKS if pat.search(b.code)), None)
    if check is None: return None, 'no answer check for this server command: add one to ANSWER_CHECKS'
    port, log = free_port(), logs / f'server-{b.n}.log'
    env = {**env, 'PORT': str(port)}
    proc = subprocess.Popen(['bash', '-c', b.code], cwd=cwd, env=env, stdout=open(log, 'w'), stderr=subprocess.STDOUT,
                            start_new_session=True)
    srv, err, end = Server(b, proc, port, log), None, time.monotonic() + 60
    while time.monotonic() < end:
        if proc.poll() is not None: return srv, f'exited with {proc.returncode} before answering:\n{log.read_text()[-3000:]}'
        try:
            err = check(port, env['SECRET'])
            if err is None: return srv, None
        except httpx.HTTPError as e: err = f'{type(e).__name__}: {e}'
        time.sleep(0.2)
    return srv, f'did not answer within 60 s ({err}):\n{log.read_text()[-3000:]}'


# ---- running the README

@dataclass
class Run:
    folder: Path
    ran: list = field(default_factory=list)      # blocks that ran
    skipped: list = field(default_factory=list)  # (block, reason)
    failure: str | None = None


def _bash(b: Block, cwd: Path, env: dict, timeout: float) -> str | None:
    try: r = subprocess.run(['bash', '-e', '-c', b.code], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired: return f'still running after {timeout} s'
    if r.returncode: return f'exit {r.returncode}\n--- stdout:\n{r.stdout[-3000:]}\n--- stderr:\n{r.stderr[-3000:]}'


def run_readme(text: str, folder: Path, logs: Path) -> Run:
    "Run every block of `text` as the module docstring says; stop at the first failure"
    run = Run(folder)
    env = {**os.environ, 'PATH': BIN + os.pathsep + os.environ.get('PATH', ''), 'SECRET': secrets.token_hex(16)}
    env.pop('PORT', None)
    session, servers = PySession(folder, env, logs / 'python-session.log'), []
    try:
        for b in parse_blocks(text):
            err, mark = None, b.mark.split(',')[0].strip()
            if mark == 'no':
                reason = b.mark.partition(',')[2].strip()
                if not reason: err = 'marked `run: no` without a reason (`<!-- run: no, REASON -->`)'
                else: run.skipped.append((b, reason)); continue
            elif b.lang == 'python' and mark == '':
                err = session.run(b)
                if err: err += f'\n--- session output (tail):\n{session.log.read_text()[-3000:]}'
            elif b.lang == 'python' and mark == 'dialoghelper':
                if not servers: err = 'a dialoghelper block needs a server started before it'
                else:
                    py = str(dh_venv.ensure_venv())
                    denv = {**env, 'PORT': str(servers[-1].port)}
                    try: r = subprocess.run([py, '-c', b.code], cwd=folder, env=denv, capture_output=True, text=True, timeout=120)
                    except subprocess.TimeoutExpired: err = 'still running after 120 s'
                    else:
                        if r.returncode: err = f'exit {r.returncode}\n--- stdout:\n{r.stdout[-3000:]}\n--- stderr:\n{r.stderr[-3000:]}'
            elif b.lang in ('bash', 'sh') and mark == '': err = _bash(b, folder, env, 300)
            elif b.lang in ('bash', 'sh') and mark == 'repo': err = _bash(b, ROOT, env, 600)
            elif b.lang in ('bash', 'sh') and mark == 'server':
                srv, err = start_server(b, folder, env, logs)
                if srv: servers.append(srv)
                if not err: env = {**env, 'PORT': str(srv.port)}
            elif b.lang == 'json' and mark == '':
                try: json.loads(b.code)
                except ValueError as e: err = f'not JSON: {e}'
            elif b.lang == 'toml' and mark == '':
                try: tomllib.loads(b.code)
                except tomllib.TOMLDecodeError as e: err = f'not TOML: {e}'
            else: err = f'no way to run a {b.lang or "plain"} block marked {b.mark!r}: mark it (see tests/test_readme.py)'
            if err:
                run.failure = f'{b.where()} failed:\n{err}'
                break
            run.ran.append(b)
    finally:
        session.close()
        for s in servers: s.stop()
    return run


@pytest.fixture(scope='module')
def readme_run(tmp_path_factory):
    folder, logs = tmp_path_factory.mktemp('readme-folder'), tmp_path_factory.mktemp('readme-logs')
    return run_readme(README.read_text(), folder, logs)


def test_snippets_run_as_written(readme_run):
    "Every block of the README runs (or parses), in order, from an empty folder"
    assert readme_run.failure is None, readme_run.failure
    langs = {(b.lang, b.mark.split(',')[0]) for b in readme_run.ran}
    assert {('python', ''), ('python', 'dialoghelper'), ('bash', 'server'), ('bash', 'repo'), ('json', '')} <= langs, langs
    assert (readme_run.folder / 'notes' / 'today.ipynb').exists()  # the dialoghelper block made its dialog on the server


def test_blocks_not_run_say_why():
    for b in parse_blocks(README.read_text()):
        if b.mark.startswith('no'): assert b.mark.partition(',')[2].strip(), f'{b.where()}: `run: no` needs a reason'


# ---- links and file names

def slug(heading: str) -> str:
    "GitHub's anchor for a heading"
    s = re.sub(r'[^\w\- ]', '', heading.strip().lower().replace('`', ''))
    return s.replace(' ', '-')


def anchors(md: str) -> set:
    return {slug(m[1]) for m in re.finditer(r'^#{1,6}\s+(.+?)\s*#*\s*$', prose(md), re.M)}


def links(md: str) -> list:
    "Link targets of `md` outside code: [text](target), <a href=...>, <scheme://...>"
    p = re.sub(r'`[^`\n]*`', '', prose(md))
    return (re.findall(r'!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)', p)
            + re.findall(r'<a\s[^>]*href="([^"]+)"', p) + re.findall(r'<([a-z][a-z0-9+.-]*://[^>\s]+)>', p))


def link_problem(target: str, base: Path, md: str) -> str | None:
    "Why `target` (a link in the file `base`/..., whose text is `md`) does not resolve, or None"
    if target.startswith('#'):
        return None if target[1:] in anchors(md) else f'no heading for anchor {target}'
    u = urlparse(target)
    if u.scheme:
        if u.scheme in ('http', 'https') and u.netloc: return None  # form only: cannot be fetched offline
        return f'{target}: not an http(s) link with a host'
    path = (base / u.path).resolve()
    if not path.exists(): return f'{target}: no such file in the repository'
    if ROOT not in path.parents and path != ROOT: return f'{target}: outside the repository'
    if u.fragment and path.suffix == '.md' and u.fragment not in anchors(path.read_text()):
        return f'{target}: no heading for #{u.fragment} in {path.relative_to(ROOT)}'


def test_links_resolve():
    text = README.read_text()
    found = links(text)
    assert found, 'no links found: the link parser is broken'
    bad = [p for t in found if (p := link_problem(t, README.parent, text))]
    assert not bad, 'README links that do not resolve:\n' + '\n'.join(bad)


def test_docs_links_resolve():
    "The docs' own links resolve too: docs/README.md, and the markdown of nbs/index.ipynb and the explanation pages"
    import nbformat
    pages = [(ROOT / 'docs' / 'README.md', (ROOT / 'docs' / 'README.md').read_text())]
    for nb in [ROOT / 'nbs' / 'index.ipynb', *sorted((ROOT / 'nbs' / 'explanations').glob('*.ipynb'))]:
        cells = nbformat.read(str(nb), as_version=4).cells
        pages.append((nb, '\n\n'.join(c.source for c in cells if c.cell_type == 'markdown')))
    assert len(pages) > 2
    bad = [f'{path.relative_to(ROOT)}: {p}' for path, text in pages for t in links(text) if (p := link_problem(t, path.parent, text))]
    assert not bad, 'links that do not resolve:\n' + '\n'.join(bad)


_FILE = re.compile(r'(?<![\w./-])([\w][\w./-]*\.(?:md|ipynb|py|sh|toml|json|ya?ml|txt|cfg|ini))(?![\w/-])')

def repo_files() -> set:
    r = subprocess.run(['git', 'ls-files'], cwd=ROOT, capture_output=True, text=True)
    if r.returncode == 0 and r.stdout.strip(): files = r.stdout.split()
    else: files = [str(p.relative_to(ROOT)) for p in ROOT.rglob('*') if p.is_file() and '.git' not in p.parts]
    return set(files)


def test_named_files_exist(readme_run):
    "Every file the README names is in the repository, made by its snippets, or not ours (NOT_OURS)"
    tracked = repo_files()
    names = {Path(f).name for f in tracked}
    made = {str(p.relative_to(readme_run.folder)) for p in readme_run.folder.rglob('*') if p.is_file()}
    made_names = {Path(f).name for f in made}
    bad = []
    for ref in sorted(set(_FILE.findall(prose(README.read_text())))):
        if ref in NOT_OURS: continue
        if ref in tracked or (ROOT / ref).exists() or ref in made: continue
        if '/' not in ref and (ref in names or ref in made_names): continue
        bad.append(ref)
    assert not bad, f'the README names files that are neither in the repository nor made by its snippets: {bad}'


def test_readme_is_made_from_index():
    "README.md is what tools/make_readme.py makes from nbs/index.ipynb"
    r = subprocess.run([sys.executable, str(ROOT / 'tools' / 'make_readme.py'), '--check'], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-5000:] + r.stderr[-3000:]


# ---- the checker itself: a test that cannot fail is a defect

def test_checker_catches_problems(tmp_path):
    bad = '\n'.join(['<!-- run: no -->', '```bash', 'true', '```', '```ruby', 'puts 1', '```'])
    bs = parse_blocks(bad)
    assert [(b.lang, b.mark) for b in bs] == [('bash', 'no'), ('ruby', '')]
    run = run_readme(bad, tmp_path, tmp_path)
    assert 'without a reason' in run.failure
    run = run_readme('```python\nx = 1\n```\n\n```python\nprint(x)\nundefined_name\n```\n', tmp_path, tmp_path)
    assert run.failure.startswith("README block 2 (line 5, python, first line 'print(x)') failed") and 'NameError' in run.failure
    run = run_readme('```python\nimport asyncio\nawait asyncio.sleep(0)\ny = 2\n```\n```python\nassert y == 2\n```\n', tmp_path, tmp_path)
    assert run.failure is None and len(run.ran) == 2
    assert 'not JSON' in run_readme('```json\n{"a": }\n```\n', tmp_path, tmp_path).failure
    assert 'not TOML' in run_readme('```toml\na = [\n```\n', tmp_path, tmp_path).failure
    assert 'no way to run' in run_readme('```ruby\nputs 1\n```\n', tmp_path, tmp_path).failure
    assert link_problem('#nope', ROOT, '# Title\n') and link_problem('#title', ROOT, '# Title\n') is None
    assert link_problem('nbs/no_such.ipynb', ROOT, '') and link_problem('nbs/index.ipynb', ROOT, '') is None
    assert link_problem('ftp://x', ROOT, '') and link_problem('https://example.org/x', ROOT, '') is None
    assert slug('For AI assistants: the MCP server') == 'for-ai-assistants-the-mcp-server'
    assert _FILE.findall('see engine-facts.md and `nbs/10_notebook.ipynb`, not http://x/y') == ['engine-facts.md', 'nbs/10_notebook.ipynb']
