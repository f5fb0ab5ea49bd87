"""DialogManager end to end: the real anthropic SDK against a local fake Messages API, aidialog round trips,
the context budget, and the run queue (real kernels, real files; only the Claude API is faked)."""
import json, threading, time
import pytest
from aidialog.dialog import Dialog
from aidialog.ipynb import read_ipynb, write_ipynb, _reply_sep
from fake_anthropic import FakeAnthropic
from headlesnb import DialogManager
from headlesnb.errors import BadArgumentError, LLMError
from headlesnb.llm import AnthropicClient, MockLLMClient

@pytest.fixture
def root(tmp_path): return tmp_path

def make(root, llm=None, **kw):
    dm = DialogManager(root, llm=llm, **kw)
    dm.use_dialog('d', mode='create')
    return dm

def texts(req):
    "Every text block of an API request, in order"
    return [b['text'] for m in req['messages'] for b in (m['content'] if isinstance(m['content'], list) else [dict(text=m['content'])]) if 'text' in b]

def test_streaming_tool_loop_and_usage_through_the_real_sdk(root):
    replies = [{'text': 'Let me add them.', 'tool_calls': [('add', {'a': 2, 'b': 3})], 'usage': {'input_tokens': 50, 'output_tokens': 7, 'cache_read_input_tokens': 11}},
               {'text': 'The answer is 5.', 'usage': {'input_tokens': 60, 'output_tokens': 5}}]
    with FakeAnthropic(replies=replies) as fake:
        dm = make(root, llm=AnthropicClient(api_key='test', base_url=fake.url))
        dm.add_message('# Sums', 'note', pinned=1)
        code = dm.add_message('def add(a:int, b:int) -> int:\n    "Add `a` and `b`"\n    calls.append((a, b))\n    return a + b\ncalls = []', 'code')
        assert dm.run_message(code['id'])['status'] == 'ok'
        p = dm.add_message('Add 2 and 3 with &`add`.', 'prompt')
        chunks = []
        r = dm.execute_prompt(p['id'], on_text=chunks.append)
        assert ''.join(chunks) == 'Let me add them.The answer is 5.'
        assert len(chunks) > 2  # streamed in pieces
        assert dm.item().kernel.namespace['calls'] == [(2, 3)]  # the tool ran in the dialog's kernel
        assert r['tool_calls'] == [dict(name='add', input={'a': 2, 'b': 3}, result='5', is_error=False)]
        first, second = fake.requests
        assert first['tools'][0]['name'] == 'add' and first['stream'] is True
        assert first['system'][0]['cache_control'] == {'type': 'ephemeral'}
        assert any('def add' in t for t in texts(first)) and texts(first)[-1].startswith('Add 2 and 3')
        assert second['messages'][-1]['content'][0]['type'] == 'tool_result'
    msg = dm.read_message(p['id'])
    assert msg['meta']['usage']['input_tokens'] == 110 and msg['meta']['usage']['cache_read_input_tokens'] >= 11
    reply = msg['ai_output']
    assert reply.startswith('Let me add them.') and '```json {.tool}' in reply and reply.endswith('The answer is 5.')
    block = json.loads(reply.split('```json {.tool}\n')[1].split('\n```')[0])
    assert block == dict(id=block['id'], name='add', args={'a': 2, 'b': 3}, result='5')
    dm.close_all()

def test_api_error_is_clear_and_only_recorded_on_the_prompt(root):
    with FakeAnthropic(replies=[FakeAnthropic.error(400, 'prompt is too long')]) as fake:
        dm = make(root, llm=AnthropicClient(api_key='test', base_url=fake.url, max_retries=0))
        p = dm.add_message('hello', 'prompt')
        before = dm.read_message(p['id'])
        with pytest.raises(LLMError, match='400.*prompt is too long'): dm.execute_prompt(p['id'])
        after = dm.read_message(p['id'])  # the failure is recorded on the prompt, as a queued run records it; nothing else changes
        assert after['meta'].pop('run_error').startswith('LLMError: Anthropic API error 400') and after == before
    dm.close_all()

def test_no_key_is_a_clear_error(root, monkeypatch):
    monkeypatch.delenv('ANTHROPIC_API_KEY', raising=False)
    with FakeAnthropic(replies=['never']) as fake:
        dm = make(root, llm=AnthropicClient(base_url=fake.url))
        p = dm.add_message('hello', 'prompt')
        with pytest.raises(LLMError, match='ANTHROPIC_API_KEY'): dm.execute_prompt(p['id'])
        assert fake.requests == [] and dm.read_message(p['id'])['output'] == []
    dm.close_all()

def test_budget_keeps_newest_and_pinned_and_never_sends_skipped(root):
    mock = MockLLMClient(['ok'], context_window=1600, max_tokens=200)
    dm = make(root, llm=mock)
    dm.add_message('PINNED-FACT ' + 'p' * 200, 'note', pinned=1)
    old = [dm.add_message(f'OLD-{i} ' + 'x' * 800, 'note')['id'] for i in range(10)]
    dm.add_message('SKIPPED-SECRET', 'note', skipped=1)
    dm.add_message('NEWEST-NOTE', 'note')
    p = dm.add_message('question?', 'prompt')
    r = dm.execute_prompt(p['id'])
    sent = '\n'.join(texts(mock.requests[0]))
    assert 'PINNED-FACT' in sent and 'NEWEST-NOTE' in sent and 'SKIPPED-SECRET' not in sent
    assert r['dropped'] and r['dropped'] == old[:len(r['dropped'])]  # the oldest went first
    assert 'OLD-9 ' in sent and 'OLD-0 ' not in sent
    assert f"[{len(r['dropped'])} earlier message(s) left out" in sent
    dm.close_all()

def test_roundtrip_headlesnb_to_aidialog(root):
    dm = make(root, llm=MockLLMClient(['Four.']))
    n = dm.add_message('# Title', 'note', heading_collapsed=1, bookmark=3)
    c = dm.add_message('2 + 2', 'code', pinned=1, exported=1, meta={'custom': {'k': 1}})
    dm.run_message(c['id'])
    p = dm.add_message('What is 2+2?', 'prompt', skipped=1)
    dm.execute_prompt(p['id'])
    raw = dm.add_message('raw text', 'raw', i_collapsed=1, o_collapsed=1)
    dm.save()
    d = read_ipynb(root / 'd.ipynb')
    ms = {m.id: m for m in d.messages}
    assert [m.id for m in d.messages] == [n['id'], c['id'], p['id'], raw['id']]
    assert [m.msg_type for m in d.messages] == ['note', 'code', 'prompt', 'raw']
    assert ms[c['id']].pinned and ms[c['id']].exported and ms[c['id']].meta['custom'] == {'k': 1}
    assert ms[c['id']].ai_output == '4'
    assert ms[p['id']].skipped and ms[p['id']].ai_res == 'Four.' and ms[p['id']].content == 'What is 2+2?'
    assert ms[n['id']].meta['heading_collapsed'] == 1 and ms[n['id']].meta['bookmark'] == 3
    assert ms[raw['id']].meta['hide_input'] == 1 and ms[raw['id']].meta['collapsed'] == 1
    dm.close_all()

def test_roundtrip_aidialog_to_headlesnb_and_old_format(root):
    d = Dialog(name='a')
    d.mk_message('# Head', msg_type='note', pinned=1)
    d.mk_message('1 + 1', msg_type='code', output=[dict(output_type='execute_result', data={'text/plain': '2'}, metadata={}, execution_count=1)])
    d.mk_message('Why?', msg_type='prompt', output='Because.', meta={'mine': True})
    write_ipynb(d, root / 'a.ipynb')
    dm = DialogManager(root)
    dm.use_dialog('a')
    ms = dm.messages('a')
    assert [m['id'] for m in ms] == [m.id for m in d.messages]
    assert [(m['msg_type'], m['content']) for m in ms] == [('note', '# Head'), ('code', '1 + 1'), ('prompt', 'Why?')]
    assert ms[0]['pinned'] == 1 and ms[1]['ai_output'] == '2' and ms[2]['ai_output'] == 'Because.' and ms[2]['meta'] == {'mine': True}
    # an old-format file: prompt and reply in one markdown cell; read as a prompt, and left as it is on disk
    old = dict(cells=[dict(cell_type='markdown', id='0ld1d000', metadata={'solveit_ai': True}, source='What?' + _reply_sep + 'That.'),
                      dict(cell_type='markdown', id='n0te0000', metadata={}, source='a note')],
               metadata={'solveit_dialog_mode': 'learning', 'solveit_ver': 1}, nbformat=4, nbformat_minor=5)
    (root / 'old.ipynb').write_text(json.dumps(old))
    before = (root / 'old.ipynb').read_bytes()
    dm.use_dialog('old')
    m = dm.read_message('0ld1d000', dialog_name='old')
    assert (m['msg_type'], m['content'], m['ai_output']) == ('prompt', 'What?', 'That.')
    dm.close_all()
    assert (root / 'old.ipynb').read_bytes() == before  # opened, read, closed: not rewritten
    # the first edit writes the whole dialog in the current form, which aidialog reads back
    dm.use_dialog('old')
    dm.update_message('n0te0000', content='an edited note', dialog_name='old')
    dm.close_all()
    cell = json.loads((root / 'old.ipynb').read_text())['cells'][0]
    assert cell['cell_type'] == 'code' and ''.join(cell['source']) == '%%prompt\nWhat?' and cell['metadata']['solveit_ai'] is True
    assert [o['metadata'] for o in cell['outputs']] == [{'is_ai_res': True}]
    d2 = read_ipynb(root / 'old.ipynb')
    assert [(m.id, m.msg_type, m.content) for m in d2.messages] == [('0ld1d000', 'prompt', 'What?'), ('n0te0000', 'note', 'an edited note')]
    assert d2.messages[0].ai_res == 'That.'

def test_run_queue_runs_in_order_in_the_background(root):
    dm = make(root)
    ids = [dm.add_message(s, 'code')['id'] for s in ['import time; order = []', 'time.sleep(4); order.append(1)', 'order.append(2)', 'order']]
    t = time.monotonic()
    dm.queue_run(ids)
    assert time.monotonic() - t < 2  # returns at once (not after the 4 s cell)
    assert dm.read_message(ids[2])['run'] is True  # still queued
    assert dm.wait_idle(timeout=30)
    assert [dm.read_message(i)['run'] for i in ids] == [False] * 4
    assert dm.read_message(ids[3])['ai_output'] == '[1, 2]'
    with pytest.raises(BadArgumentError): dm.queue_run([dm.add_message('a note')['id']])
    dm.close_all()

def test_bad_output_refused_and_nothing_saved_broken(root):
    dm = make(root)
    c = dm.add_message('1', 'code')
    for bad in ['{not json', '{"a": 1}', '[{"output_type": "nonsense"}]']:
        with pytest.raises(BadArgumentError): dm.update_message(c['id'], output=bad)
    with pytest.raises(BadArgumentError): dm.add_message('x', 'code', output='[1, 2]')
    assert len(dm.messages()) == 1 and dm.read_message(c['id'])['output'] == []
    dm.save()
    from aidialog.ipynb import read_ipynb as rd
    rd(root / 'd.ipynb').validate()
    dm.close_all()

def test_concurrent_adds_are_all_kept(root):
    dm = make(root)
    def work(k):
        for i in range(50): dm.add_message(f'{k}-{i}', 'note', placement='at_end')
    ts = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in ts: t.start()
    for t in ts: t.join()
    contents = [m['content'] for m in dm.messages()]
    assert len(contents) == 200 and all(sorted((c for c in contents if c.startswith(f'{k}-')), key=lambda s: int(s.split('-')[1])) == [c for c in contents if c.startswith(f'{k}-')] for k in range(4))
    dm.close_all()

def test_run_queue_notes_a_failed_prompt_and_goes_on(root):
    dm = make(root, llm=MockLLMClient([LLMError('API error 529 overloaded_error: Overloaded')]))
    p = dm.add_message('hello?', 'prompt')
    c = dm.add_message('1 + 1', 'code')
    dm.queue_run([p['id'], c['id']])
    assert dm.wait_idle(timeout=10)
    assert 'overloaded' in dm.read_message(p['id'])['meta']['run_error']
    assert dm.read_message(c['id'])['ai_output'] == '2'
    assert dm.get_history()['undo'][-1]['label'] == 'add code message'  # the note is not an undoable edit
    dm.close_all()

def test_budget_is_checked_with_the_apis_token_count(root):
    "When the API counts more tokens than the estimate, the context is rebuilt tighter (oldest unpinned out first)"
    counts = []
    def count(body):
        n = 3 * sum(len(json.dumps(m)) for m in body['messages']) // 4  # the 'real' tokenizer counts ~3x the estimate
        counts.append(n); return n
    with FakeAnthropic(replies=['ok'], count_tokens=count) as fake:
        dm = make(root, llm=AnthropicClient(api_key='test', base_url=fake.url, context_window=3000, max_tokens=500))
        old = [dm.add_message(f'OLD-{i} ' + 'x' * 400, 'note')['id'] for i in range(10)]
        p = dm.add_message('question?', 'prompt')
        ctx = dm.prompt_context(p['id'])
        assert ctx.dropped and ctx.dropped == old[:len(ctx.dropped)] and ctx.tokens <= 2500
        assert len(counts) >= 2 and counts[0] > 2500  # the first build fitted the estimate but not the API's count
        dm.execute_prompt(p['id'])
        sent = '\n'.join(texts(fake.requests[-1]))
        assert 'OLD-9' in sent and 'OLD-0 ' not in sent
    dm.close_all()


def test_a_prompt_run_as_a_run_ends_ok(root):
    "run_message on a prompt is a run like a code message's: it ends ok, waited for or polled (it raised KeyError: 'status', and a wait hung)"
    with FakeAnthropic(replies=['first answer', 'second answer']) as fake:
        dm = make(root, llm=AnthropicClient(api_key='test', base_url=fake.url))
        p = dm.add_message('Say something.', 'prompt')
        r = dm.run_message(p['id'])
        assert r['reply'] == 'first answer' and dm.get_run(r['run_id'])['status'] == 'ok'
        q = dm.add_message('Again.', 'prompt')
        t0 = time.monotonic()
        r = dm.run_message(q['id'], wait=10)
        assert time.monotonic() - t0 < 8 and r['reply'] == 'second answer', r  # answered when it ended, not at the end of the wait
        assert {x['run_id']: x['status'] for x in dm.list_runs()}[r['run_id']] == 'ok'
        assert dm.read_message(q['id'])['ai_output'] == 'second answer' and 'run_error' not in dm.read_message(q['id'])['meta']
    dm.close_all()
