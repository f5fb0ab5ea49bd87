"""The live tree page of agents (`agent_routes`, mounted by `headlesnb serve`): a real uvicorn server on 127.0.0.1,
httpx for the HTTP surface and the event stream, and headless Chromium (playwright) for the page itself."""
import json, threading, time

import httpx, pytest, uvicorn
from starlette.applications import Starlette

from headlesnb.agents.tree import AgentManager, SessionStore
from conftest import free_port

pytestmark = pytest.mark.timeout(120)
EVIL = '<img src=x onerror="window.pwned=1">"quoted" & <b>bold</b>'


@pytest.fixture
def site(tmp_path):
    "A server with only the agents' routes, over a root holding three sessions (one with a hostile task)"
    root = tmp_path / 'proj'
    root.mkdir()
    st = SessionStore(root)
    st.create('', dict(task=EVIL, state='running', agent='claude-code', activity='needs input', created_at='2026-01-01T00:00:00'))
    st.create('0', dict(task='child', parent='0', state='done', agent='dialog', result='<script>window.pwned=2</script>', created_at='2026-01-01T00:00:00'))
    st.create('', dict(task='second', state='running', agent='claude-code', created_at='2026-01-01T00:00:00'))
    am = AgentManager(root, tmux=False)
    am._check_alive = lambda sessions: False  # these sessions have no workers: keep them "running" for the page
    from headlesnb.fronts.server_app import agent_routes
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(Starlette(routes=agent_routes(am, poll_every=0.1)), host='127.0.0.1', port=port, log_level='warning'))
    t = threading.Thread(target=server.run, daemon=True)
    t.start()
    url = f'http://127.0.0.1:{port}'
    for _ in range(200):
        try: httpx.get(url + '/agents/tree.json', timeout=1); break
        except httpx.HTTPError: time.sleep(0.05)
    yield url, am, st
    server.should_exit = True
    t.join(10)


def test_page_and_stream(site):
    url, am, st = site
    r = httpx.get(url + '/agents')
    assert r.status_code == 200 and r.headers['content-type'].startswith('text/html')
    csp = r.headers['content-security-policy']
    assert "script-src 'self'" in csp and 'unsafe-inline' not in csp and "frame-ancestors 'none'" in csp
    assert EVIL not in r.text and '&lt;img src=x onerror=&quot;window.pwned=1&quot;&gt;' in r.text
    assert '<script>window.pwned' not in r.text and ' on' not in r.text.split('<body>', 1)[1].replace(' onerror=&quot;', '')  # no inline handlers
    assert r.text.count('class="abort"') == 2 and 'class="attention"' in r.text and '2 running' in r.text
    # the stream: the whole tree as JSON, again whenever it changes
    with httpx.stream('GET', url + '/agents/events', timeout=10) as s:
        lines = s.iter_lines()
        def next_tree():
            for line in lines:
                if line.startswith('data: '): return json.loads(line[6:])
        first = next_tree()
        assert [n['id'] for n in first] == ['0', '1'] and first[0]['children'][0]['id'] == '0.0'
        st.transition('1', 'done', activity='', result='finished')
        second = next_tree()
        assert second[1]['status'] == 'done' and second[1]['result'] == 'finished'


def test_abort_takes_json_only(site):
    url, am, st = site
    for kw in [dict(data={'id': '1'}), dict(content='{"id": "1"}', headers={'Content-Type': 'text/plain'})]:
        r = httpx.post(url + '/agents/abort', **kw)
        assert r.status_code == 415 and 'JSON' in r.json()['error']
    assert st.read('1', 'state') == 'running'
    assert httpx.get(url + '/agents/abort').status_code == 405
    r = httpx.post(url + '/agents/abort', json={'id': '9'})
    assert r.status_code == 404 and 'no agent 9' in r.json()['error']
    assert httpx.post(url + '/agents/abort', json={'id': '../x'}).status_code == 400
    r = httpx.post(url + '/agents/abort', json={'id': '0'})
    assert r.status_code == 200 and r.json() == dict(aborted=['0'], finished=['0.0'])
    assert st.read('0', 'state') == 'aborted' and st.read('0.0', 'state') == 'done'




def test_page_in_a_browser(site, browser):
    url, am, st = site
    # the page's CSP forbids eval, which playwright's waits use; bypassing it also means escaping alone must keep
    # the hostile task from running (its onerror would run if it ever became markup)
    page = browser.new_context(bypass_csp=True).new_page()
    errors = []
    page.on('pageerror', lambda e: errors.append(str(e)))
    page.on('dialog', lambda d: d.accept())  # the abort button asks first
    page.goto(url + '/agents')
    page.wait_for_function('window.agentsReady === true', timeout=10_000)
    assert page.inner_text('li[data-id="0"] > .row .task') == EVIL  # shown as text...
    assert page.evaluate('window.pwned') is None  # ...never run
    assert page.inner_text('li[data-id="0"] > .row .activity') == '⚑ needs input'
    assert page.evaluate('document.querySelector(\'li[data-id="0"]\').classList.contains("attention")')
    # a change on disk shows up live
    st.create('', dict(task='a new one', state='running', agent='claude-code', created_at='2026-01-01T00:00:00'))
    page.wait_for_selector('li[data-id="2"]', timeout=5_000)
    assert page.inner_text('#count').startswith('3 running')
    # abort through the button
    page.click('li[data-id="1"] button.abort')
    page.wait_for_function('document.querySelector(\'li[data-id="1"] > .row .st-aborted\') !== null', timeout=5_000)
    assert st.read('1', 'state') == 'aborted'
    assert not errors and page.evaluate('window.pwned') is None
    # under the page's own CSP, its script still runs (it is a file of the site, not inline)
    strict = browser.new_page()
    strict.goto(url + '/agents')
    end = time.monotonic() + 10
    while strict.inner_text('#status') != 'live' and time.monotonic() < end: time.sleep(0.05)
    assert strict.inner_text('#status') == 'live' and strict.inner_text('li[data-id="2"] > .row .task') == 'a new one'


def test_failed_agent_is_not_a_plain_success(site):
    "An agent that ended in an error shows failed (the page and its stream's JSON), never a plain done"
    url, am, st = site
    st.transition('1', 'done', activity='', result='error: could not start: no key')
    r = httpx.get(url + '/agents')
    row = r.text.split('data-id="1"', 1)[1].split('</li>', 1)[0]
    assert '<span class="st-failed">✗ failed</span>' in row and '✓' not in row
    node = [n for n in httpx.get(url + '/agents/tree.json').json() if n['id'] == '1'][0]
    assert (node['status'], node['error']) == ('done', True)
