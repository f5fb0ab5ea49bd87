"""A fake Anthropic Messages API on 127.0.0.1, for testing with the real `anthropic` SDK.

    with FakeAnthropic(replies=['Hello!', {'tool_calls': [('add', {'a': 1})]}]) as fake:
        client = AnthropicClient(api_key='test', base_url=fake.url)
        ...
        fake.requests      # JSON bodies of every POST /v1/messages, in order
        fake.headers       # their headers (lower-case names), same order

It is a real HTTP server (standard library only, a thread per connection) serving:

- `POST /v1/messages`: streaming (SSE with the real event sequence: message_start, ping, content_block_start /
  content_block_delta (text_delta, input_json_delta, thinking_delta + signature_delta) / content_block_stop,
  message_delta with stop_reason and usage, message_stop) or a plain JSON message when `stream` is not set;
- `POST /v1/messages/count_tokens`: `{"input_tokens": N}` (an estimate, or as set by `count_tokens=`);
  their bodies are in `fake.count_requests`.

Options: `validate` (below), `delay` (seconds between SSE events, to watch streaming), `api_key` (requests
without it get a 401 authentication_error).

Each POST /v1/messages consumes one item of the script (`replies`, extended with `fake.add(...)`); an item is

- a `str`: a text reply;
- a `dict` with any of `text`, `thinking`, `tool_calls` (`(name, input)` / `(name, input, id)` tuples or dicts),
  `content` (raw blocks), `stop_reason`, `usage` (overrides counters), `signature`;
- a `list` of raw content blocks;
- `FakeAnthropic.error(status, message, type)`: an HTTP error with the API's error JSON
  (`{"type": "error", "error": {"type", "message"}, "request_id"}`); the SDK is told not to retry it
  (`x-should-retry: false`) unless made with `retry=True`;
- `{'stream_error': {'type', 'message'}, 'text': ...}`: starts streaming, then sends an SSE `error` event;
- a callable taking the request body and returning one of the above.

Usage is estimated (about 4 characters per token) and prompt caching is simulated: the prefix up to the last
`cache_control` mark is "written" the first time it is seen and "read" when a later request starts with it
(looking back up to 20 blocks, like the API), giving `cache_creation_input_tokens` / `cache_read_input_tokens`.

With `validate=True` (default) requests are checked for mistakes the real API rejects with a 400
(empty text, tool_use without tool_result, more than 4 cache breakpoints, bad thinking budget, bad tool names).
"""
import json, re, socket, threading, time, hashlib, itertools
from http.server import ThreadingHTTPServer, BaseHTTPRequestHandler

__all__ = ['FakeAnthropic']

_ERROR_TYPES = {400: 'invalid_request_error', 401: 'authentication_error', 402: 'billing_error', 403: 'permission_error',
                404: 'not_found_error', 413: 'request_too_large', 429: 'rate_limit_error', 500: 'api_error',
                504: 'timeout_error', 529: 'overloaded_error'}
_MESSAGES = {401: 'invalid x-api-key', 429: 'Number of request tokens has exceeded your per-minute rate limit',
             500: 'Internal server error', 529: 'Overloaded'}
_TOOL_NAME = re.compile(r'^[a-zA-Z0-9_-]{1,128}$')


def _tokens(o) -> int:
    if not o: return 0
    s = o if isinstance(o, str) else json.dumps(o, ensure_ascii=False, sort_keys=True)
    return (len(s) + 3) // 4


def _chunks(s, n=3):
    size = max(1, -(-len(s) // n))
    return [s[i:i + size] for i in range(0, len(s), size)] or ['']


def _blocks(c):
    return [{'type': 'text', 'text': c}] if isinstance(c, str) else list(c or [])


def _strip_cc(o):
    if isinstance(o, dict): return {k: _strip_cc(v) for k, v in o.items() if k != 'cache_control'}
    if isinstance(o, (list, tuple)): return [_strip_cc(v) for v in o]  # (the usage items are (where, block) tuples)
    return o


class _ApiError(Exception):
    def __init__(self, status, message, type=None, retry=False, retry_after=None):
        super().__init__(message)
        self.status, self.message, self.type = status, message, type or _ERROR_TYPES.get(status, 'api_error')
        self.retry, self.retry_after = retry, retry_after


class FakeAnthropic:
    "A scripted Messages API server on 127.0.0.1 (free port); use as a context manager or `start()`/`stop()`"

    def __init__(self, replies=None,
                 count_tokens=None,  # answer of count_tokens: None (estimate), an int, a callable(body) or an `error(...)` item
                 validate=True,      # reject requests the real API would reject (400)?
                 delay=0.0,          # seconds between SSE events
                 api_key=None,       # if set, requests without this key (x-api-key or Bearer) get a 401
                 host='127.0.0.1', port=0):
        self.replies, self.count_tokens, self.validate, self.delay = list(replies or []), count_tokens, validate, delay
        self.api_key = api_key
        self.host, self.port = host, port
        self.requests, self.headers, self.count_requests = [], [], []
        self.lock = threading.Lock()
        self._ids = itertools.count(1)
        self._cache = set()
        self._server = self._thread = None

    # ---- script helpers
    @staticmethod
    def error(status=529, message=None, type=None, retry=False, retry_after=None):
        "A script item making the API answer with an HTTP error"
        t = type or _ERROR_TYPES.get(status, 'api_error')
        return {'error': {'status': status, 'type': t, 'message': message or _MESSAGES.get(status) or t.replace('_', ' ').capitalize()},
                'retry': retry, 'retry_after': retry_after}

    def add(self, *replies):
        "Append `replies` to the script"
        with self.lock: self.replies.extend(replies)

    @property
    def url(self) -> str: return f'http://{self.host}:{self.port}'

    # ---- life cycle
    def start(self):
        fake = self
        class Handler(_Handler): pass
        Handler.fake = fake
        self._server = _Server((self.host, self.port), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={'poll_interval': 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self):
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._thread.join(5)
            self._server = self._thread = None

    def __enter__(self): return self.start()
    def __exit__(self, *exc): self.stop()

    # ---- request handling (called from handler threads)
    def _new_id(self, prefix): return f'{prefix}_fake_{next(self._ids):04d}'

    def _next_spec(self, body):
        with self.lock:
            if not self.replies: raise _ApiError(500, f'fake: no scripted reply left for request {len(self.requests)}')
            spec = self.replies.pop(0)
        if callable(spec): spec = spec(body)
        return spec

    def _content(self, spec):
        "Content blocks, stop_reason, usage override of a script item"
        if isinstance(spec, str): blocks, extra = [{'type': 'text', 'text': spec}], {}
        elif isinstance(spec, list):
            blocks, extra = [dict(b) for b in spec], {}
            for b in blocks:
                if b.get('type') == 'tool_use': b.setdefault('id', self._new_id('toolu')); b.setdefault('input', {})
        elif isinstance(spec, dict):
            blocks, extra = [], spec
            if spec.get('thinking'):
                blocks.append({'type': 'thinking', 'thinking': spec['thinking'], 'signature': spec.get('signature', 'sig-fake')})
            if spec.get('text'): blocks.append({'type': 'text', 'text': spec['text']})
            for tc in spec.get('tool_calls') or ():
                if isinstance(tc, dict): name, inp, tid = tc['name'], tc.get('input', {}), tc.get('id')
                else: name, inp, tid = (tuple(tc) + (None,))[:3]
                blocks.append({'type': 'tool_use', 'id': tid or self._new_id('toolu'), 'name': name, 'input': dict(inp or {})})
            blocks += [dict(b) for b in spec.get('content') or ()]
        else: raise _ApiError(500, f'fake: bad script item {spec!r}')
        stop = extra.get('stop_reason') or ('tool_use' if any(b['type'] == 'tool_use' for b in blocks) else 'end_turn')
        return blocks, stop, extra.get('usage') or {}

    def _usage(self, body, blocks, override):
        "Estimated usage with simulated prompt caching"
        items = [('tool', t) for t in body.get('tools') or []] + [('system', b) for b in _blocks(body.get('system'))]
        for i, m in enumerate(body.get('messages') or []):
            items += [(f'msg{i}:{m.get("role")}', b) for b in _blocks(m.get('content'))]
        total = _tokens(items)
        marks = [i for i, (_, b) in enumerate(items) if isinstance(b, dict) and 'cache_control' in b]
        read = written = 0
        if marks:
            end = marks[-1]
            key = lambda k: hashlib.sha1((body.get('model', '') + json.dumps(_strip_cc(items[:k + 1]), sort_keys=True)).encode()).hexdigest()
            prefix = _tokens(_strip_cc(items[:end + 1]))
            with self.lock:
                hit = next((k for k in range(end, max(-1, end - 21), -1) if key(k) in self._cache), None)
                self._cache.add(key(end))
            read = _tokens(_strip_cc(items[:hit + 1])) if hit is not None else 0
            written = max(0, prefix - read)
        usage = {'input_tokens': max(1, total - read - written), 'output_tokens': max(1, _tokens(blocks)),
                 'cache_creation_input_tokens': written, 'cache_read_input_tokens': read}
        usage.update(override)
        return usage

    def _check(self, body):
        "Raise `_ApiError(400)` for requests the real API would reject"
        if not isinstance(body.get('model'), str) or not body['model']: raise _ApiError(400, 'model: Field required')
        if not isinstance(body.get('max_tokens'), int) or body['max_tokens'] < 1: raise _ApiError(400, 'max_tokens: Field required')
        msgs = body.get('messages')
        if not isinstance(msgs, list) or not msgs: raise _ApiError(400, 'messages: at least one message is required')
        for t in body.get('tools') or []:
            if 'name' in t and not _TOOL_NAME.match(str(t['name'])):
                raise _ApiError(400, f"tools: name {t['name']!r} should match pattern '^[a-zA-Z0-9_-]{{1,128}}$'")
            if 'input_schema' in t and t['input_schema'].get('type') != 'object':
                raise _ApiError(400, 'tools: input_schema.type: Input should be \'object\'')
        for i, m in enumerate(msgs):
            if m.get('role') not in ('user', 'assistant'): raise _ApiError(400, f'messages.{i}.role: Input should be \'user\' or \'assistant\'')
            blocks = _blocks(m.get('content'))
            if not blocks and not (i == len(msgs) - 1 and m['role'] == 'assistant'):
                raise _ApiError(400, f'messages.{i}: all messages must have non-empty content except for the optional final assistant message')
            for j, b in enumerate(blocks):
                if b.get('type') == 'text' and not b.get('text'): raise _ApiError(400, f'messages.{i}.content.{j}: text content blocks must be non-empty')
            uses = [b['id'] for b in blocks if b.get('type') == 'tool_use'] if m['role'] == 'assistant' else []
            if uses and i < len(msgs) - 1:
                nxt = msgs[i + 1]
                got = {b.get('tool_use_id') for b in _blocks(nxt.get('content')) if b.get('type') == 'tool_result'} if nxt.get('role') == 'user' else set()
                if missing := [u for u in uses if u not in got]:
                    raise _ApiError(400, f'messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: '
                                         f'{", ".join(missing)}. Each `tool_use` block must have a corresponding `tool_result` block in the next message.')
            if m['role'] == 'user':
                prev = {b.get('id') for b in _blocks(msgs[i - 1].get('content')) if b.get('type') == 'tool_use'} if i and msgs[i - 1].get('role') == 'assistant' else set()
                for j, b in enumerate(blocks):
                    if b.get('type') == 'tool_result' and b.get('tool_use_id') not in prev:
                        raise _ApiError(400, f'messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` blocks: {b.get("tool_use_id")}. '
                                             'Each `tool_result` block must have a corresponding `tool_use` block in the previous message.')
        n = json.dumps(body).count('"cache_control"')
        if n > 4: raise _ApiError(400, f'A maximum of 4 blocks with cache_control may be provided. Found {n}.')
        th = body.get('thinking')
        if isinstance(th, dict) and th.get('type') == 'enabled':
            b = th.get('budget_tokens')
            if not isinstance(b, int) or b < 1024: raise _ApiError(400, 'thinking.enabled.budget_tokens: Input should be greater than or equal to 1024')
            if b >= body['max_tokens']: raise _ApiError(400, '`max_tokens` must be greater than `thinking.budget_tokens`.')

    def _message(self, body, blocks, stop, usage):
        return {'id': self._new_id('msg'), 'type': 'message', 'role': 'assistant', 'model': body.get('model', 'fake'),
                'content': blocks, 'stop_reason': stop, 'stop_sequence': None, 'usage': usage}

    def _events(self, body, spec):
        "The SSE events (name, data) streaming the reply to `spec`"
        blocks, stop, override = self._content(spec)
        usage = self._usage(body, blocks, override)
        start = self._message(body, [], None, {**usage, 'output_tokens': 1})
        yield 'message_start', {'type': 'message_start', 'message': start}
        yield 'ping', {'type': 'ping'}
        for i, b in enumerate(blocks):
            t = b['type']
            if t == 'text': first, deltas = {'type': 'text', 'text': ''}, [{'type': 'text_delta', 'text': s} for s in _chunks(b['text'])]
            elif t == 'thinking':
                first = {'type': 'thinking', 'thinking': '', 'signature': ''}
                deltas = [{'type': 'thinking_delta', 'thinking': s} for s in _chunks(b['thinking'])] + [{'type': 'signature_delta', 'signature': b.get('signature', '')}]
            elif t == 'tool_use':
                first = {'type': 'tool_use', 'id': b['id'], 'name': b['name'], 'input': {}}
                deltas = [{'type': 'input_json_delta', 'partial_json': s} for s in _chunks(json.dumps(b['input']) if b['input'] else '', 2)]
            else: first, deltas = b, []
            yield 'content_block_start', {'type': 'content_block_start', 'index': i, 'content_block': first}
            for d in deltas: yield 'content_block_delta', {'type': 'content_block_delta', 'index': i, 'delta': d}
            yield 'content_block_stop', {'type': 'content_block_stop', 'index': i}
        if isinstance(spec, dict) and 'stream_error' in spec:
            err = spec['stream_error'] or {}
            yield 'error', {'type': 'error', 'error': {'type': err.get('type', 'overloaded_error'), 'message': err.get('message', 'Overloaded')}}
            return
        yield 'message_delta', {'type': 'message_delta', 'delta': {'stop_reason': stop, 'stop_sequence': None}, 'usage': usage}
        yield 'message_stop', {'type': 'message_stop'}


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        import sys
        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)): return  # a client that hung up mid-stream
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'
    fake: FakeAnthropic = None

    def log_message(self, *args): pass

    def setup(self):
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # a reply's head and body are two writes: no Nagle delay

    def _send_json(self, status, obj, headers=None):
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header('content-type', 'application/json')
        self.send_header('content-length', str(len(data)))
        self.send_header('request-id', self._rid)
        for k, v in (headers or {}).items(): self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _send_error(self, e: _ApiError):
        h = {'x-should-retry': 'true' if e.retry else 'false'}
        if e.retry_after is not None: h['retry-after-ms'] = str(int(e.retry_after * 1000))
        self._send_json(e.status, {'type': 'error', 'error': {'type': e.type, 'message': e.message}, 'request_id': self._rid}, h)

    def _chunk(self, data: bytes):
        self.wfile.write(f'{len(data):X}\r\n'.encode() + data + b'\r\n')
        self.wfile.flush()

    def _auth(self):
        if self.fake.api_key is not None:
            given = self.headers.get('x-api-key') or (self.headers.get('authorization') or '').removeprefix('Bearer ')
            if given != self.fake.api_key: raise _ApiError(401, 'invalid x-api-key')

    def do_POST(self):
        fake = self.fake
        self._rid = fake._new_id('req')
        try: body = json.loads(self.rfile.read(int(self.headers.get('content-length') or 0)) or b'{}')
        except ValueError: return self._send_error(_ApiError(400, 'request body is not valid JSON'))
        path = self.path.split('?')[0].rstrip('/')
        try:
            if path == '/v1/messages/count_tokens':
                with fake.lock: fake.count_requests.append(body)
                self._auth()
                ct = fake.count_tokens
                if isinstance(ct, dict) and 'error' in ct: raise _ApiError(ct['error']['status'], ct['error']['message'], ct['error']['type'])
                n = ct(body) if callable(ct) else ct if isinstance(ct, int) else _tokens([body.get('tools'), body.get('system'), body.get('messages')])
                return self._send_json(200, {'input_tokens': n})
            if path != '/v1/messages': raise _ApiError(404, f'Not found: {self.path}')
            with fake.lock:
                fake.requests.append(body)
                fake.headers.append({k.lower(): v for k, v in self.headers.items()})
            self._auth()
            if fake.validate: fake._check(body)
            spec = fake._next_spec(body)
            if isinstance(spec, dict) and 'error' in spec:
                e = spec['error']
                raise _ApiError(e['status'], e['message'], e['type'], spec.get('retry', False), spec.get('retry_after'))
        except _ApiError as e: return self._send_error(e)
        except Exception as e: return self._send_error(_ApiError(500, f'fake: {type(e).__name__}: {e}'))
        try:
            if not body.get('stream'):
                blocks, stop, override = fake._content(spec)
                return self._send_json(200, fake._message(body, blocks, stop, fake._usage(body, blocks, override)))
            events = list(fake._events(body, spec))
        except _ApiError as e: return self._send_error(e)
        except Exception as e: return self._send_error(_ApiError(500, f'fake: {type(e).__name__}: {e}'))
        self.send_response(200)
        self.send_header('content-type', 'text/event-stream')
        self.send_header('cache-control', 'no-cache')
        self.send_header('transfer-encoding', 'chunked')
        self.send_header('request-id', self._rid)
        self.end_headers()
        try:
            for name, data in events:
                self._chunk(f'event: {name}\ndata: {json.dumps(data)}\n\n'.encode())
                if fake.delay: time.sleep(fake.delay)
            self.wfile.write(b'0\r\n\r\n')
            self.wfile.flush()
        except (ConnectionError, TimeoutError): pass  # the client hung up
