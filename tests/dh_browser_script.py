"""Browser round trips with the real dialoghelper client (run by tests/test_server.py while Chromium shows the dialog's page).

Environment: `__DIALOG_NAME`, `DH_PORT`. Checks js_eval, js_run, add_html/add_scr, fire_event + event_get (the page
answers with `pushData`) and adds a message the test then looks for on the open page. Last line: `RESULT <json>`.
"""
import asyncio, json, os, time

from dialoghelper.core import *

dh_settings['port'] = int(os.environ['DH_PORT'])
res = {}


def check(cond, what, got=None):
    if not cond: raise AssertionError(f'{what}: got {got!r}')


t0 = time.monotonic()
r = js_eval('return 1+2')
check(r.result == 3, 'js_eval', r)
res['js_eval'] = r.result
res['js_eval_s'] = time.monotonic() - t0

r = js_eval('return document.body.dataset.dialog')
check(r.result == os.environ['__DIALOG_NAME'], 'js_eval sees the dialog page', r)

r = js_run('setTimeout(() => done({v: 5}), 50)')
check((r.ready, r.v) == (True, 5), 'js_run', r)

add_html('<div hx-swap-oob="beforeend:body"><p id="hnb-note">Hello from add_html</p></div>')  # (#ephemeral is replaced by each js_eval)
check(js_eval("return document.getElementById('hnb-note')?.textContent").result == 'Hello from add_html', 'add_html swapped in')

add_scr("document.body.addEventListener('hnb_ping', e => pushData(e.detail.idx, {pong: e.detail.x * 2}))")
r = event_get('hnb_ping', x=21)
check(r.pong == 42, 'event_get', r)
res['event_get'] = r.pong

mid = asyncio.run(add_msg('A *live* message from the client', placement='at_end'))
res['added'] = mid
print('RESULT ' + json.dumps(res))
