"""Drive a headlesnb server with the real solveit-client 0.1.0 (run by tests/test_server.py in the client's own venv).

Environment: `SOLVEIT_URL` (the server). Every public call of the client is made and checked by its effect; the
script exits non-zero on the first failed check, and its last line is `RESULT <json>` with values the test checks again.
"""
import json, time

from solveit_client.core import Dialog, Message, SolveItClient

results = {}


def check(cond, what, got=None):
    if not cond: raise AssertionError(f'{what}: got {got!r}')


def wait_done(m: Message, timeout=20) -> Message:
    "Poll until message `m` no longer reads run=True"
    end = time.monotonic() + timeout
    while m._refresh().get('run'):
        check(time.monotonic() < end, f'{m.id} still running after {timeout}s', m.data)
        time.sleep(0.05)
    return m


cli = SolveItClient()
dlg = cli.create_dialog('sc/main')                                        # create_dialog (and Dialog: curr_dialog_)
check((dlg.name, dlg.data['name']) == ('sc/main', 'sc/main'), 'create_dialog', dlg.data)
ha = dlg.add_msg('# Section A', msg_type='note')                          # add_msg
na = dlg.add_msg('apples inside A', msg_type='note')
hb = dlg.add_msg('# Section B', msg_type='note')
c1 = dlg.add_msg('order = []\norder.append(1)', msg_type='code')
c2 = dlg.add_msg('order.append(2)\norder', msg_type='code')
check([m.id for m in dlg.messages] == [ha.id, na.id, hb.id, c1.id, c2.id], 'messages in order', [m.id for m in dlg.messages])
check([m.id for m in dlg.find_msgs('apples')] == [na.id], 'find_msgs: the hit alone, no neighbours')
check(dlg.read_msg(id=c1.id).content == 'order = []\norder.append(1)', 'read_msg by id')
check('<markdown id=' in dlg.to_xml() and 'Section B' in dlg.to_xml(msg_type='note'), 'to_xml', dlg.to_xml())

# run all: the code messages, in order
dlg.run_all()
check(wait_done(c2).output == '[1, 2]', 'run_all ran the code messages in order', c2.data)
check(wait_done(c1).run is False, 'run_all: the first is done too')

# one message by id_ (add_runq_)
c3 = dlg.add_msg('order.append(3)\norder', msg_type='code').exec(timeout=20)
check(c3.output == '[1, 2, 3]', 'exec runs one message by id_', c3.data)

# reset: a fresh kernel
dlg.reset()
gone = dlg.add_msg('order', msg_type='code').exec(timeout=20)
check('NameError' in (gone.output or ''), 'reset gives a fresh kernel', gone.data)

# stop interrupts a running message within 3 s
slow = dlg.add_msg('import time\nfor i in range(1200): time.sleep(0.05)\nprint("fin" "ished")', msg_type='code')
slow.exec(timeout=0.5)  # queued; exec polls half a second and returns while it runs
check(slow._refresh().get('run'), 'the slow message is running', slow.data)
t0 = time.monotonic()
dlg.stop()
wait_done(slow, timeout=10)
results['stop_seconds'] = round(time.monotonic() - t0, 2)
check(results['stop_seconds'] < 3, 'stop interrupts within 3 s', results['stop_seconds'])
check('finished' not in (slow.output or '') and 'KeyboardInterrupt' in (slow.output or ''), 'stop interrupted it', slow.output)

# toggle_header collapses the header it names (and only it)
dlg.toggle_header('Section A')
flags = {m.id: m.data.get('heading_collapsed') for m in dlg.messages}
check(bool(flags[ha.id]) and not any(v for k, v in flags.items() if k != ha.id), 'toggle_header collapses Section A only', flags)
dlg.toggle_header('Section A')
check(not dlg.read_msg(id=ha.id).data.get('heading_collapsed'), 'toggle_header expands it again')

# editing a message
m = dlg.add_msg('a = 1\nb = 2\nc = 3', msg_type='code')
d = m.update(content='a = 10\nb = 2\nc = 3')                             # update
check(m.content == 'a = 10\nb = 2\nc = 3' and '-a = 1' in (d.diff or ''), 'update (log_changed gives a diff)', d)
m.str_replace('b = 2', 'b = 20')
m.strs_replace(['a = 10', 'c = 3'], ['a = 11', 'c = 30'])
m.insert_line(1, 'x = 0')
m.replace_lines(4, 4, 'c = 31')
m.del_lines(1)
check(m._refresh()['content'] == 'x = 0\nb = 20\nc = 31\n', 'line edits (replace_lines ends the line)', m.content)
check(m.num_content.splitlines()[0].strip() == '1 | x = 0', 'num_content', m.num_content)
m.delete()                                                                 # delete (rm_msg_)
check(m.id not in [x.id for x in dlg.messages], 'Message.delete')

results['final'] = [[x.id, x.msg_type, x.content] for x in dlg.messages]
check(dlg.delete().get('success', '').startswith('deleted'), 'Dialog.delete')    # rm_dialog_
print('RESULT ' + json.dumps(results))
