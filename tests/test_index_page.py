"""`headlesnb serve`'s index page in a real browser: a `headlesnb serve` subprocess and Debian's headless Chromium (playwright).

The index lists the dialogs newest first, each with its message count, the first line of its last message, its last
change ("2 h ago", the exact time in the title) and what runs or waits in it (a running cell linked to its place on the
dialog's page, the runs queued behind it). A hostile dialog (a script and an `onerror` in its last message, a file name
that is an `<img>` tag) shows as text: nothing runs, no alert opens; that name, which the server cannot open, has no
link and says why. The server and the browser are stopped by PID.
"""
import os, re, time

import pytest
from test_server import running_server  # (the same subprocess start, health wait and stop by PID)
from headlesnb.fronts.server_app import first_line

pytestmark = pytest.mark.timeout(180)
EVIL_FILE = '<img src=x onerror=alert(1)>.ipynb'
EVIL_MSG = """<script>document.body.dataset.pwned = 'script'</script><img src=x onerror="document.body.dataset.pwned = 'img'">
second line"""


def make_dialogs(root):
    "Three dialogs on disk, written before the server starts: two hours old, ten minutes old (in a folder), hostile"
    from headlesnb.dialog import DialogManager
    dm = DialogManager(root)
    dm.use_dialog('old', mode='create')
    for i in range(3): dm.add_message(f'note {i}', 'note', 'at_end', dialog_name='old')
    dm.use_dialog('sub/mid', mode='create')
    dm.add_message('print("hello")\nmore', 'code', 'at_end', dialog_name='sub/mid')
    dm.use_dialog('evil', EVIL_FILE, mode='create')
    dm.add_message(EVIL_MSG, 'note', 'at_end', dialog_name='evil')
    dm.close_all()
    now = time.time()
    for name, age in (('old.ipynb', 7200), ('sub/mid.ipynb', 600), (EVIL_FILE, 60)): os.utime(root / name, (now - age,) * 2)


def rows(page) -> list:
    return page.eval_on_selector_all('li.dlg', """els => els.map(e => ({name: e.dataset.name, count: e.querySelector('.count').textContent,
        state: e.querySelector('.state').textContent, last: e.querySelector('.last').textContent, ago: e.querySelector('time').textContent,
        title: e.querySelector('time').title, href: e.querySelector('a.name')?.getAttribute('href') ?? null}))""")


def test_index_shows_dialogs_newest_first_with_runs_and_escapes(tmp_path, browser):
    root = tmp_path / 'root'; root.mkdir()
    make_dialogs(root)
    with running_server(root) as srv:
        srv.ok('create_dialog_', name='busy', template='false')
        slow = srv.ok('add_relative_', dlg_name='busy', placement='at_end', msg_type='code', run='true',
                      content='import time\nfor _ in range(3000): time.sleep(0.01)')['id']
        srv.ok('add_relative_', dlg_name='busy', placement='at_end', msg_type='code', run='true', content='1 + 1')
        end = time.monotonic() + 20
        while '● running code' not in srv.http.get('/').text:  # the queue's first run has started
            assert time.monotonic() < end, f'the run never showed on the index:\n{srv.logs()}'
            time.sleep(0.05)

        page, errors, alerts = browser.new_page(), [], []
        page.on('pageerror', lambda e: errors.append(str(e)))
        page.on('dialog', lambda d: (alerts.append(d.message), d.dismiss()))
        r = page.goto(f'{srv.url}/')
        assert r.status == 200 and "default-src 'none'" in r.headers['content-security-policy']
        assert srv.http.get('/', headers={'Host': 'evil.example'}).status_code == 421  # the guard stands in front of the index too
        got = rows(page)
        assert [x['name'] for x in got] == ['busy', EVIL_FILE.removesuffix('.ipynb'), 'sub/mid', 'old']  # newest first
        assert [x['count'] for x in got] == ['2 messages', '1 message', '1 message', '3 messages']
        assert got[0]['state'] == '● running code · 1 queued' and got[0]['ago'] == 'just now'
        assert page.get_attribute('li.dlg[data-name="busy"] .state a', 'href') == f'/dialog_?name=busy#_{slow}'
        assert [x['state'] for x in got[1:]] == ['', '', '']
        assert [x['ago'] for x in got[1:]] == ['1 min ago', '10 min ago', '2 h ago']
        assert all(re.fullmatch(r'\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \S+', x['title']) for x in got)  # the exact time, on hover
        assert got[2]['last'] == 'codeprint("hello")' and got[3]['last'] == 'notenote 2'  # the last message's type and first line
        # the hostile dialog is text: its script and onerror did nothing, the file name is a name, no alert opened
        assert got[1]['last'] == 'note' + first_line(EVIL_MSG) and got[1]['last'].startswith('note<script>')
        assert got[1]['href'] is None and 'cannot be opened here: invalid dialog name' in page.inner_text('li.dlg[data-name^="<img"]')
        assert [x['href'] for x in got if x['href']] == ['/dialog_?name=busy', '/dialog_?name=sub/mid', '/dialog_?name=old']
        assert page.evaluate('[document.body.dataset.pwned || null, document.scripts.length, document.images.length]') == [None, 0, 0]
        assert page.inner_text('header .summary') == '4 dialogs · 1 running'
        # a dialog's link opens its live page
        with page.expect_navigation(): page.click('li.dlg[data-name="sub/mid"] a.name')
        page.wait_for_selector('#status >> text=live', timeout=15_000)  # (no eval: the index's CSP stays with playwright's helper)
        assert page.title() == 'sub/mid · headlesnb'
        # stopped: the index says nothing runs any more
        srv.ok('interrupt_', dlg_name='busy')
        end = time.monotonic() + 20
        while True:
            page.goto(f'{srv.url}/')
            if rows(page)[0]['state'] == '': break
            assert time.monotonic() < end, rows(page)[0]
            time.sleep(0.1)
        assert page.inner_text('header .summary') == '4 dialogs'
        assert not errors and not alerts, (errors, alerts)
