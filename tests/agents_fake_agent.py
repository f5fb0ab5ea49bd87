"""A stand-in for an agent CLI such as Claude Code, for the agents tests (the real `claude` is not installed here).

    python agents_fake_agent.py interactive PROMPT   # reports through the hooks like Claude Code, asks a person, stops
    python agents_fake_agent.py sleep                # runs until it is killed (with a child process of its own)
    python agents_fake_agent.py edit FILE LINE TEXT  # replaces line LINE (1-based) of FILE in its working folder, exits
    python agents_fake_agent.py fail                 # prints a message and exits with status 3

Hooks are called as Claude Code calls them: the command in $FAKE_AGENT_HOOK (a JSON list, e.g. ["headlesnb", "hook"])
plus the event, with Claude Code's hook JSON on stdin and this process's environment (SCOPE_SESSION_ID, ...).
"""
import json, os, subprocess, sys, tempfile, time, uuid
from pathlib import Path

SESSION = str(uuid.uuid4())


def hook(event, name, **fields):
    argv = json.loads(os.environ.get('FAKE_AGENT_HOOK') or '["headlesnb", "hook"]') + [event]
    transcript = str(Path(tempfile.gettempdir()) / f'fake-agent-{SESSION}.jsonl')
    payload = dict(session_id=SESSION, transcript_path=transcript, cwd=os.getcwd(), permission_mode='default',
                   hook_event_name=name, **fields)
    r = subprocess.run(argv, input=json.dumps(payload), capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout == '', (r.returncode, r.stdout, r.stderr)  # hooks print nothing, exit 0
    return transcript


def interactive(prompt):
    print(f"FAKE AGENT {os.environ.get('SCOPE_SESSION_ID')} READY: {prompt.splitlines()[0]}", flush=True)
    hook('activity', 'PreToolUse', tool_name='Read', tool_input=dict(file_path=str(Path.cwd() / 'notes.txt')), tool_use_id='toolu_01fake')
    hook('notify', 'Notification', message='Claude needs your permission to use Bash', notification_type='permission_prompt')
    line = input('waiting for input> ')
    hook('task', 'UserPromptSubmit', prompt=line)
    transcript = hook('activity', 'PreToolUse', tool_name='Bash', tool_input=dict(command=f'echo {line}', description='echo'), tool_use_id='toolu_02fake')
    with open(transcript, 'w') as f:
        for e in [dict(type='user', sessionId=SESSION, message=dict(role='user', content=prompt)),
                  dict(type='assistant', sessionId=SESSION, message=dict(role='assistant', model='fake', content=[dict(type='text', text='thinking it over')])),
                  dict(type='user', sessionId=SESSION, message=dict(role='user', content=line)),
                  dict(type='assistant', sessionId=SESSION, message=dict(role='assistant', model='fake', content=[
                      dict(type='tool_use', id='toolu_02fake', name='Bash', input=dict(command='true')),
                      dict(type='text', text=f'fake result: {line}')]))]:
            f.write(json.dumps(e) + '\n')
    hook('stop', 'Stop', stop_hook_active=False)
    print('BYE', flush=True)
    time.sleep(0.5)


def sleep():
    child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(3600)'])
    print(f'SLEEPING {os.getpid()} {child.pid}', flush=True)
    Path(os.environ['FAKE_AGENT_PIDS']).joinpath(os.environ['SCOPE_SESSION_ID']).write_text(f'{os.getpid()} {child.pid}') if os.environ.get('FAKE_AGENT_PIDS') else None
    time.sleep(3600)


def edit(file, line, text):
    p = Path(file)
    lines = p.read_text().split('\n')
    lines[int(line) - 1] = text
    p.write_text('\n'.join(lines))
    print(f'edited {file} line {line}', flush=True)


if __name__ == '__main__':
    mode, args = sys.argv[1], sys.argv[2:]
    if mode == 'interactive': interactive(args[0])
    elif mode == 'sleep': sleep()
    elif mode == 'edit': edit(*args)
    elif mode == 'fail': print('something went wrong', flush=True); sys.exit(3)
