"""Workspaces of several processes editing one file (audit workspace-proxy #0): every edit a process was told is done is in
the file at the end; the others were refused as conflicts. Real processes over one root, each with a workspace of its own,
as two `headlesnb mcp --workspace alice|bob` servers have; stopped by PID."""
import json, subprocess, sys, textwrap

import pytest

pytestmark = pytest.mark.timeout(300)

WRITER = textwrap.dedent("""
    import json, os, sys, time
    from headlesnb.errors import ConflictError
    from headlesnb.workspace import WorkspaceManager
    root, name, n, writers = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    ws = WorkspaceManager(root, code_map=False).open_workspace(name)
    e = ws.open_editor('x.txt')['id']
    open(os.path.join(root, f'ready.{name}'), 'w').close()
    while sum(f.startswith('ready.') for f in os.listdir(root)) < writers: time.sleep(0.001)  # all writers start together
    acked, refused = [], 0
    for i in range(n):
        try: ws.insert(e, 1, f'{name}{i}'); acked.append(f'{name}{i}')
        except ConflictError: refused += 1; ws.reload_editor(e)  # as a model would: take theirs, go on
    print(json.dumps(dict(acked=acked, refused=refused)))
    """)


def test_concurrent_editors_lose_no_acknowledged_edit(tmp_path):
    "Writers racing on one file through editors: each acknowledged insert is in the file, each other one refused as a conflict"
    (tmp_path / 'x.txt').write_text('end\n')
    names, n = ('alice', 'bob', 'carol'), 80
    ps = [subprocess.Popen([sys.executable, '-c', WRITER, str(tmp_path), w, str(n), str(len(names))], stdout=subprocess.PIPE, text=True)
          for w in names]
    outs = [json.loads(p.communicate(timeout=240)[0]) for p in ps]
    assert all(p.returncode == 0 for p in ps)
    lines = set((tmp_path / 'x.txt').read_text().splitlines())
    acked = [l for o in outs for l in o['acked']]
    lost = [l for l in acked if l not in lines]
    assert not lost, f'{len(lost)} of {len(acked)} acknowledged edits lost: {lost}'
    assert sum(o['refused'] for o in outs) > 0, 'the writers never met: the race was not run'
    assert len(acked) + sum(o['refused'] for o in outs) == n * len(names)
