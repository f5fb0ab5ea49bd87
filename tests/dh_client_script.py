"""Drive a headlesnb server with the real dialoghelper client (run by tests/test_server.py in the client's Python 3.12 venv).

Environment: `__DIALOG_NAME` (an existing, empty dialog: the client's "current dialog"), `DH_PORT` (the server's port).
Every client function that reaches the server is called and its result checked here; the script exits non-zero on
the first failed check, and its last line is `RESULT <json>` with values the test checks again.
"""
import asyncio, builtins, json, os, sys, time, types

from dialoghelper.core import *
from dialoghelper.core import _add_msg_unsafe, DialogAPIError
from dialoghelper.exhash import lnhashview_msg, msg_exhash

dh_settings['port'] = int(os.environ['DH_PORT'])
DLG = os.environ['__DIALOG_NAME']
results = {}


def check(cond, what, got=None):
    if not cond: raise AssertionError(f'{what}: got {got!r}')


async def raises(coro, what, contains=''):
    "The call must raise DialogAPIError (mentioning `contains`)"
    try: res = await coro
    except DialogAPIError as e:
        check(contains.lower() in str(e).lower(), f'{what}: error text', str(e))
        return str(e)
    raise AssertionError(f'{what}: expected DialogAPIError, got {res!r}')


async def wait_run(mid, dname='', timeout=15):
    "Poll until message `mid` no longer reads run=True; the message"
    end = time.monotonic() + timeout
    while True:
        m = await read_msgid(mid, dname=dname)
        if not m.get('run'): return m
        check(time.monotonic() < end, f'{mid} still running after {timeout}s', m)
        await asyncio.sleep(0.05)


async def main():
    # --- the dialog and its messages
    cd = await curr_dialog()
    check(cd == {'name': DLG, 'mode': 'learning'}, 'curr_dialog', cd)
    h1 = await add_msg('# Intro\nSome intro text', placement='at_end')
    n1 = await add_msg('A note about apples', id=h1)                         # add_after h1
    c1 = await add_msg('x = 41\nx + 1', msg_type='code', id=n1)
    first = await add_msg('The very first', placement='at_start')
    before = await add_msg('Just before the code', placement='add_before', id=c1)
    h2 = await add_msg('## Details\nMore', placement='at_end')
    c2 = await add_msg('def f():\n    return 1', msg_type='code', id=h2)
    last = await add_msg('The end', id=c2)
    order = [first, h1, n1, before, c1, h2, c2, last]
    view = await find_msgs(include_output=False, include_meta=False)
    check([m.id for m in view] == order, 'placements: message order', [m.id for m in view])
    check(await msg_idx(c1) == 4, 'msg_idx(id)')
    check(await msg_idx() == 7, 'msg_idx() is the current (last added) message')
    after_curr = await add_msg('Added after the current message')   # no id: after the current message
    check(await msg_idx(after_curr) == 8, 'add_msg without id goes after the current message')
    await del_msgs(after_curr)
    results['order'] = order

    # --- reading
    m = await read_msg(n=0, id=c1)
    check((m['id'], m['content'], m['msg_type'], m['run']) == (c1, 'x = 41\nx + 1', 'code', False), 'read_msg id', m)
    check(set(m) >= {'id', 'content', 'output', 'msg_type', 'run', 'meta', 'pinned', 'skipped', 'exported', 'i_collapsed',
                     'o_collapsed', 'heading_collapsed', 'time_run'}, 'read_msg keys', sorted(m))
    check((await read_msg(-1, id=c1))['id'] == before, 'read_msg relative -1 from id')
    check((await read_msg(2, id=c1))['id'] == c2, 'read_msg relative +2 from id')
    check((await read_msg(0, relative=False))['id'] == first, 'read_msg absolute 0')
    check((await read_msg(-1, relative=False))['id'] == last, 'read_msg absolute -1')
    check((await read_msg(2, relative=False))['id'] == n1, 'read_msg absolute 2')
    check((await read_msg())['id'] == last, 'read_msg() with no current message (it was deleted) reads from the end')
    check((await read_msg(n=0, id=c1, start_line=2))['content'] == 'x + 1', 'read_msg start_line')
    check((await read_msg(n=0, id=h1, nums=True))['content'] == '     1 │ # Intro\n     2 │ Some intro text', 'read_msg nums')
    check((await read_msg(n=0, id=h1, start_line=2, end_line=2, nums=True))['content'] == '     2 │ Some intro text', 'view_range+nums')
    check(not (await read_msg(50, relative=False)).get('content'), 'read_msg out of range is empty')
    check((await read_msgid(n1))['content'] == 'A note about apples', 'read_msgid')
    check(await view_msg(c1) == '     1 │ x = 41\n     2 │ x + 1', 'view_msg')
    check(await view_msg(c1, nums=False, end_line=1) == 'x = 41', 'view_msg end_line')
    lh = await lnhashview_msg(c1)
    check(lh.splitlines()[0].endswith('x = 41') and '|' in lh, 'lnhashview_msg', lh)
    await raises(read_msgid('nosuchid'), 'read_msgid unknown id', 'nosuchid')

    # --- running
    check(await run_msg(c1) == {'status': 'queued', 'ids': [c1]}, 'run_msg answers at once')
    m = await wait_run(c1)
    check(m['output'] == '42' and m['time_run'], 'run_msg output', m)
    check((await view_msg(c1, incl_out=True, nums=False)).endswith('<out>\n42\n</out>'), 'view_msg incl_out')
    r1 = await add_msg('print("ran via %%py")', msg_type='code', run=True, id=last)
    check((await read_msgid(r1))['content'].startswith('%%py\n'), 'add_msg(run=True) prepends %%py')
    m = await wait_run(r1)
    check(m['output'] == 'ran via %%py\n', 'add_msg(run=True) ran (output: the printed text)', m)
    err = await add_msg('1/0', msg_type='code', run=True, id=r1)
    await wait_run(err)
    results['run_output'] = (await read_msgid(c1))['output']

    # --- finding
    def ids(ms): return [o.id for o in ms]
    check(ids(await find_msgs('ap+les', context=0)) == [n1], 'find_msgs regex')
    check(ids(await find_msgs('apples')) == [h1, n1, before], 'find_msgs default context 1')
    check(ids(await find_msgs('APPLES', use_case=True)) == [], 'find_msgs use_case')
    check(ids(await find_msgs('x + 1', use_regex=False, context=0)) == [c1], 'find_msgs plain text')
    check(ids(await find_msgs('x.+1', context=0, include_output=False)) == [c1], 'find_msgs regex dot')
    check(ids(await find_msgs('ZeroDivision', context=0)) == [err], 'find_msgs searches outputs')
    check(ids(await find_msgs('ZeroDivision', context=0, include_output=False)) == [], 'find_msgs include_output=False')
    check(ids(await find_msgs(msg_type='code', context=0)) == [c1, c2, r1, err], 'find_msgs msg_type')
    check(ids(await find_msgs(only_err=True, context=0)) == [err], 'find_msgs only_err')
    check(ids(await find_msgs(ids=f'{c2},{n1}', context=0)) == [n1, c2], 'find_msgs ids (dialog order)')
    check(ids(await find_msgs(msg_type='code', limit=2, context=0)) == [c1, c2], 'find_msgs limit')
    check(ids(await find_msgs('apples', before=0, after=2, context=0)) == [n1, before, c1], 'find_msgs after')
    hd = await find_msgs(headers_only=True)
    check([(o.id, o.content) for o in hd] == [(h1, '# Intro'), (h2, '## Details')], 'find_msgs headers_only', hd)
    check(ids(await find_msgs(header_section='Details', context=0)) == [h2, c2, last, r1, err], 'find_msgs header_section')
    found = await find_msgs('apples', context=0, nums=True, include_meta=False)
    check(found[0].content == '     1 │ A note about apples' and set(found[0]) == {'id', 'content', 'output', 'msg_type', 'exported'},
          'find_msgs nums/include_meta', found)
    long = await add_msg('y = "' + 'a' * 300 + '"\nprint(y)', msg_type='code', run=True, id=err)
    await wait_run(long)
    t = (await find_msgs(ids=long, context=0, trunc_in=True, trunc_out=True))[0]
    check(len(t.content) == 80 and '…' in t.content and len(t.output) == 100 and '…' in t.output, 'find_msgs trunc_in/trunc_out', t)
    xml = await find_msgs('apples', context=0, as_xml=True)
    check(xml == f'<msgs><markdown id="{n1}">A note about apples</markdown></msgs>', 'find_msgs as_xml', xml)
    vd = await view_dlg(msg_type='code', include_output=True)
    check(vd.startswith(f'<msgs><code id="{c1}">x = 41\nx + 1<out>42</out></code>'), 'view_dlg', vd)
    vn = await view_dlg(nums=True)
    check(f'<markdown id="{first}">     1 │ The very first</markdown>' in vn, 'view_dlg nums', vn)
    await raises(find_msgs('('), 'find_msgs bad regex', 'regex')
    await del_msgs(long)

    # --- updating
    u = await update_msg(c2, content='def f():\n    return 2', pinned=1)
    check(u == c2, 'update_msg returns the id', u)
    m = await read_msgid(c2)
    check((m['content'], m['pinned']) == ('def f():\n    return 2', 1), 'update_msg fields', m)
    await update_msg(c2, meta={'a': 1, 'b': {'c': 2}})
    check((await read_msgid(c2))['meta'] == {'a': 1, 'b': {'c': 2}}, 'update_msg meta replaces')
    await update_msg(c2, mergemeta={'b': {'d': 3}, 'a': None})
    check((await read_msgid(c2))['meta'] == {'b': {'c': 2, 'd': 3}}, 'update_msg mergemeta merges, None deletes')
    d = await read_msgid(n1)
    check(await update_msg(msg=d) == n1, 'update_msg(msg=dict) echo')
    check(await read_msgid(n1) == d, 'echo changes nothing', await read_msgid(n1))
    d['content'] = 'A note about pears'
    await update_msg(msg=d)
    check((await read_msgid(n1))['content'] == 'A note about pears', 'update_msg(msg=dict) with a change')
    await update_msg(n1, skipped=1, i_collapsed=1, o_collapsed=1, time_run='yesterday', msg_type='note')
    m = await read_msgid(n1)
    check((m['skipped'], m['i_collapsed'], m['o_collapsed'], m['time_run']) == (1, 1, 1, 'yesterday'), 'update_msg flags', m)
    check(ids(await find_msgs('pears', context=0)) == [], 'a skipped message is not found')
    check(ids(await find_msgs('pears', context=0, include_skipped=True)) == [n1], 'include_skipped')
    await update_msg(n1, skipped=0)
    await update_msg(c1, output='[{"output_type": "stream", "name": "stdout", "text": "set by hand"}]')
    check((await read_msgid(c1))['output'] == 'set by hand', 'update_msg output (Jupyter JSON)')
    n_before = len(await find_msgs(include_output=False))
    await update_msg(c1, content='x = 41\nx + 2', log_changed=True)
    notes = await find_msgs('Updated', context=0)
    check(len(await find_msgs(include_output=False)) == n_before + 1 and '+x + 2' in notes[0].content, 'update_msg log_changed', notes)
    await del_msgs(notes[0].id)
    await raises(update_msg('nosuchid', content='x'), 'update_msg unknown id', 'nosuchid')
    await raises(update_msg(c1, pinned='maybe'), 'update_msg bad flag', 'pinned')

    # --- editing helpers (read, edit locally, update)
    check('-x + 2' in await msg_str_replace(c1, 'x + 2', 'x + 1'), 'msg_str_replace')
    await msg_strs_replace(c1, ['x = 41', 'x + 1'], ['x = 1', 'x * 2'])
    check((await read_msgid(c1))['content'] == 'x = 1\nx * 2', 'msg_strs_replace')
    await msg_insert_line(c1, 1, '# inserted')
    check((await read_msgid(c1))['content'] == 'x = 1\n# inserted\nx * 2', 'msg_insert_line')
    await msg_del_lines(c1, 2, 2)
    check((await read_msgid(c1))['content'] == 'x = 1\nx * 2', 'msg_del_lines')
    await msg_replace_lines(c1, 2, 2, 'x * 3')
    check((await read_msgid(c1))['content'].rstrip('\n') == 'x = 1\nx * 3', 'msg_replace_lines')
    hashes = (await lnhashview_msg(c1)).splitlines()
    await msg_exhash(c1, [(hashes[1].rsplit('|', 1)[0] + '|', 'c', 'x * 4')])
    check((await read_msgid(c1))['content'].rstrip('\n') == 'x = 1\nx * 4', 'msg_exhash')
    await run_msg(c1)
    check((await wait_run(c1))['output'] == '4', 'edited message runs')
    res = await msg_str_replace(c1, 'x * 4', 'x * 5', out=False)
    check('+x * 5' in res, 'msg_str_replace diff', res)
    await run_msg(c1); await wait_run(c1)
    check('+ok' in await msg_str_replace(c1, '5', 'ok', out=True), 'msg_str_replace on the output')
    check((await read_msgid(c1))['output'] == 'ok', 'edited output stored')

    # --- clipboard
    check(await copy_msgs(f'{h1},{n1}') == {'success': 'complete'}, 'copy_msgs')
    check(await paste_msgs(last) == {'success': 'complete'}, 'paste_msgs')
    pasted = [m.id for m in await find_msgs(include_output=False)]
    i = pasted.index(last)
    check([(await read_msgid(x))['content'] for x in pasted[i + 1:i + 3]] == ['# Intro\nSome intro text', 'A note about pears'],
          'pasted after `last`, in order')
    await copy_msgs(pasted[i + 1], cut=True)
    check(pasted[i + 1] not in [m.id for m in await find_msgs(include_output=False)], 'cut removes the message')
    await paste_msgs(first, after=False)
    check((await read_msg(0, relative=False))['content'] == '# Intro\nSome intro text', 'paste before the first message')
    await del_msgs([(await read_msg(0, relative=False))['id'], pasted[i + 2]])
    try: await copy_msgs('nosuchid'); raise AssertionError('copy_msgs of an unknown id must fail')
    except DialogAPIError: pass  # the server answers an empty body, which the client reports

    # --- toggles
    check(await toggle_header(h1) == {'success': 'complete'}, 'toggle_header')
    check((await read_msgid(h1))['heading_collapsed'] == 1, 'heading collapsed')
    await toggle_header(h1)
    check((await read_msgid(h1))['heading_collapsed'] == 0, 'heading expanded')
    try: await toggle_header(c1); raise AssertionError('toggle_header on code must fail')
    except DialogAPIError: pass
    check(await toggle_bookmark(c1, 2) == {'id': c1, 'bookmark': 2}, 'toggle_bookmark on')
    await toggle_bookmark(c2, 2)
    check(((await read_msgid(c1))['bookmark'], (await read_msgid(c2))['bookmark']) == (0, 2), 'bookmark moves')
    check(await toggle_bookmark(c2, 2) == {'id': c2, 'bookmark': 0}, 'toggle_bookmark off')
    await raises(toggle_bookmark(c2, 12), 'bookmark out of range', '1-9')
    check(await toggle_export([c1, c2]) == {'ids': [c1, c2], 'exported': True}, 'toggle_export on')
    check(ids(await find_msgs(only_exp=True, context=0)) == [c1, c2], 'only_exp')
    check(f'<code id="{c1}" export>' in await view_dlg(), 'exported messages carry `export` in XML')
    check(await toggle_export([c1, c2]) == {'ids': [c1, c2], 'exported': False}, 'toggle_export off')
    check(((await read_msgid(c1))['exported'], (await read_msgid(c2))['exported']) == (0, 0), 'toggle_export off follows the first')
    await update_msg(c2, content='#| export\ndef f(): return 3')
    check((await read_msgid(c2))['exported'] == 1, 'an #| export line exports')
    await toggle_export(c2)
    m = await read_msgid(c2)
    check((m['exported'], m['content']) == (0, 'def f(): return 3'), 'export off removes the #| export line', m)
    check(await toggle_comment(c2) == {'success': 'complete'}, 'toggle_comment')
    check((await read_msgid(c2))['content'] == '# def f(): return 3', 'commented')
    await toggle_comment(c2)
    check((await read_msgid(c2))['content'] == 'def f(): return 3', 'uncommented')
    await toggle_comment(f'{c2},{c1}')
    check(((await read_msgid(c1))['content'], (await read_msgid(c2))['content']) == ('# x = 1\n# x * 5', '# def f(): return 3'), 'both commented')
    await toggle_comment(f'{c2},{c1}')
    check(((await read_msgid(c1))['content'], (await read_msgid(c2))['content']) == ('x = 1\nx * 5', 'def f(): return 3'), 'both uncommented')

    # --- deleting
    res = await del_msgs(f'{before},{last}')
    check(res == [{'status': 'success'}] * 2, 'del_msgs', res)
    check(before not in [m.id for m in await find_msgs(include_output=False)], 'deleted')
    try: await del_msgs('nosuchid'); raise AssertionError('del_msgs of an unknown id must fail')
    except Exception as e: check('404' in str(e) or 'nosuchid' in str(e), 'del_msgs unknown id', str(e))

    # --- other dialogs
    r = await create_or_run_dialog('other')
    check(r == {'success': '"other" is now running'}, 'create_or_run_dialog', r)
    check(await create_or_run_dialog('other') == r, 'create_or_run_dialog of a running dialog')
    o1 = await add_msg('In the other dialog', dname='other', placement='at_end')
    check((await read_msg(0, relative=False, dname='other'))['id'] == o1, 'read_msg dname')
    check(await curr_dialog(dname='other') == {'name': 'other', 'mode': 'learning'}, 'curr_dialog dname')
    out = await _add_msg_unsafe('6 * 7', msg_type='code', run=True, wait=True, dname='other', placement='at_end', poll=0.05)
    check(out == '42', 'add_msg run + wait in another dialog', out)
    src = await add_msg('loaded_value = 1234', msg_type='code', dname='other', placement='at_end')
    builtins.get_ipython = lambda: types.SimpleNamespace(kernel=types.SimpleNamespace())  # load_dialog expects to run in a kernel
    ld = await load_dialog('other')
    check('Ran 2 code message(s) of other' in str(ld) and 'loaded_value = 1234' in str(ld), 'load_dialog', str(ld))
    chk = await add_msg('loaded_value', msg_type='code', run=True, id=c2)
    check((await wait_run(chk))['output'] == '1234', 'load_dialog ran the code in this dialog\'s kernel')
    r = await create_or_run_dialog('folder/deep')
    check(r == {'success': '"folder/deep" is now running'}, 'create_or_run_dialog in a folder', r)
    ls = await list_dialogs()
    check(ls == {'items': ['folder/', DLG, 'other']}, 'list_dialogs', ls)
    check((await list_dialogs('/', depth=2))['items'] == ['folder/', 'folder/deep', DLG, 'other'], 'list_dialogs depth')
    root = await realpath('/')
    check(os.path.isdir(root), 'realpath /', root)
    check(await realpath('other') == os.path.join(root, 'other.ipynb'), 'realpath of a dialog')
    cf = await connfiles()
    check(set(cf) >= {DLG, 'other', 'folder/deep'} and all(v is None for v in cf.values()), 'connfiles', cf)
    check(await connfiles('other') is None, 'connfiles(name)')
    check(await stop_dialog('other') == {'success': 'dialog stopped'}, 'stop_dialog')
    check('other' not in await connfiles(), 'stopped dialog is not running')
    check((await read_msg(0, relative=False, dname='other'))['id'] == o1, 'a stopped dialog opens again on use')
    check(await rm_dialog('folder') == {'success': 'deleted "folder"'}, 'rm_dialog folder')
    check(await rm_dialog('other') == {'success': 'deleted "other.ipynb"'}, 'rm_dialog')
    check((await list_dialogs())['items'] == [DLG], 'after rm_dialog')
    await raises(read_msg(0, relative=False, dname='other'), 'a deleted dialog', 'does not exist')
    await raises(add_msg('x', dname='/../escape', placement='at_end'), 'a path outside the root', 'invalid dialog name')

    # --- web search is not configured
    await raises(search('python'), 'search', 'not configured')
    await raises(searches(['a', 'b']), 'searches', 'not configured')
    await raises(web_answer('what?', ['q']), 'web_answer', 'not configured')

    # --- the relay
    a, b = await Channel.connect('chan-1'), await Channel.connect('chan-1')
    c = await Channel.connect('chan-2')
    await a.send(hello='world', n=1)
    got = await asyncio.wait_for(b.events.get(), 5)
    check(got == {'hello': 'world', 'n': 1}, 'Channel relays to the other peer', got)
    async def answer():
        req = await b.events.get()
        await b.send(id=req['id'], answer=req['q'] * 2)
    t = asyncio.create_task(answer())
    rep = await a.request(q=21)
    check(rep['answer'] == 42, 'Channel.request', rep)
    await t
    check(a.events.empty() and c.events.empty(), 'no echo to the sender, nothing on another channel')
    for ch in (a, b, c): await ch.close()

    results['final'] = [(m.id, m.msg_type, m.content) for m in await find_msgs(include_output=False, include_skipped=True)]


asyncio.run(main())
print('RESULT ' + json.dumps(results))
