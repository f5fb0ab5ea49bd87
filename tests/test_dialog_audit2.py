"""Dialog fixes from the second serve audit, checked across a process boundary: the real
dialoghelper client against `headlesnb serve --kernel python3`, the real anthropic SDK against tests/fake_anthropic.py,
a workspace's tools called by the model. Every server process is stopped by PID at the end of its test."""
import json, os, re, subprocess, sys, time
from pathlib import Path

import pytest
from fake_anthropic import FakeAnthropic
from test_dialog_audit import serve, post, wait_for
from headlesnb import DialogManager
from headlesnb.errors import LLMError
from headlesnb.llm import AnthropicClient, MockLLMClient

sys.path.insert(0, str(Path(__file__).parent))
import dh_venv  # noqa: E402

pytestmark = pytest.mark.timeout(300)


def readme_example() -> str:
    "The README's dialoghelper example, verbatim (the block its `run: dialoghelper` marker names)"
    text = (Path(__file__).resolve().parents[1] / 'README.md').read_text()
    return text.split('<!-- run: dialoghelper -->\n```python\n', 1)[1].split('\n```', 1)[0]


def test_readme_client_example_on_a_python3_kernel(tmp_path):
    "#1: the real client adds code with run=True as `%%py\\n...`: a python3 kernel runs it as Python, as the in-process one does"
    py, root = str(dh_venv.ensure_venv()), tmp_path / 'root'
    root.mkdir()
    with serve(root, None, '--kernel', 'python3') as http:
        port = str(http.base_url.port)
        env = {k: v for k, v in os.environ.items() if k != 'PYTHONPATH'}
        r = subprocess.run([py, '-c', readme_example()], env={**env, 'PORT': port}, capture_output=True, text=True, timeout=120, cwd=root)
        assert r.returncode == 0 and r.stdout.strip() == '42', (r.stdout, r.stderr)
        code = json.loads((root / 'notes' / 'today.ipynb').read_text())['cells'][0]['source']
        assert ''.join(code).startswith('%%py\n')  # (the message keeps what the client sent)
        # what a `%%py` message defines is defined in the kernel process
        def run(code):
            mid = post(http, 'add_relative_', dlg_name='notes/today', content=code, msg_type='code', run='true').json()['id']
            read = lambda: post(http, 'read_msg_', dlg_name='notes/today', id_=mid, n=0).json()
            wait_for(lambda: not read()['run'], 60, 'the code to run')
            return read()['output']
        assert run('%%py\ndef twice(x:int): return 2 * x') == ''
        assert run('print(twice(21))') == '42'


def test_failed_prompt_keeps_its_reply_so_far(tmp_path):
    "#4, #10: a 529 after a tool round, and a stream error after text, keep the reply so far with the run_error, which says what to do"
    replies = [{'text': 'I will add.', 'tool_calls': [('add', {'a': 6, 'b': 6})]}, FakeAnthropic.error(529),
               {'text': 'Some partial answer', 'stream_error': {'type': 'overloaded_error', 'message': 'Overloaded'}}, 'Twelve.']
    with FakeAnthropic(replies=replies) as fake:
        dm = DialogManager(tmp_path, llm=AnthropicClient(api_key='t', base_url=fake.url, max_retries=0), save_delay=60)
        try:
            dm.use_dialog('d', mode='create')
            dm.add_message('def add(a:int, b:int):\n    calls.append((a, b)); return a + b\ncalls = []', 'code'); dm.run_message()
            p = dm.add_message('add 6 and 6 with &`add`', 'prompt')['id']
            with pytest.raises(LLMError, match='529 overloaded_error.*; the API is overloaded: run the prompt again later$'): dm.execute_prompt(p)
            m = dm.read_message(p)
            assert dm.item().kernel.namespace['calls'] == [(6, 6)]  # the tool ran: its call is in the reply so far
            assert m['ai_output'].startswith('I will add.') and '"result": "12"' in m['ai_output'], m['ai_output']
            assert m['meta']['run_error'].startswith('LLMError: Anthropic API error 529') and m['meta']['usage']['input_tokens'] > 0
            assert 'interrupted' not in m['meta']
            # the same through the run queue (serve's run_msg_): the stream fails after text came
            dm.queue_run([p]); assert dm.wait_idle(timeout=30)
            m = dm.read_message(p)
            assert m['ai_output'] == 'Some partial answer', m['ai_output']
            assert re.fullmatch(r'LLMError: Anthropic API error while streaming overloaded_error: Overloaded \(request id req_fake_\d+\); '
                                'the API is overloaded: run the prompt again later', m['meta']['run_error']), m['meta']
            dm.save()
            cell = json.loads((tmp_path / 'd.ipynb').read_text())['cells'][-1]
            assert 'Some partial answer' in json.dumps(cell['outputs']) and 'run_error' in cell['metadata']  # on disk too
            dm.execute_prompt(p)  # answered at last: the error goes
            m = dm.read_message(p)
            assert m['ai_output'] == 'Twelve.' and 'run_error' not in m['meta']
        finally: dm.close_all()


def test_workspace_tool_without_a_required_argument(tmp_path):
    "#8: the model calls workspace tools without what they need: one line in the tool's terms, no Python internals"
    from headlesnb.workspace import WorkspaceManager
    (tmp_path / 'a.py').write_text('x = 1\n')
    mock = MockLLMClient([{'tool_calls': [('structure', {}), ('editor', {}), ('grep', {}), ('grep', {'pattern': 'x', 'bogus': 1})]}, 'ok'])
    dm = DialogManager(tmp_path, llm=mock, save_delay=60)
    try:
        WorkspaceManager(tmp_path).attach(dm)
        dm.use_dialog('chat', mode='create')
        r = dm.execute_prompt(dm.add_message('look around', 'prompt')['id'])
        res = [t['result'] for t in r['tool_calls']]
        assert all(t['is_error'] for t in r['tool_calls']), r['tool_calls']
        assert res[0] == "structure: `operation` (one of 'expand', 'collapse', 'search', 'reset', 'on', 'off') is required", res
        assert res[1].startswith("editor: `operation` (one of 'open', 'split', ") and res[1].endswith("'close') is required"), res
        assert res[2] == 'grep: `pattern` is required', res
        assert res[3] == 'grep: no argument `bogus`; its arguments are `pattern`, `path`, `glob`, `ignore_case`', res
        assert not any('locals' in s or 'positional' in s for s in res)
    finally: dm.close_all()


def test_rm_dialog_refuses_notebooks_that_are_not_dialogs(tmp_path):
    "#6: rm_dialog_ on a folder of a plain Jupyter notebook, a binary and a non-notebook `.ipynb` deletes nothing, naming them"
    root, repo = tmp_path / 'root', Path(__file__).resolve().parents[1]
    (root / 'nbs').mkdir(parents=True)
    (root / 'nbs' / '01_utils.ipynb').write_bytes((repo / 'nbs' / '01_utils.ipynb').read_bytes())
    (root / 'nbs' / 'data.ipynb').write_bytes(b'\x00\x01binary'); (root / 'nbs' / 'config.ipynb').write_text('{"not": "a notebook"}')
    before = {p.name: p.read_bytes() for p in (root / 'nbs').iterdir()}
    with serve(root) as http:
        assert post(http, 'create_dialog_', name='nbs/chat').status_code == 200
        r = post(http, 'rm_dialog_', name='nbs')
        assert r.status_code == 400 and r.json()['error'].startswith(
            "cannot delete folder 'nbs': it holds more than dialogs (01_utils.ipynb, config.ipynb, data.ipynb); a notebook is a dialog only"), r.text
        r = post(http, 'rm_dialog_', name='nbs/01_utils')
        assert r.status_code == 400 and 'it is a Jupyter notebook, not a dialog' in r.json()['error'], r.text
        assert {p.name: p.read_bytes() for p in (root / 'nbs').iterdir() if p.name in before} == before
        r = post(http, 'rm_dialog_', name='nbs/chat')  # a dialog is still deleted
        assert r.status_code == 200 and not (root / 'nbs' / 'chat.ipynb').exists(), r.text


def test_long_dialog_names_one_error_naming_the_limit(tmp_path):
    "#12: names past the limit get one error naming it, before any file is touched; the longest name accepted is saved"
    root = tmp_path / 'root'
    root.mkdir()
    with serve(root) as http:
        for n in (249, 251, 300):
            r = post(http, 'create_dialog_', name='b' * n)
            assert r.status_code == 400 and 'a name may have at most 255 characters, each folder or file part at most 200 bytes' in r.json()['error'], (n, r.text)
        assert list(root.iterdir()) == []
        name = 'b' * 200
        assert post(http, 'create_dialog_', name=name).status_code == 200
        assert post(http, 'add_relative_', dlg_name=name, content='kept', placement='at_end').status_code == 200
        assert post(http, 'stop_kernel_', name=name).json() == {'success': 'dialog stopped'}
        assert 'kept' in (root / f'{name}.ipynb').read_text()


# Fixes of the third dialog audit (notes/audit/dialogs.md), across a process boundary: a python3 kernel, the MCP server.

def test_a_raising_tool_leaves_nothing_in_a_python3_kernel(tmp_path):
    "#4: a tool that raises in a kernel process leaves no `__headlesnb_call__` (or `__headlesnb_ret__`) in the user's namespace"
    dm = DialogManager(tmp_path, llm=MockLLMClient([{'tool_calls': [('fine', {}), ('boom', {'x': 1})]}, 'done']), save_delay=60)
    try:
        dm.use_dialog('k', mode='create', kernel='python3')
        dm.add_message('def boom(x:int):\n    "raises"\n    raise ValueError("kaboom")\ndef fine(): return "ok"', 'code')
        assert dm.run_message()['status'] == 'ok'
        r = dm.execute_prompt(dm.add_message('try &`boom` and &`fine`', 'prompt')['id'])
        assert [(c['name'], c['is_error']) for c in r['tool_calls']] == [('fine', False), ('boom', True)], r['tool_calls']
        out = dm.execute_code("print(sorted(k for k in globals() if 'headlesnb' in k))")['outputs']
        assert ''.join(out[0]['text']) == '[]\n', out
    finally: dm.close_all()


def test_mcp_execute_prompt_says_what_a_reply_lacks_and_which_tools_were_not_offered(tmp_path, monkeypatch):
    """#2, #13, #16, #7 over MCP: a reply cut at max_tokens or refused says so; the dialog's own `grep`, named in the prompt,
    is called instead of the workspace's, which the answer names as left out; a named tool missing from the kernel is named
    with what to do; a prompt that failed before any reply is recorded and read back without the model's placeholder"""
    import anyio
    from test_mcp import stdio_session, ok, err
    from test_mcp_runs_audit import new_msg
    replies = [{'tool_calls': [('grep', {'pattern': 'zzz'})]}, {'text': 'partial answer cut', 'stop_reason': 'max_tokens'},
               {'text': 'I started', 'stop_reason': 'refusal'}, FakeAnthropic.error(529)]
    with FakeAnthropic(replies=replies) as fake:
        monkeypatch.setenv('ANTHROPIC_BASE_URL', fake.url); monkeypatch.setenv('ANTHROPIC_API_KEY', 'test')
        async def go():
            async with stdio_session(tmp_path) as s:
                await ok(s, 'use_dialog', dialog_name='d', mode='create')
                code = await new_msg(s, 'def grep(pattern:str):\n    "my own grep"\n    return "MINE " + pattern', 'code')
                await ok(s, 'run_msg', msg_id=code)
                p = await new_msg(s, 'use my &`grep` and &`ad`', 'prompt')
                said = await ok(s, 'execute_prompt', msg_id=p)
                assert f'reply to {p} after 1 tool call (cut at the max_tokens limit (4096): raise max_tokens or ask it to continue):' in said, said
                assert '"result": "MINE zzz"' in said, said  # the user's function ran, not the workspace's grep
                assert "\nnot offered as a tool: ad (no function of that name in the dialog's kernel: run the code that defines it)" in said, said
                assert '\nworkspace tool not offered: grep (' in said, said
                assert [t['description'] for t in fake.requests[0]['tools'] if t['name'] == 'grep'] == ['my own grep']
                assert '--- reply (cut at the max_tokens limit (4096)' in await ok(s, 'read_msg', msg_id=p, n=0)
                q = await new_msg(s, 'something risky', 'prompt')
                assert f'reply to {q} (the model refused to answer' in await ok(s, 'execute_prompt', msg_id=q)
                f = await new_msg(s, 'fail 529', 'prompt')
                assert 'overloaded' in await err(s, 'execute_prompt', msg_id=f)
                read = await ok(s, 'read_msg', msg_id=f, n=0)
                assert 'result="pending"' not in read and '--- no reply: its last run failed: LLMError: Anthropic API error 529' in read, read
        anyio.run(go)
