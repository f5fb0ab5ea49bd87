"""headlesnb.llm against the real `anthropic` SDK talking to a fake Messages API server on 127.0.0.1."""
import json, socket, threading
from contextlib import contextmanager

import anthropic
import pytest

from fake_anthropic import FakeAnthropic
from headlesnb.errors import LLMError, BadArgumentError
from headlesnb.llm import (AnthropicClient, MockLLMClient, LLMReply, ToolCall, LoopResult, run_tool_loop, tool_schema,
                           USAGE_KEYS, DEFAULT_MODEL)

EPH = {'type': 'ephemeral'}
Q = [{'role': 'user', 'content': 'What is 40 + 2?'}]


@pytest.fixture
def fake():
    with FakeAnthropic() as f: yield f


def client(fake, **kw):
    return AnthropicClient(api_key='test-key', base_url=fake.url, **{'max_retries': 0, **kw})


def add(a: int,  # first number
        b: int   # second number
        ) -> int:
    "Add two numbers"
    return a + b


def last_user_blocks(body):
    m = [m for m in body['messages'] if m['role'] == 'user'][-1]
    return [{'type': 'text', 'text': m['content']}] if isinstance(m['content'], str) else m['content']


# ---- one request

def test_streaming_deltas_in_order(fake):
    fake.add('The answer is forty-two, as everyone knows.')
    deltas = []
    r = client(fake).complete('Be terse.', Q, on_text=deltas.append)
    assert isinstance(r, LLMReply)
    assert len(deltas) > 1 and ''.join(deltas) == r.text == 'The answer is forty-two, as everyone knows.'
    assert r.content == [{'type': 'text', 'text': r.text}]
    assert (r.stop_reason, r.model) == ('end_turn', DEFAULT_MODEL)
    body = fake.requests[0]
    assert body['stream'] is True and body['model'] == DEFAULT_MODEL and body['max_tokens'] == 4096
    assert body['messages'] == Q
    assert fake.headers[0].get('authorization') == 'Bearer test-key' or fake.headers[0].get('x-api-key') == 'test-key'


def test_streaming_is_incremental(fake):
    "on_text sees the first delta while the server is still sending"
    fake.delay = 0.05
    fake.add('one two three four five six')
    times = []
    import time
    t0 = time.monotonic()
    client(fake).complete('', Q, on_text=lambda s: times.append(time.monotonic() - t0))
    assert times[-1] - times[0] >= 0.05


def test_tool_use_and_thinking_blocks_come_back_as_dicts(fake):
    fake.add({'thinking': 'I should add.', 'signature': 'sig123', 'text': 'Adding.', 'tool_calls': [('add', {'a': 40, 'b': 2}, 'toolu_1')]})
    r = client(fake).complete('', Q, tools=[tool_schema(add)])
    assert r.content == [{'type': 'thinking', 'thinking': 'I should add.', 'signature': 'sig123'},
                         {'type': 'text', 'text': 'Adding.'},
                         {'type': 'tool_use', 'id': 'toolu_1', 'name': 'add', 'input': {'a': 40, 'b': 2}}]
    assert r.stop_reason == 'tool_use' and r.text == 'Adding.'
    assert fake.requests[0]['tools'][0]['name'] == 'add'
    assert fake.requests[0]['tools'][0]['input_schema']['required'] == ['a', 'b']


def test_usage_recorded_including_cache_tokens(fake):
    fake.add({'text': 'hi', 'usage': {'input_tokens': 12, 'output_tokens': 5, 'cache_creation_input_tokens': 100,
                                      'cache_read_input_tokens': 900}})
    r = client(fake).complete('sys', Q)
    assert r.usage == {'input_tokens': 12, 'output_tokens': 5, 'cache_creation_input_tokens': 100, 'cache_read_input_tokens': 900}


def test_cache_tokens_simulated_across_requests(fake):
    "the same cached prefix is written once, then read"
    msgs = [{'role': 'user', 'content': 'q1 ' * 50}, {'role': 'assistant', 'content': 'a1 ' * 50}, {'role': 'user', 'content': 'q2'}]
    fake.add('one', 'two')
    c = client(fake)
    u1, u2 = c.complete('A long system prompt. ' * 20, msgs).usage, c.complete('A long system prompt. ' * 20, msgs).usage
    assert u1['cache_creation_input_tokens'] > 0 and u1['cache_read_input_tokens'] == 0
    assert u2['cache_read_input_tokens'] == u1['cache_creation_input_tokens'] and u2['cache_creation_input_tokens'] == 0


def test_cache_control_on_system_and_prefix(fake):
    msgs = [{'role': 'user', 'content': 'q1'}, {'role': 'assistant', 'content': [{'type': 'text', 'text': 'a1'}]},
            {'role': 'user', 'content': 'q2'}]
    fake.add('ok', 'ok')
    client(fake).complete('You are terse.', msgs)
    body = fake.requests[0]
    assert body['system'] == [{'type': 'text', 'text': 'You are terse.', 'cache_control': EPH}]
    assert body['messages'][1]['content'] == [{'type': 'text', 'text': 'a1', 'cache_control': EPH}]
    assert body['messages'][2] == {'role': 'user', 'content': 'q2'}  # the new prompt is not cached
    assert 'cache_control' not in json.dumps(body['messages'][0])
    assert msgs[1]['content'] == [{'type': 'text', 'text': 'a1'}]  # the caller's messages are untouched
    client(fake, cache=False).complete('You are terse.', msgs)
    assert fake.requests[1]['system'] == 'You are terse.' and 'cache_control' not in json.dumps(fake.requests[1])


def test_thinking_param_passed(fake):
    fake.add({'thinking': 'Hmm.', 'text': '42'}, 'ok')
    c = client(fake, max_tokens=1000)
    r = c.complete('', Q, thinking=2048)
    assert fake.requests[0]['thinking'] == {'type': 'enabled', 'budget_tokens': 2048}
    assert fake.requests[0]['max_tokens'] == 3048  # the budget comes on top of max_tokens
    assert r.content[0]['type'] == 'thinking' and r.text == '42'
    c.complete('', Q, thinking='adaptive')
    assert fake.requests[1]['thinking'] == {'type': 'adaptive'}
    with pytest.raises(BadArgumentError): c.complete('', Q, thinking=10)
    assert len(fake.requests) == 2


def test_count_tokens_uses_api_then_falls_back(fake):
    fake.count_tokens = 1234
    c = client(fake)
    assert c.count_tokens('sys', Q, [tool_schema(add)]) == 1234
    body = fake.count_requests[0]
    assert body['model'] == DEFAULT_MODEL and body['tools'][0]['name'] == 'add' and 'max_tokens' not in body
    fake.count_tokens = FakeAnthropic.error(500)
    n = c.count_tokens('sys', Q)
    assert 0 < n < 100 and len(fake.count_requests) == 2


# ---- errors

def test_api_error_overloaded(fake):
    fake.add(FakeAnthropic.error(529))
    with pytest.raises(LLMError) as ei: client(fake).complete('', Q)
    e = ei.value
    assert '529' in str(e) and 'overloaded_error' in str(e) and 'Overloaded' in str(e)
    assert (e.status, e.error_type) == (529, 'overloaded_error')
    assert isinstance(e.__cause__, anthropic.APIStatusError)


def test_api_error_invalid_request(fake):
    fake.add(FakeAnthropic.error(400, 'prompt is too long: 250000 tokens > 200000 maximum'))
    with pytest.raises(LLMError, match=r'400 invalid_request_error: prompt is too long'): client(fake).complete('', Q)


def test_request_the_api_would_reject_is_reported(fake):
    "an assistant tool_use without its tool_result: the fake answers 400 like the API"
    bad = Q + [{'role': 'assistant', 'content': [{'type': 'tool_use', 'id': 't1', 'name': 'add', 'input': {}}]},
               {'role': 'user', 'content': 'hm?'}]
    with pytest.raises(LLMError, match=r'400 invalid_request_error: .*tool_result'): client(fake).complete('', bad)


def test_error_while_streaming(fake):
    fake.add({'text': 'partial answer', 'stream_error': {'type': 'overloaded_error', 'message': 'Overloaded'}})
    with pytest.raises(LLMError, match='overloaded_error: Overloaded') as ei: client(fake).complete('', Q)
    assert ei.value.error_type == 'overloaded_error'


def test_sdk_retries_when_server_says_so(fake):
    fake.add(FakeAnthropic.error(529, retry=True, retry_after=0.01), 'fine')
    assert client(fake, max_retries=2).complete('', Q).text == 'fine'
    assert len(fake.requests) == 2


def test_unreachable_server():
    with FakeAnthropic() as f: url = f.url  # a port that was free and is closed again
    with pytest.raises(LLMError, match='cannot reach'): AnthropicClient(api_key='k', base_url=url, max_retries=0).complete('', Q)


def test_wrong_key_is_401(fake):
    fake.api_key = 'right'
    with pytest.raises(LLMError, match='401 authentication_error'): client(fake).complete('', Q)


def test_no_api_key_fails_before_any_request(fake, monkeypatch):
    monkeypatch.delenv('ANTHROPIC_API_KEY', raising=False)
    fake.add('never sent')
    c = AnthropicClient(base_url=fake.url)  # constructing works without a key
    with pytest.raises(LLMError, match='no Anthropic API key: put ANTHROPIC_API_KEY in the environment'): c.complete('', Q)
    with pytest.raises(LLMError, match='ANTHROPIC_API_KEY'): run_tool_loop(c, '', Q, tools=[add])
    assert fake.requests == []
    monkeypatch.setenv('ANTHROPIC_API_KEY', 'from-env')
    assert AnthropicClient(base_url=fake.url).complete('', Q).text == 'never sent'


def test_on_text_exception_propagates_unchanged(fake):
    fake.add('some text')
    class Stop(Exception): pass
    def cb(s): raise Stop()
    with pytest.raises(Stop): client(fake).complete('', Q, on_text=cb)


# ---- tool loop

def test_tool_loop_two_rounds(fake):
    fake.add({'text': 'Let me compute.', 'tool_calls': [('add', {'a': 40, 'b': 2})]}, 'It is 42.')
    deltas = []
    res = run_tool_loop(client(fake), 'You compute.', Q, tools={'add': add}, on_text=deltas.append)
    assert isinstance(res, LoopResult)
    assert res.reply.text == 'It is 42.' and res.reply.stop_reason == 'end_turn'
    assert ''.join(deltas) == 'Let me compute.It is 42.'
    [tc] = res.tool_calls
    assert isinstance(tc, ToolCall) and (tc.name, tc.input, tc.result, tc.is_error) == ('add', {'a': 40, 'b': 2}, '42', False)
    assert [m['role'] for m in res.messages] == ['assistant', 'user', 'assistant']
    assert len(res.rounds) == 2 and res.rounds[0]['tool_calls'] == [tc] and res.rounds[1]['tool_calls'] == []
    # the second request carries the assistant's tool_use and our tool_result
    second = fake.requests[1]['messages']
    assert second[1]['role'] == 'assistant' and second[1]['content'][-1]['type'] == 'tool_use'
    assert second[1]['content'][-1]['id'] == tc.id
    assert second[2]['content'][0] == {'type': 'tool_result', 'tool_use_id': tc.id, 'content': '42'}
    # the tool_use turn is the cached prefix of the second request
    assert second[1]['content'][-1]['cache_control'] == EPH
    assert fake.requests[0]['tools'][0]['name'] == 'add'


def test_tool_loop_with_call_tool(fake):
    calls = []
    def call_tool(name, fn, inp):
        calls.append((name, inp))
        return {'sum': fn(**inp)}  # non-str results are sent as repr
    fake.add({'tool_calls': [('add', {'a': 1, 'b': 2}), ('add', {'a': 3, 'b': 4})]}, 'Done.')
    res = run_tool_loop(client(fake), '', Q, tools=[add], call_tool=call_tool)
    assert calls == [('add', {'a': 1, 'b': 2}), ('add', {'a': 3, 'b': 4})]
    assert [tc.result for tc in res.tool_calls] == ["{'sum': 3}", "{'sum': 7}"]
    results = fake.requests[1]['messages'][-1]['content']
    assert [b['content'] for b in results] == ["{'sum': 3}", "{'sum': 7}"]


def test_tool_errors_and_unknown_tools_go_back_to_the_model(fake):
    def fail(x: int):
        "Always fails"
        raise RuntimeError(f'bad x {x}')
    fake.add({'tool_calls': [('fail', {'x': 1}), ('nosuch', {})]}, 'Sorry.')
    res = run_tool_loop(client(fake), '', Q, tools=[fail])
    assert [(tc.result, tc.is_error) for tc in res.tool_calls] == [('RuntimeError: bad x 1', True), ("unknown tool: 'nosuch'", True)]
    results = fake.requests[1]['messages'][-1]['content']
    assert all(b['is_error'] is True for b in results)


def test_tool_result_capped(fake):
    def big() -> str:
        "A huge output"
        return 'x' * 50_000
    fake.add({'tool_calls': [('big', {})]}, 'ok')
    res = run_tool_loop(client(fake), '', Q, tools=[big])
    sent = fake.requests[1]['messages'][-1]['content'][0]['content']
    assert len(sent) < 20_200 and 'truncated' in sent and res.tool_calls[0].result == sent


def test_usage_summed_over_rounds(fake):
    u = lambda n: {'input_tokens': n, 'output_tokens': 1, 'cache_creation_input_tokens': 10 * n, 'cache_read_input_tokens': 100 * n}
    fake.add({'tool_calls': [('add', {'a': 1, 'b': 1})], 'usage': u(1)}, {'text': 'two', 'usage': u(2)})
    res = run_tool_loop(client(fake), '', Q, tools=[add])
    assert res.reply.usage == {'input_tokens': 3, 'output_tokens': 2, 'cache_creation_input_tokens': 30, 'cache_read_input_tokens': 300}
    assert [r['usage'] for r in res.rounds] == [u(1), u(2)]


def test_tail_in_every_request_not_in_transcript(fake):
    state = {'n': 0}
    def bump(k: int = 1):
        "Bump the counter"
        state['n'] += k
        return state['n']
    fake.add({'tool_calls': [('bump', {})]}, {'tool_calls': [('bump', {'k': 5})]}, 'Counter is 6.')
    res = run_tool_loop(client(fake), 'sys', Q, tools=[bump], tail=lambda: f"<workspace>n={state['n']}</workspace>")
    tails = [last_user_blocks(b)[-1] for b in fake.requests]
    assert tails == [{'type': 'text', 'text': f'<workspace>n={n}</workspace>'} for n in (0, 1, 6)]
    assert '<workspace>' not in json.dumps(res.messages)
    # only the last user turn of each request has it
    for b in fake.requests: assert json.dumps(b['messages']).count('<workspace>') == 1
    assert res.reply.text == 'Counter is 6.'


def test_max_rounds_respected(fake):
    fake.add(*[{'tool_calls': [('add', {'a': i, 'b': 1})]} for i in range(3)])
    res = run_tool_loop(client(fake), '', Q, tools=[add], max_rounds=3)
    assert len(fake.requests) == 3 and len(res.rounds) == 3
    assert res.reply.stop_reason == 'max_rounds'
    assert [tc.is_error for tc in res.tool_calls] == [False, False, True]
    assert res.tool_calls[-1].result.startswith('not run')
    # the transcript is valid for the API: sending it again with a new prompt is accepted
    fake.add('Picking up.')
    r = client(fake).complete('', Q + res.messages + [{'role': 'user', 'content': 'continue'}])
    assert r.text == 'Picking up.'


def test_thinking_blocks_round_trip_in_loop(fake):
    fake.add({'thinking': 'Need a tool.', 'signature': 'sigA', 'tool_calls': [('add', {'a': 2, 'b': 2})]}, 'Four.')
    res = run_tool_loop(client(fake, max_tokens=2000), '', Q, tools=[add], thinking=1024)
    assert all(b['thinking'] == {'type': 'enabled', 'budget_tokens': 1024} for b in fake.requests)
    assert fake.requests[1]['messages'][1]['content'][0] == {'type': 'thinking', 'thinking': 'Need a tool.', 'signature': 'sigA'}
    assert res.reply.text == 'Four.'


@pytest.mark.parametrize('backend', ['mock', 'fake'])
def test_mock_and_sdk_agree(backend, fake):
    "the same script gives the same loop with MockLLMClient and with the SDK on the fake server"
    script = [{'text': 'Adding.', 'tool_calls': [('add', {'a': 2, 'b': 3}, 'toolu_x')]}, 'Five.']
    if backend == 'mock': c = MockLLMClient(script)
    else: fake.add(*script); c = client(fake)
    res = run_tool_loop(c, 'sys', Q, tools=[add])
    assert res.reply.text == 'Five.'
    assert res.messages == [{'role': 'assistant', 'content': [{'type': 'text', 'text': 'Adding.'},
                                                             {'type': 'tool_use', 'id': 'toolu_x', 'name': 'add', 'input': {'a': 2, 'b': 3}}]},
                            {'role': 'user', 'content': [{'type': 'tool_result', 'tool_use_id': 'toolu_x', 'content': '5'}]},
                            {'role': 'assistant', 'content': [{'type': 'text', 'text': 'Five.'}]}]
    assert set(res.reply.usage) == set(USAGE_KEYS) and res.reply.usage['input_tokens'] > 0


# ---- the fake itself

def test_fake_non_streaming_and_concurrency(fake):
    "plain JSON replies, and requests from several threads each get one script item"
    fake.add(*[f'reply {i}' for i in range(6)])
    sdk = anthropic.Anthropic(api_key='k', base_url=fake.url, max_retries=0)
    msg = sdk.messages.create(model='m', max_tokens=10, messages=Q)
    assert msg.content[0].text == 'reply 0' and msg.usage.input_tokens > 0
    got = []
    ts = [threading.Thread(target=lambda: got.append(client(fake).complete('', Q).text)) for _ in range(5)]
    for t in ts: t.start()
    for t in ts: t.join(30)
    assert sorted(got) == [f'reply {i}' for i in range(1, 6)]


def test_fake_script_exhausted_and_callable(fake):
    fake.add(lambda body: f"you said {body['messages'][-1]['content']}")
    c = client(fake)
    assert c.complete('', [{'role': 'user', 'content': 'hey'}]).text == 'you said hey'
    with pytest.raises(LLMError, match='no scripted reply'): c.complete('', Q)


def test_loop_failure_keeps_partial_result(fake):
    fake.add({'tool_calls': [('add', {'a': 1, 'b': 1})]}, FakeAnthropic.error(529))
    with pytest.raises(LLMError, match='529') as ei: run_tool_loop(client(fake), '', Q, tools=[add])
    part = ei.value.partial
    assert part.reply.stop_reason == 'error' and [tc.result for tc in part.tool_calls] == ['2']
    assert [m['role'] for m in part.messages] == ['assistant', 'user']


# ---- API failures (serve audit #4, #10): what to do is said, and what streamed before a failure is kept

@contextmanager
def cut_stream(text):
    "A Messages API that starts streaming a reply of `text`, then drops the connection (a cut stream): its URL"
    from http.server import ThreadingHTTPServer, BaseHTTPRequestHandler
    events = list(FakeAnthropic()._events({'model': 'm', 'messages': []}, text))[:4]  # message_start, ping, the block's start and first text
    class Handler(BaseHTTPRequestHandler):
        protocol_version = 'HTTP/1.1'
        def log_message(self, *a): pass
        def do_POST(self):
            self.rfile.read(int(self.headers.get('content-length') or 0))
            self.send_response(200); self.send_header('content-type', 'text/event-stream'); self.send_header('transfer-encoding', 'chunked')
            self.end_headers()
            for name, data in events:
                d = f'event: {name}\ndata: {json.dumps(data)}\n\n'.encode()
                self.wfile.write(f'{len(d):X}\r\n'.encode() + d + b'\r\n'); self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR); self.close_connection = True
    srv = ThreadingHTTPServer(('127.0.0.1', 0), Handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True); t.start()
    try: yield f'http://127.0.0.1:{srv.server_address[1]}'
    finally: srv.shutdown(); srv.server_close()


@pytest.mark.parametrize('item, says', [
    (FakeAnthropic.error(529), r'529 overloaded_error: Overloaded \(request id req_fake_\d+\); the API is overloaded: run the prompt again later$'),
    (FakeAnthropic.error(429), r'429 rate_limit_error: .*; the rate limit was reached: wait a minute, then run the prompt again$'),
    (FakeAnthropic.error(500), r'500 api_error: .*; the API failed: run the prompt again later$'),
    ({'text': 'so far', 'stream_error': {'type': 'overloaded_error', 'message': 'Overloaded'}},
     r'while streaming overloaded_error: Overloaded \(request id req_fake_\d+\); the API is overloaded: run the prompt again later$'),
    (FakeAnthropic.error(401), r'401 authentication_error: .*; check the API key \(ANTHROPIC_API_KEY\)$')])
def test_api_errors_say_what_to_do(fake, item, says):
    fake.add(item)
    with pytest.raises(LLMError, match=says): client(fake).complete('', Q)


def test_cut_stream_says_what_to_do():
    with cut_stream('A reply that is cut off in the middle') as url:
        said = []
        with pytest.raises(LLMError, match=r'^the connection to the Anthropic API broke off mid-reply \(RemoteProtocolError: .*\); run the prompt again$'):
            AnthropicClient(api_key='k', base_url=url, max_retries=0).complete('', Q, on_text=said.append)
    assert ''.join(said) == 'A reply that '  # (the first of the reply's three chunks came before the cut)


def test_loop_failure_keeps_the_text_streamed_before_it(fake):
    "a stream that fails after text came: `partial` holds the rounds before it and that text, as a reply so far"
    fake.add({'text': 'Adding.', 'tool_calls': [('add', {'a': 1, 'b': 1})]},
             {'text': 'The sum is', 'stream_error': {'type': 'overloaded_error', 'message': 'Overloaded'}})
    with pytest.raises(LLMError, match='overloaded') as ei: run_tool_loop(client(fake), '', Q, tools=[add])
    part = ei.value.partial
    assert [tc.result for tc in part.tool_calls] == ['2'] and [m['role'] for m in part.messages] == ['assistant', 'user']
    assert [[b.get('text') for b in r['content'] if b['type'] == 'text'] for r in part.rounds] == [['Adding.'], ['The sum is']]
    assert (part.reply.stop_reason, part.reply.text) == ('error', 'The sum is') and part.reply.usage['input_tokens'] > 0
